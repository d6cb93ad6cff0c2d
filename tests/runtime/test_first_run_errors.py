"""Errors when a compiled graph first runs (runtime/guard.py): the graph reruns eagerly
with one warning naming the kernel or op, its mutated inputs restored first so an update
is applied once; strict mode raises ``BrazeError`` instead. Failures are injected by
replacing an object in a compiled wrapper's namespace (a kernel launcher, or ``torch`` with
one extern op rerouted) with one that raises, after running the real one where it writes."""
import types
import warnings

import pytest
import torch

import braze
from braze import backend
from braze.errors import BrazeError
from braze.runtime.guard import guarded, mutated_inputs
from helpers import TRITON_ONLY, Compiled


def break_first_runs(monkeypatch, name, error, run_real: bool = True, wrap=lambda failing: failing) -> list:
    """Every graph compiled from now on gets the wrapper global ``name`` (or
    ``name(compiled)``) replaced by ``wrap(f)``, ``f`` a function that runs the real one
    (when ``run_real``: a kernel that already wrote into inputs) and then raises
    ``error()``. Returns the list of calls to ``f``. Warnings already given are forgotten."""
    real_compile, calls = backend.compile_graph, []
    monkeypatch.setattr(backend, "_warned", set())

    def compile_graph(*args, **kwargs):
        compiled = real_compile(*args, **kwargs)
        namespace, key = compiled.run.__globals__, name if isinstance(name, str) else name(compiled)
        real = namespace[key]

        def failing(*a, **k):
            calls.append(compiled.name)
            if run_real:
                real(*a, **k)
            raise error()
        namespace[key] = wrap(failing)
        return compiled
    monkeypatch.setattr(backend, "compile_graph", compile_graph)
    return calls


def out_of_resources():
    return RuntimeError("out of resources: shared memory, required 300000, hardware limit 232448")


def braze_warnings(caught) -> list:
    return [str(w.message) for w in caught if str(w.message).startswith("braze: running")]


def test_failing_kernel_runs_eagerly_warns_once_and_keeps_working(monkeypatch):
    calls = break_first_runs(monkeypatch, "kernel0", out_of_resources)
    f = lambda x, y: (x.sin() * 2 + y.cos()).softmax(-1)
    g = torch.compile(f, backend="braze")
    with braze.config.patch(strict=False), Compiled() as compiled, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x, y = torch.randn(4, 8), torch.randn(4, 8)
            torch.testing.assert_close(g(x, y), f(x, y))
    assert len(compiled.graphs) == 1 and len(calls) == 1  # eager after the failure
    messages = braze_warnings(caught)
    assert len(messages) == 1, messages
    assert messages[0].startswith("braze: running an inference graph eagerly: kernel0 (")
    assert "aten.sin.default" in messages[0] and "RuntimeError: out of resources" in messages[0]
    ((what, kind, message),) = compiled.failures
    assert (what, kind) == ("failed", "inference") and "kernel0" in message and "aten.cos.default" in message


def test_inputs_mutated_before_the_failure_are_updated_once(monkeypatch):
    break_first_runs(monkeypatch, "kernel0", out_of_resources)  # fails after writing x and y

    def f(x, y):
        x.add_(1)
        y.mul_(2)
        return x + y
    g = torch.compile(f, backend="braze")
    with braze.config.patch(strict=False), Compiled() as compiled, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            x, y = torch.randn(6), torch.randn(6)
            ex, ey = x.clone(), y.clone()
            out = g(x, y)
            expected = f(ex, ey)
            assert torch.equal(out, expected) and torch.equal(x, ex) and torch.equal(y, ey)
    assert "aten.copy_.default" in compiled.failures[0][2]


def test_strict_raises_braze_error_naming_the_kernel_and_restores_inputs(monkeypatch):
    break_first_runs(monkeypatch, "kernel0", out_of_resources)

    def f(x, y):
        x.mul_(3)
        return x.exp() + y
    x, y = torch.randn(5), torch.randn(5)
    x0 = x.clone()
    with pytest.raises(BrazeError) as info:
        torch.compile(f, backend="braze")(x, y)
    assert "kernel0 (" in str(info.value) and "aten.exp.default" in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError) and "out of resources" in str(info.value.__cause__)
    assert torch.equal(x, x0)


