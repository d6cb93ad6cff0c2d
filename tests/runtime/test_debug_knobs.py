"""Knobs for finding what goes wrong: ``single_op_kernels`` off (a kernel that would compute one
lone ATen op runs it through ATen instead), ``one_kernel_per_op`` (no inlining, no fusion:
each op its own stored buffer and kernel) and ``guards`` off (a graph with symbolic sizes
runs its first size class for every call; a failing first call raises instead of rerunning
eagerly). Results stay eager's, forward and backward, on both backends."""
import warnings

import pytest
import torch

import braze
from braze import backend as braze_backend
from helpers import Compiled, check, rand


def three_kernels(x, y, z):
    """Three kernels (their sizes differ; no foreach): exp alone, relu + add, mul + sum."""
    return x.exp(), y.t().relu() + 1, (z * 2).sum(1)


@braze.config.patch(foreach=False)
def test_single_op_kernels_off_runs_lone_ops_through_aten(backend):
    args = rand(6, 10), rand(7, 3), rand(5, 9)
    default = braze.explain(three_kernels, *args)
    assert len(default.kernels) == 3 and not default.externs
    with braze.config.patch(single_op_kernels=False):
        compiled = check(three_kernels, *args)
    assert sorted(k.ops for k in compiled.kernels) == [["aten.mul.Tensor", "aten.sum.dim_IntList"],
                                                       ["aten.relu.default", "aten.add.Tensor"]]
    assert [g.externs for g in compiled.graphs] == [["aten.exp.default"]]
    assert not [f for g in compiled.graphs for f in g.fallbacks]  # on purpose: not counted as fallbacks


def test_single_op_kernels_off_forward_and_backward(backend):
    """A lone reduction and a lone op on each side of an ATen call; the backward's lone ops too."""
    f = lambda x, w: ((torch.nn.functional.gelu(x @ w) * 2).softmax(-1), x.sum(0))
    args = rand(4, 8, grad=True), rand(8, 8, grad=True)
    with braze.config.patch(single_op_kernels=False):
        compiled = check(f, *args, grad=True)
        report = braze.explain(f, *args)
    assert all(len(dict.fromkeys(k.ops)) > 1 for k in compiled.kernels), [str(k) for k in compiled.kernels]
    assert "aten.sum.dim_IntList" in report.externs
    assert len(report.kernels) < len(braze.explain(f, *args).kernels)


def test_one_kernel_per_op_stores_every_op(backend):
    f = lambda x, w, b: torch.nn.functional.layer_norm(x * 2, (16,), w, b).relu() + x.sum(0)
    args = rand(8, 16, grad=True), rand(16, grad=True), rand(16, grad=True)
    default = braze.explain(f, *args)
    with braze.config.patch(one_kernel_per_op=True):
        compiled = check(f, *args, grad=True)
        report = braze.explain(f, *args)
    assert len(compiled.kernels) > len(default.kernels)
    for graph in report.graphs:  # nothing inlined, nothing fused; one op per kernel (var_mean: one per result)
        assert graph.decisions and all(d.stored for d in graph.decisions if d.reason != "unused")
        assert not any(r.fused for r in graph.fusion_log)
        assert all(len(k.ops) == 1 for k in graph.kernels), [str(k) for k in graph.kernels]


def test_guards_off_runs_the_first_size_class_for_every_size():
    """Rows fewer than two per thread take another kernel shape: a second size class, unless
    the guards are off."""
    f = lambda x: (x * 3).sum(-1)
    counts = {}
    for guards in (True, False):
        torch._dynamo.reset()
        g = torch.compile(f, backend="braze", dynamic=True, options={"guards": guards})
        with braze.config.patch(num_threads=2), Compiled() as compiled:
            for n in (5, 3, 7):
                x = torch.randn(n, 3)
                result = g(x)
                if guards:
                    torch.testing.assert_close(result, f(x))
        counts[guards] = len(compiled.graphs)
    assert counts == {True: 2, False: 1}


def break_kernel0(monkeypatch):
    """Every graph compiled from now on gets a ``kernel0`` that raises."""
    real_compile = braze_backend.compile_graph
    monkeypatch.setattr(braze_backend, "_warned", set())

    def compile_graph(*args, **kwargs):
        compiled = real_compile(*args, **kwargs)

        def failing(*a, **k):
            raise RuntimeError("kernel0 broken on purpose")
        compiled.run.__globals__["kernel0"] = failing
        return compiled
    monkeypatch.setattr(braze_backend, "compile_graph", compile_graph)


@pytest.mark.parametrize("guards", [True, False])
def test_guards_off_lets_a_failing_first_call_raise(monkeypatch, guards):
    break_kernel0(monkeypatch)
    f = lambda x: x.sin() * 2
    x = torch.randn(5)
    g = torch.compile(f, backend="braze", options={"guards": guards})
    with braze.config.patch(strict=False), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if guards:  # the default: the inputs are restored and the graph reruns eagerly
            torch.testing.assert_close(g(x), f(x))
            assert any("kernel0" in str(w.message) for w in caught)
        else:
            with pytest.raises(RuntimeError, match="kernel0 broken on purpose"):
                g(x)


def test_single_op_kernels_off_with_scatters(backend):
    """A scatter's base read by an ATen call (the lone ops around it) keeps its copy."""
    base, src = rand(4, 6), rand(3, 6)
    unique = torch.stack([torch.randperm(4)[:3] for _ in range(6)], 1)  # distinct rows per column
    repeated = torch.randint(0, 6, (4, 9))
    with braze.config.patch(single_op_kernels=False):
        compiled = check(lambda b, s, u, r: (b.scatter(0, u, s), b.scatter(0, u, -1.5), b.scatter(-2, u[:2, :4], s),
                                             b.scatter_add(1, r, s.repeat(2, 2)[:4, :9] + 1),
                                             b.scatter_reduce(1, r, s.repeat(2, 2)[:4, :9], "sum", include_self=False)),
                         base, src, unique, repeated)
    assert [g.externs for g in compiled.graphs] and not [f for g in compiled.graphs for f in g.fallbacks]
