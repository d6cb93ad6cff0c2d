"""Sizes an op decides from its input's values (``x[mask]``, ``nonzero``, ``masked_select``,
``unique``), traced by Dynamo as unbacked symbols: the op runs through ATen, the wrapper
reads the size from its result, and the work around it compiles once with that size as a
symbol, on both backends. Results match eager, forward and backward, for fresh masks,
all-false (size 0) and all-true ones."""
import re
import warnings

import pytest
import torch

import braze
from helpers import Compiled

MASKS = ("random", "none", "all", "random")


@pytest.fixture(autouse=True)
def data_dependent_ops():
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        yield


def _input(mask: str, shape=(8, 5), requires_grad=True) -> torch.Tensor:
    """A fresh input whose ``x > 0`` is a random, an all-false or an all-true mask."""
    x = torch.randn(shape)
    if mask == "none":
        x = -x.abs() - 0.1
    elif mask == "all":
        x = x.abs() + 0.1
    return x.requires_grad_(requires_grad)


def _same_as_eager(f, masks=MASKS, backward=True, **kwargs) -> Compiled:
    g = torch.compile(f, backend="braze")
    with Compiled() as compiled:
        for mask in masks:
            x = _input(mask, requires_grad=backward, **kwargs)
            ex = x.detach().clone().requires_grad_(backward)
            out, expected = g(x), f(ex)
            for a, b in zip(out, expected):
                torch.testing.assert_close(a, b, equal_nan=True)  # (a mean of no element)
            if backward:
                pairs = [(a, b, torch.randn_like(b)) for a, b in zip(out, expected) if b.requires_grad]
                torch.autograd.backward([a for a, _, _ in pairs], [d for _, _, d in pairs])
                torch.autograd.backward([b for _, b, _ in pairs], [d for _, _, d in pairs])
                torch.testing.assert_close(x.grad, ex.grad)
    return compiled


def _compiled_once(compiled: Compiled, kinds=("forward", "backward")) -> list:
    """Each graph compiled once across every result size, symbolically; the forward's
    data-dependent size named as an unbacked symbol."""
    assert sorted(g.kind for g in compiled.graphs) == sorted(kinds), [g.kind for g in compiled.graphs]
    assert all(g.sizes is not None and not g.sizes.guards for g in compiled.graphs)
    assert not any(g.fallbacks for g in compiled.graphs if g.kind != "backward")
    forward = next(g for g in compiled.graphs if g.kind in ("forward", "inference"))
    assert forward.sizes.unbacked, forward.sizes
    return compiled.graphs


def test_masked_values_then_pointwise_and_a_sum(backend):
    def f(x):
        y = x[x > 0]
        return (y * 2).sum(), y.exp()
    graphs = _compiled_once(_same_as_eager(f))
    forward = next(g for g in graphs if g.kind == "forward")
    name, meaning = next(iter(forward.sizes.unbacked.items()))
    assert "aten.index.Tensor" in meaning and f"{name} = " in forward.wrapper and ".shape[0]" in forward.wrapper


def test_nonzero_used_as_indices(backend):
    def f(x):
        i = torch.nonzero(x > 0)
        return x[i[:, 0], i[:, 1]] * 3, i
    graphs = _compiled_once(_same_as_eager(f))
    assert any("nonzero" in m for g in graphs if g.kind == "forward" for m in g.sizes.unbacked.values())


def test_masked_select(backend):
    f = lambda x: (torch.masked_select(x, x > 0.5).sin(), )
    _compiled_once(_same_as_eager(f))


def test_unique_of_integers(backend):
    f = lambda x: (torch.unique(x.floor()) * 2 + 1, )
    _compiled_once(_same_as_eager(f, backward=False, shape=(40,)), kinds=("inference",))


def test_fusable_work_before_and_after(backend):
    """A kernel computes the mask and the values before the op, one kernel the sum and the
    product after it."""
    def f(x):
        a = torch.tanh(x * 2 + 1)
        y = a[x > 0]
        return (y * y).sum() + a.sum(), torch.sigmoid(y) * 3
    graphs = _compiled_once(_same_as_eager(f))
    forward = next(g for g in graphs if g.kind == "forward")
    assert len(forward.kernels) == 2, [k.ops for k in forward.kernels]


def test_explain_names_the_unbacked_symbol():
    def f(x):
        y = x[x > 0]
        return (y * 2).sum()
    report = str(braze.explain(f, torch.randn(6, 4)))
    assert "unbacked: u0 = the size of dim 0 of" in report and "aten.index.Tensor" in report, report


def test_item_as_a_size_and_work_that_reads_nothing_of_it(backend):
    """``item()`` (``capture_scalar_outputs``) gives the size; ``zeros(n)`` reads no buffer of
    the op that gives it, and still runs after it."""
    def f(x):
        n = (x > 0).sum().item()
        torch._check(n >= 0)
        torch._check(n <= x.shape[0])
        return x[:n] * 2, torch.zeros(n) + 1
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        compiled = _same_as_eager(f, backward=False, shape=(12,))
    _compiled_once(compiled, kinds=("inference",))
    assert "item()" in next(iter(compiled.graphs[0].sizes.unbacked.values()))


