"""bf16/fp16 intermediates rounded to their dtype where the rounding changes a result.

braze keeps a low-precision intermediate in float32 inside a kernel; eager rounds it after
every op. A continuous consumer hardly notices, a discontinuous one does: ``round(x / 0.05)``
lands on the other integer, a cast to int8 differs by one, a comparison flips, float16's
70000.0 is infinite only once rounded. Each case here is compared with eager exactly (every
result is an integer, a bool or an integral float), on inputs drawn so that many elements
fall where the rounding matters. ``low_precision_rounding="every_op"`` rounds after every op,
as eager does: a chain of bf16 arithmetic then matches eager bit for bit.
"""
import pytest
import torch

import braze
from tests.helpers import Compiled

LOW = [torch.bfloat16, torch.float16]


def _quantize(x):
    return torch.clamp(torch.round(x / 0.05), -128, 127).to(torch.int8)


DISCONTINUOUS = {
    "quantize": _quantize,
    "floor": lambda x: torch.floor(x * 3.3 + 0.1),
    "ceil": lambda x: torch.ceil(x * 3.3 + 0.1),
    "trunc": lambda x: torch.trunc(x * 3.3 + 0.1),
    "round_decimals": lambda x: torch.round(x * 3.3, decimals=1),
    "frac_is_zero": lambda x: torch.frac(x * 7.0 / 3.0) == 0,
    "to_int32": lambda x: (x * 77.7).to(torch.int32),
    "to_bool": lambda x: (x * 1e-5 - 1e-5).to(torch.bool),
    "compare": lambda x: (x * 3.3) > (x + 0.7),
    "floor_divide": lambda x: torch.floor_divide(x * 9.1, 0.3),
    "div_trunc": lambda x: torch.div(x * 9.1, 0.3, rounding_mode="trunc"),
    "remainder_is_small": lambda x: torch.remainder(x * 9.1, 0.5) < 0.01,
    "fmod_sign": lambda x: torch.sign(torch.fmod(x * 9.1, 0.5)),
    "sign": lambda x: torch.sign(x * 1e-6 - 1e-6),
    "isinf": lambda x: torch.isinf(x * 30000.0),
    "isfinite": lambda x: torch.isfinite(x * 30000.0),
    "logical_not": lambda x: torch.logical_not(x * 1e-5 - 1e-5),
    "argmax": lambda x: torch.argmax(x * 3.3 + 1.0, dim=-1),
    "max_dim_index": lambda x: torch.max(x * 3.3 + 1.0, dim=-1).indices,
    "any": lambda x: torch.any(x * 1e-7 - 1e-7, dim=-1),
}


def _draw(dtype):
    """Values of ``dtype`` whose products land near integers, ties and float16's end."""
    x = torch.randn(64, 257, dtype=torch.float64) * 3
    x[::3] = torch.randint(-40, 40, (x[::3].shape), dtype=torch.float64) * 0.05  # near ties of x/0.05
    x[1::7] = torch.rand(x[1::7].shape, dtype=torch.float64) + 1.0  # x*1e-5-1e-5 near 0
    x[2::5, ::4] = 2.0  # x*30000 is 60000 (finite), x*3.3+1 ties in argmax rows
    return x.to(dtype)


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", sorted(DISCONTINUOUS))
def test_a_discontinuous_consumer_sees_eager_rounding(backend, name, dtype):
    fn = DISCONTINUOUS[name]
    x = _draw(dtype)
    expected = fn(x)
    with Compiled() as compiled:
        actual = torch.compile(fn, backend="braze")(x)
    assert compiled.graphs and not compiled.failures
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(actual, expected), (
        f"{name} {dtype}: {(actual != expected).sum().item()} of {expected.numel()} elements differ")


def test_quantize_differs_without_rounding_on_these_inputs():
    """The inputs above do exercise the rounding: in float32 (no rounding of x / 0.05),
    the quantized values differ from eager's bf16 ones."""
    x = _draw(torch.bfloat16)
    assert not torch.equal(_quantize(x.float()), _quantize(x))


