"""Sums over the rows inside C++ row kernels (``legality.COLUMN``, ``codegen/cpp/colsums``):
a LayerNorm backward's weight and bias gradients, and a Linear bias gradient behind a row
reduction, computed by the row kernel as per-thread column partials. Values and
gradients against eager on fresh random inputs, with one thread and several, and the
cases that stay in kernels of their own (Triton, too many columns, integer sums)."""
import pytest
import torch
import torch.nn.functional as F

import braze
from braze.fuse.legality import COLUMN_PARTIALS_MAX, Reason
from helpers import TRITON_ONLY, Compiled, check, check_low_precision, clone_inputs


@pytest.fixture(autouse=True)
def cpp():
    """C++ kernels on CPU tensors, also where a plugin makes CUDA the default device."""
    device = torch.get_default_device()
    torch.set_default_device("cpu")
    try:
        with braze.config.patch(cpu_backend="cpp"):
            yield
    finally:
        torch.set_default_device(device)


def layer_norm_gelu(x, w, b):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))


def backward_graph(compiled):
    return next(g for g in compiled.graphs if g.kind == "backward")


def leaves(*shape_w):
    *rows, n = shape_w
    x = torch.randn(*rows, n, requires_grad=True)
    w = (torch.rand(n) + 0.5).requires_grad_()
    b = torch.randn(n, requires_grad=True)
    return x, w, b


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("shape", [(64, 1000), (5, 7), (3, 2, 48), (1, 2, 129), (256, 16)])
def test_layer_norm_backward_sums_its_weight_and_bias_gradients(shape, threads):
    """One backward kernel: the row reductions, the input gradient and both column sums.
    Against the float64 result: the bias gradient sums up to 256 rows, and where they
    cancel eager's float32 sum is itself off by about the default atol."""
    with braze.config.patch(num_threads=threads):
        compiled = check(layer_norm_gelu, *leaves(*shape), grad=True, reference="float64")
    backward = backward_graph(compiled)
    assert len(backward.kernels) == 1, [str(k) for k in backward.kernels]
    assert "colsum" in backward.source


def test_linear_bias_gradient_joins_the_row_kernel():
    """Linear -> LayerNorm: the Linear's bias gradient is the column sum of the row kernel's
    input gradient, a later loop of the same kernel."""
    x = torch.randn(256, 64)  # 256 x 200 elements: enough work for the threads
    lin, norm = torch.nn.Linear(64, 200), torch.nn.LayerNorm(200)
    fn = lambda x: norm(lin(x)).tanh()  # noqa: E731
    with braze.config.patch(num_threads=2), Compiled() as compiled:
        loss = torch.compile(fn, backend="braze")(x).square().sum()
        grads = torch.autograd.grad(loss, [lin.weight, lin.bias, norm.weight, norm.bias])
    expected = torch.autograd.grad(fn(x).square().sum(), [lin.weight, lin.bias, norm.weight, norm.bias])
    for g, e in zip(grads, expected):
        torch.testing.assert_close(g, e, rtol=2e-5, atol=2e-5)
    backward = backward_graph(compiled)
    assert backward.source.count("colsum") >= 3 and len(backward.kernels) == 1, backward.source


def test_column_sums_are_deterministic_across_runs():
    """Threads' partials are added in thread order: the same bits every run."""
    x, w, b = leaves(200, 300)
    fn = torch.compile(layer_norm_gelu, backend="braze")
    with braze.config.patch(num_threads=2):
        runs = []
        for _ in range(3):
            xs, ws, bs = clone_inputs((x, w, b))
            fn(xs, ws, bs).sum().backward()
            runs.append(torch.cat([ws.grad, bs.grad]))
    assert all(torch.equal(runs[0], r) for r in runs[1:])


def test_column_sums_of_many_rows_keep_float32_accuracy():
    """Double partials: a sum over 4096 rows is the float64 sum rounded."""
    x, w, b = leaves(4096, 64)
    with braze.config.patch(num_threads=2):
        y = torch.compile(layer_norm_gelu, backend="braze")(x, w, b)
        g = torch.randn_like(y)
        y.backward(g)
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
    layer_norm_gelu(x64, w64, b64).backward(g.double())
    torch.testing.assert_close(w.grad, w64.grad.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.grad, b64.grad.float(), rtol=1e-5, atol=1e-5)


def test_bfloat16_layer_norm_backward():
    x = torch.randn(40, 96, dtype=torch.bfloat16)
    w, b = torch.rand(96, dtype=torch.bfloat16) + 0.5, torch.randn(96, dtype=torch.bfloat16)

    def weight_and_bias_grads(x, w, b):
        w, b = w.detach().requires_grad_(), b.detach().requires_grad_()
        with torch.enable_grad():
            y = layer_norm_gelu(x, w, b)
            return torch.autograd.grad(y, [w, b], torch.ones_like(y))
    # check_low_precision compares with float64; grads through autograd.grad inside the graph
    check_low_precision(weight_and_bias_grads, x, w, b, slack=4.0)


def test_too_many_columns_stay_in_a_column_kernel():
    """Per-thread partials past COLUMN_PARTIALS_MAX doubles: the sums keep their own kernel."""
    n = COLUMN_PARTIALS_MAX  # two column sums of n columns
    compiled = check(layer_norm_gelu, *leaves(4, n), grad=True)
    backward = backward_graph(compiled)
    assert len(backward.kernels) > 1 and "colsum" not in backward.source
    assert any(r.reason is Reason.COLUMN_SUM for r in backward.fusion_log)


def test_integer_column_sum_beside_a_row_sum_stays_apart():
    x = torch.randint(-50, 50, (64, 40))
    compiled = check(lambda x: (x.sum(1, keepdim=True) * x).sum(0), x)
    assert "colsum" not in compiled.graphs[0].source


def test_a_row_reduction_may_not_read_a_column_sum():
    """A column sum is complete only after the last row: what reads it is another kernel."""
    x = torch.randn(48, 32)
    compiled = check(lambda x: (x - x.mean(0)).tanh().sum(1), x)
    assert compiled.graphs and len(compiled.kernels) >= 2


def _triton_only(test):
    for mark in TRITON_ONLY:
        test = mark(test)
    return test


@_triton_only
def test_triton_keeps_column_sums_in_their_own_kernels():
    compiled = check(layer_norm_gelu, *leaves(8, 16), grad=True)
    backward = backward_graph(compiled)
    refusals = [r for r in backward.fusion_log if r.reason is Reason.COLUMN_SUM]
    assert refusals and "not on triton" in refusals[0].detail and len(backward.kernels) > 1
