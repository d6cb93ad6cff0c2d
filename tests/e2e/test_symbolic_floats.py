"""Floats computed from sizes (a variance's ``2 / (n - 1)``, a mean's ``1 / n``) in graphs
with symbolic sizes: the kernels compute them from their size arguments (``ir/size_floats.py``),
so such a graph compiles once per size class, not per shape, and gives bit for bit what the
per-shape compile of the same graph gives, forward and backward, on both code generators.

The rows are long: a reduction over a short row is summed in another order when its length is
known (fewer lanes, float accumulators), a choice of the size class and not of these floats. A
long row of known length takes more lanes (``cpp_reduce_lanes_max``), so the comparison keeps
one vector of lanes in both compiles."""
import pytest
import torch
import torch.nn.functional as F

import braze
from helpers import Compiled

SHAPES = [(3, 2, 1031), (2, 4, 1500), (5, 1, 2053)]  # (prime row lengths among them)
FUNCTIONS = {
    "mean": lambda x: x.mean(-1),
    "var": lambda x: x.var(-1),
    "std over two dims": lambda x: x.std((0, 2)),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
    "avg_pool": lambda x: F.avg_pool2d(x, (1, 4), ceil_mode=True),  # (the last window: a part)
    "divided by its length": lambda x: x / x.shape[-1],
}


def results(fn, symbolic: bool) -> list:
    """Outputs and input gradients of ``fn`` over ``SHAPES``, compiled with every size symbolic,
    once per size class (``symbolic``) or once per shape; and the graphs braze compiled."""
    torch._dynamo.reset()
    g = torch.compile(fn, backend="braze", dynamic=True)
    out = []
    with braze.config.patch(symbolic_sizes=symbolic, cpp_reduce_lanes_max=braze.config.cpp_lanes), \
            Compiled() as compiled:
        for k, shape in enumerate(SHAPES):
            torch.manual_seed(k)
            x = torch.randn(shape, dtype=torch.float64).float().requires_grad_()
            y = g(x)
            y.backward(torch.randn_like(y))
            expected = fn(x.detach())
            torch.testing.assert_close(y, expected)
            out += [y.detach(), x.grad]
    return out, compiled.graphs


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_floats_of_sizes_compile_once_and_match_the_per_shape_compile_bit_for_bit(name, backend):
    fn = FUNCTIONS[name]
    symbolic, graphs = results(fn, True)
    per_shape, _ = results(fn, False)
    assert graphs and all(g.sizes is not None for g in graphs)  # each a size class, none per shape
    for k, (a, b) in enumerate(zip(symbolic, per_shape)):
        assert torch.equal(a, b), f"{name}, {'output' if k % 2 == 0 else 'gradient'} of shape {SHAPES[k // 2]}: " \
            f"largest difference {(a - b).abs().max().item()}"


def test_a_variance_backward_computes_its_scale_from_the_size_argument(backend):
    """The graph holds ``sym_float(s) - 1.0`` and ``2.0 / (that)``: the kernel computes them in
    float64 from the size it is given, and rounds the scale to float32 as ``mul`` rounds a
    Python float."""
    torch._dynamo.reset()
    g = torch.compile(lambda x: x.var(-1), backend="braze", dynamic=True)
    with Compiled() as compiled:
        for n in (9, 12, 15):  # (one class: Triton's row block is the power of two of n)
            x = torch.randn(4, n, requires_grad=True)
            ex = x.detach().clone().requires_grad_()
            g(x).sum().backward()
            ex.var(-1).sum().backward()
            torch.testing.assert_close(x.grad, ex.grad)
    backward = [graph for graph in compiled.graphs if graph.kind == "backward"]
    assert len(backward) == 1 and backward[0].sizes is not None
    assert ("(double)" if backend == "cpp" else "tl.float64") in backward[0].source