class Rerouted:
    """``torch`` as a wrapper namespace sees it, except that the attribute at ``path``
    (``torch.ops.aten.mm.default``) is ``replacement``."""

    def __init__(self, target, path: list, replacement):
        self.target, self.path, self.replacement = target, path, replacement

    def __getattr__(self, name):
        value = getattr(self.target, name)
        if name != self.path[0]:
            return value
        return Rerouted(value, self.path[1:], self.replacement) if self.path[1:] else self.replacement


def test_failing_extern_call_is_named_by_its_op(monkeypatch):
    break_first_runs(monkeypatch, "torch", lambda: TypeError("bad extern argument"), run_real=False,
                     wrap=lambda failing: Rerouted(torch, ["ops", "aten", "mm", "default"], failing))
    f = lambda a, b: torch.mm(a, b).relu()
    with braze.config.patch(strict=False), Compiled() as compiled, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = torch.randn(6, 5), torch.randn(5, 7)
        torch.testing.assert_close(torch.compile(f, backend="braze")(a, b), f(a, b))
    assert compiled.failures[0][2].startswith("aten.mm.default failed at its first run: TypeError: bad extern")


def test_training_graphs_fail_over_to_eager_with_eager_gradients(monkeypatch):
    break_first_runs(monkeypatch, "kernel0", out_of_resources)
    f = lambda x, w: (x.sin() * w).tanh().sum()
    x, w = torch.randn(4, 6, requires_grad=True), torch.randn(6, requires_grad=True)
    ex, ew = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    with braze.config.patch(strict=False), Compiled() as compiled, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = torch.compile(f, backend="braze")(x, w)
        out.backward()
    expected = f(ex, ew)
    expected.backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(x.grad, ex.grad)
    torch.testing.assert_close(w.grad, ew.grad)
    assert [kind for _, kind, _ in compiled.failures] == ["forward", "backward"]


def test_each_shape_specialization_is_guarded(monkeypatch):
    calls = break_first_runs(monkeypatch, "kernel0", out_of_resources)
    f = lambda x: (x * 2).softmax(-1)
    g = torch.compile(f, backend="braze", dynamic=True)
    with braze.config.patch(strict=False, symbolic_sizes=False), Compiled() as compiled, \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (3, 5, 3, 5):
            x = torch.randn(n, 6)
            torch.testing.assert_close(g(x), f(x))
    assert len(compiled.graphs) == 2 and len(calls) == 2 and len(compiled.failures) == 2
    assert len(braze_warnings(caught)) == 1  # the same message is not repeated


def test_a_size_class_variant_is_guarded(monkeypatch):
    calls = break_first_runs(monkeypatch, "kernel0", out_of_resources)
    f = lambda x: (x * 2).softmax(-1)
    g = torch.compile(f, backend="braze", dynamic=True)
    with braze.config.patch(strict=False), Compiled() as compiled, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        for n in (5, 7, 5, 7):  # (rows of 4 and more: one size class on any thread count)
            x = torch.randn(n, 6)
            torch.testing.assert_close(g(x), f(x))
    # one variant serves both sizes; its first run failed, so it runs eagerly from then on
    assert len(compiled.graphs) == 1 and len(calls) == 1 and len(compiled.failures) == 1


def test_backward_compiled_at_its_first_call_is_guarded(monkeypatch):
    first_calls, real_call = [], backend._FirstCall.__call__
    monkeypatch.setattr(backend._FirstCall, "__call__",
                        lambda self, args: (first_calls.append(self.kind), real_call(self, args))[1])
    break_first_runs(monkeypatch, "kernel0", out_of_resources)
    conv = torch.nn.Conv2d(3, 4, 3)
    f = lambda x: torch.relu(conv(x)).sum()
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    ex = x.detach().clone().requires_grad_()
    with braze.config.patch(strict=False), Compiled() as compiled, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(f, backend="braze", options={"channels_last_convs": "on"})(x).backward()
    f(ex).backward()
    torch.testing.assert_close(x.grad, ex.grad)
    assert first_calls == ["backward"] and [kind for _, kind, _ in compiled.failures] == ["forward", "backward"]


