"""The cpp backend's non-temporal stores (codegen/cpp/streams.py): with the threshold at 0
every eligible output goes through scratch arrays and ``b_stream``; values and gradients
must match eager, including runs whose start is not 32-byte aligned (the copied head and
tail) and lengths that leave a partial block. Outputs the kernel also reads, short runs
and small kernels at the default threshold keep plain stores."""
import pytest
import torch
import torch.nn.functional as F

import braze
from braze.codegen.cpp.streams import BLOCK, MIN_RUN
from braze.cpu_info import last_level_cache_bytes
from helpers import Compiled, check, check_low_precision


@pytest.fixture(autouse=True)
def cpp():
    with braze.config.patch(cpu_backend="cpp"):
        yield


def sources(compiled) -> str:
    """The kernels' text, without the prelude (which defines ``b_stream``)."""
    return "\n".join(g.source[g.source.index("// kernel"):] for g in compiled.graphs)


def streaming(**knobs):
    return braze.config.patch(cpp_stream_min_bytes=0, **knobs)


@pytest.mark.parametrize("n", [MIN_RUN, 129, BLOCK * 3, BLOCK * 3 + 5, 4099])
def test_pointwise_streams(n):
    x, y = torch.randn(7, n), torch.randn(7, n)
    with streaming():
        compiled = check(lambda x, y: (torch.relu(x + y), x * y - 1.5), x, y)
    assert sources(compiled).count("b_stream(") == 2


def test_pointwise_unaligned_rows_with_gradient():
    """Rows of 129 floats: each row's start is off the 32-byte grid; the broadcast keeps
    the two loops apart."""
    col = torch.randn(37, 1, requires_grad=True)
    row = torch.randn(1, 129, requires_grad=True)
    with streaming():
        compiled = check(lambda a, b: torch.sin(a) * b + a, col, row, grad=True)
    assert "b_stream(" in sources(compiled)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_integer_outputs_exact(dtype):
    x = torch.randint(-50, 50, (5, 1000)).to(dtype)
    y = torch.randint(1, 50, (5, 1000)).to(dtype)
    with streaming():
        compiled = check(lambda x, y: ((x + y) * 3, x // y, x > y), x, y)
    assert sources(compiled).count("b_stream(") == 3


def test_bf16_and_mixed_outputs():
    x = torch.randn(33, 700, dtype=torch.bfloat16)
    with streaming():
        check_low_precision(lambda x: (torch.exp(x) * 2, x.float() - 1), x)


def test_in_place_update_keeps_plain_stores():
    """A buffer the kernel reads is already in the cache: no scratch array for it."""
    def step(p, g):
        p.add_(g * -0.1)
    p, g = torch.randn(1000), torch.randn(1000)
    expected = p + g * -0.1
    with streaming(), Compiled() as compiled:
        torch.compile(step, backend="braze")(p, g)
    torch.testing.assert_close(p, expected)
    assert compiled.graphs and "b_stream(" not in sources(compiled)


def test_short_runs_and_small_kernels_keep_plain_stores():
    with streaming():
        compiled = check(lambda x: x.t().contiguous() + 1, torch.randn(MIN_RUN - 1, 3))
    assert "b_stream(" not in sources(compiled)
    with braze.config.patch(cpp_stream_min_bytes=last_level_cache_bytes()):  # the default
        compiled = check(lambda x: x * 2, torch.randn(64, 1024))
    assert "b_stream(" not in sources(compiled)


@pytest.mark.parametrize("n", [MIN_RUN, 129, 1000, 4099])
def test_row_outputs_stream(n):
    """RMSNorm and LayerNorm stream; LayerNorm+GELU (an erff in its last loop) does not."""
    x = torch.randn(9, n, requires_grad=True)
    w, b = torch.randn(n, requires_grad=True), torch.randn(n, requires_grad=True)
    with streaming():
        norms = check(lambda x, w, b: (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
                                       F.layer_norm(x, (n,), w, b)), x, w, b, grad=True, atol=1e-5, rtol=1e-5)
        gelu = check(lambda x, w, b: F.gelu(F.layer_norm(x, (n,), w, b)), x, w, b, atol=1e-5, rtol=1e-5)
    assert "b_stream(" in sources(norms)
    assert "b_stream(" not in sources(gelu)


def test_row_kernel_with_earlier_stores_and_column_sums():
    """Only the last loop's stores are staged; a kernel that also sums columns keeps
    its own parallel region and plain stores."""
    x = torch.randn(50, 300)
    with streaming():
        check(lambda x: (torch.softmax(x, -1), x.sum(-1), x * 2), x)
    x = torch.randn(64, 256, requires_grad=True)
    w = torch.randn(256, requires_grad=True)
    with streaming():
        check(lambda x, w: F.layer_norm(x, (256,), w), x, w, grad=True, atol=1e-5, rtol=1e-5)