def _chain(x, y):
    """Arithmetic only: a transcendental's last bits are its library's (libmvec's vector
    ``expf`` against eager's Sleef on the CPU: 5 of 12,800 bf16 elements of
    ``exp(...)`` differ), not the rounding's."""
    return ((x * 1.1 + y) * y - x / 3.0) * 0.5


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_every_op_rounding_matches_eager_bit_for_bit(backend, dtype):
    x, y = (torch.randn(128, 100, dtype=dtype) for _ in range(2))
    expected = _chain(x, y)
    with braze.config.patch(low_precision_rounding="every_op"):
        actual = torch.compile(_chain, backend="braze")(x, y)
    assert torch.equal(actual, expected)
    torch._dynamo.reset()
    kept_wide = torch.compile(_chain, backend="braze")(x, y)  # rounded once: not eager's bits
    assert not torch.equal(kept_wide, expected)


def test_the_rounding_knob_names_its_choices():
    with pytest.raises(ValueError, match="every_op"):
        braze.config._rounding("each")


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_a_number_added_on_the_cpu_is_rounded_as_eager_rounds_it(backend, dtype):
    """Eager's CPU kernels add and subtract a number in the tensor's dtype (bf16's 257 is 256)."""
    def fn(x):
        return (x + 257) - 1e-5, 0.7 - x
    x = torch.rand(4096, dtype=dtype) + 0.25
    expected = fn(x)
    with braze.config.patch(low_precision_rounding="every_op"):
        actual = torch.compile(fn, backend="braze")(x)
    for a, e in zip(actual, expected):
        assert torch.equal(a, e)


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", ["sub", "less", "add_then_scale"])
def test_an_integer_operand_is_rounded_to_the_common_dtype_first(backend, name, dtype):
    """``int32 - bf16`` converts the int to bf16 before subtracting, in eager: 4099 - bf16(4099)
    is 0, not 3. The same for a comparison, whose result is bool but whose operands meet in
    bf16."""
    fn = {"sub": lambda i, b: i - b, "less": lambda i, b: i < b,
          "add_then_scale": lambda i, b: (i + b) * 2}[name]
    i = torch.randint(-5000, 5000, (1000,), dtype=torch.int32)
    b = i.to(dtype) if name == "sub" else (torch.randn(1000) * 1000).to(dtype)
    expected = fn(i, b)
    actual = torch.compile(fn, backend="braze")(i, b)
    assert torch.equal(actual, expected), f"{(actual != expected).sum().item()} of 1000 differ"


REDUCED_THEN_USED = {
    # a float16 sum past 65504 is inf in eager, whatever reads it next
    "sum_overflows": (lambda x: (x.abs() * 300.0).sum(-1).sqrt(), torch.float16),
    # the row sum is rounded before the subtraction reads it: exact in both dtypes
    "sum_subtracted": (lambda x: x - x.sum(-1, keepdim=True), torch.bfloat16),
    "sum_subtracted_f16": (lambda x: x - x.sum(-1, keepdim=True), torch.float16),
    "amax_compared": (lambda x: x * 1.5 >= (x * 1.5).amax(-1, keepdim=True), torch.bfloat16),
}


@pytest.mark.parametrize("name", sorted(REDUCED_THEN_USED))
def test_a_reduction_read_in_its_kernel_is_rounded_as_eager_returns_it(backend, name):
    """A bf16/fp16 reduction's result read by its consumer inside one kernel is the value
    eager returns: rounded to its dtype (a float16 sum of 257 elements of up to ~3000 is inf)."""
    fn, dtype = REDUCED_THEN_USED[name]
    x = (torch.randn(64, 257, dtype=torch.float64) * 3).to(dtype)
    expected = fn(x)
    with Compiled() as compiled:
        actual = torch.compile(fn, backend="braze")(x)
    assert compiled.graphs and not compiled.failures and len(compiled.graphs[0].kernels) == 1
    assert torch.equal(actual, expected), f"{(actual != expected).sum().item()} of {expected.numel()} differ"