def test_a_negative_value_read_by_item_divides_as_python(backend):
    """Sizes print C's (and Triton's) truncating ``/`` and ``%``, which floor only where the
    dividend is >= 0: an ``item()`` value is not a size, and its range says it may be negative."""
    def f(x, t):
        n = t.item()
        return x + n // 3 + n % 3, torch.arange(5) * (n // 4)
    g = torch.compile(f, backend="braze")
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        for v in (-7, 8, -1, -12):
            x, t = torch.randn(5), torch.tensor(v)
            for got, want in zip(g(x, t), f(x, t)):
                torch.testing.assert_close(got, want)


def test_repeat_interleave_by_a_tensor_and_a_mean_by_its_count(backend):
    def f(x):
        r = (x > 0).long() + (x > 1).long()
        y = torch.repeat_interleave(x, r, dim=0)
        return torch.sin(y), y.sum() / y.numel()
    _compiled_once(_same_as_eager(f, backward=False, shape=(16,)), kinds=("inference",))


def test_an_assertion_on_the_size_is_checked_at_each_call(backend):
    """``torch._check(n != 3)`` on an ``item()`` is no fact the ranges prove: the wrapper
    checks it after the value is known, and raises as eager does."""
    def f(x):
        n = (x > 0).sum().item()
        torch._check(n >= 0)
        torch._check(n <= x.shape[0])
        torch._check(n != 3)
        return (x[:n] * 2, )
    g = torch.compile(f, backend="braze")
    with torch._dynamo.config.patch(capture_scalar_outputs=True), Compiled() as compiled:
        for positives in (5, 3, 0, 3, 8):
            x = torch.cat([torch.rand(positives) + 0.1, -torch.rand(8 - positives) - 0.1])
            x = x[torch.randperm(8)]
            if positives == 3:
                for call in (g, f):
                    with pytest.raises(RuntimeError):
                        call(x)
            else:
                torch.testing.assert_close(g(x)[0], f(x)[0])
    _compiled_once(compiled, kinds=("inference",))
    assert "torch.ops.aten._assert_scalar.default((u0 != 3)" in compiled.graphs[0].wrapper


def test_without_symbolic_sizes_the_graph_runs_eagerly_and_says_why():
    def f(x):
        y = x[x > 0]
        return (y * 2).sum(), y.exp()
    g = torch.compile(f, backend="braze")
    x = _input("random", requires_grad=False)
    with braze.config.patch(symbolic_sizes=False, strict=False), pytest.warns(UserWarning) as warned:
        for a, b in zip(g(x), f(x)):
            torch.testing.assert_close(a, b)
    text = " ".join(str(w.message) for w in warned)
    assert "u0: the size of dim 0 of index (aten.index.Tensor)" in text and "symbolic_sizes" in text, text


def test_with_symbolic_input_sizes_too(backend):
    """Input sizes Dynamo made symbolic (``s0``, guarded as ever) beside the mask's ``u0``
    (never guarded): every guard is on the inputs' symbols."""
    def f(x):
        y = x[x > 0]
        return (y * 2).sum(), torch.relu(y - 0.5)
    g = torch.compile(f, backend="braze", dynamic=True)
    with Compiled() as compiled:
        for rows, mask in ((5, "random"), (9, "none"), (13, "all"), (9, "random")):
            x = _input(mask, shape=(rows, 7))
            ex = x.detach().clone().requires_grad_()
            out, expected = g(x), f(ex)
            for a, b in zip(out, expected):
                torch.testing.assert_close(a, b)
            (out[0] + out[1].sum()).backward()
            (expected[0] + expected[1].sum()).backward()
            torch.testing.assert_close(x.grad, ex.grad)
    assert {g.kind for g in compiled.graphs} == {"forward", "backward"}
    assert all(g.sizes is not None and "u0" in g.sizes.unbacked for g in compiled.graphs)
    assert not any("u0" in guard for g in compiled.graphs for guard in g.sizes.guards)
    assert len(compiled.graphs) <= 6  # (classes of the input sizes only)


def test_index_fill_backward_sums_at_the_unique_indices(backend):
    """``index_fill``'s backward sums the value's gradient at ``_unique(idx)``: its size a
    symbol, read from ``_unique``'s result. Where the trace gives that result a fixed size
    instead (torch 2.11 traces it as 1), compiling that size would give a wrong gradient:
    braze refuses the graph, naming the op and the traced size, and it runs eagerly."""
    idx = torch.tensor([2, 1, 4, 2, 2])
    f = lambda x, v: x.index_fill(-1, idx, v)
    g = torch.compile(f, backend="braze")
    with Compiled() as compiled, braze.config.patch(strict=False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            x, v = torch.randn(5, 5, requires_grad=True), torch.randn((), requires_grad=True)
            grad = torch.randn(5, 5)
            torch.testing.assert_close(torch.autograd.grad(g(x, v), (x, v), grad),
                                       torch.autograd.grad(f(x, v), (x, v), grad))
    backward = [g for g in compiled.graphs if g.kind == "backward"]
    if backward:
        assert any("aten._unique.default" in m for m in backward[0].sizes.unbacked.values())
    else:  # the trace's fixed size, named in the reason
        assert [f[1] for f in compiled.failures] == ["backward"]
        assert re.search(r"aten\._unique\.default .*traced as \(\d+,\)", compiled.failures[0][2])