def test_cudagraphs_option_keeps_the_guard_on_cpu(monkeypatch):
    break_first_runs(monkeypatch, "kernel0", out_of_resources)
    f = lambda x: x.sin() * 2
    with braze.config.patch(strict=False), Compiled() as compiled, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = torch.randn(5)
        torch.testing.assert_close(torch.compile(f, backend="braze", options={"cudagraphs": True})(x), f(x))
    assert len(compiled.failures) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cudagraphs_warm_up_failure_runs_eagerly_or_raises_when_strict(monkeypatch):
    break_first_runs(monkeypatch, "kernel0", out_of_resources)
    f = lambda x: x.sin() * 2
    with braze.config.patch(strict=False), Compiled() as compiled, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = torch.compile(f, backend="braze", options={"cudagraphs": True})
        for _ in range(3):
            x = torch.randn(64, device="cuda")
            torch.testing.assert_close(g(x), f(x))
    assert len(compiled.failures) == 1
    torch._dynamo.reset()
    with pytest.raises(BrazeError, match="kernel0"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(f, backend="braze", options={"cudagraphs": True})(torch.randn(64, device="cuda"))


def test_guard_is_gone_after_a_successful_first_call(monkeypatch):
    made = []
    monkeypatch.setattr(backend, "guarded", lambda *a: made.append(guarded(*a)) or made[-1])
    g = torch.compile(lambda x: x.cos() + 1, backend="braze")
    for _ in range(2):
        x = torch.randn(7)
        torch.testing.assert_close(g(x), x.cos() + 1)
    (call,) = made
    cell = call.__closure__[call.__code__.co_freevars.index("run")]
    assert cell.cell_contents is call.compiled.run


def test_an_error_eager_raises_too_is_the_programs_own():
    gm = torch.fx.symbolic_trace(lambda x: (x + torch.ones(2),))

    def run(args):
        raise RuntimeError("kernel failed")
    compiled = types.SimpleNamespace(run=run, name="graph0", wrapper="", kernels=[])
    reports = []
    with braze.config.patch(strict=False):
        call = guarded(compiled, gm, "inference", lambda *a: reports.append(a))
    with pytest.raises(RuntimeError, match="size"):  # eager's own shape error
        call([torch.randn(3)])
    assert not reports
    assert call([torch.randn(2)])[0].shape == (2,)  # still guarded: this call falls back
    assert reports == [("inference", "graph0 failed at its first run: RuntimeError: kernel failed")]


def test_mutated_inputs_are_found_through_views_and_in_place_chains():
    def f(a, b, c, d):
        a.view(-1)[0:2].add_(1)
        c.mul_(2).sub_(1)
        torch.ops.aten.copy_.default(d, b)
        return a + b
    gm = torch.fx.experimental.proxy_tensor.make_fx(f)(*[torch.randn(2, 3) for _ in range(4)])
    assert mutated_inputs(gm) == [0, 2, 3]


def writes_an_input(compiled) -> str:
    inputs = set(compiled.graph.inputs)
    return next(k.name for k in compiled.kernels if inputs & set(k.writes))


@TRITON_ONLY[0]
@pytest.mark.usefixtures("triton_interpreter")
def test_triton_launch_failure_after_writing_inputs(monkeypatch):
    from triton.runtime.errors import OutOfResources
    break_first_runs(monkeypatch, writes_an_input, lambda: OutOfResources(300000, 232448, "shared memory"))

    def f(x, y):
        x.add_(1)
        y.mul_(2)
        return (x + y).sum(0)
    x, y = torch.randn(8, 4), torch.randn(8, 4)
    ex, ey = x.clone(), y.clone()
    with braze.config.patch(strict=False), Compiled() as compiled, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = torch.compile(f, backend="braze")(x, y)
    torch.testing.assert_close(out, f(ex, ey))
    assert torch.equal(x, ex) and torch.equal(y, ey)
    (graph,) = compiled.graphs
    assert graph.kernels[0].backend == "triton" and len(graph.kernels) > 1
    assert f"{writes_an_input(graph)} (" in compiled.failures[0][2] and "OutOfResources" in compiled.failures[0][2]
