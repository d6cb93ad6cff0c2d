"""Triton kernels whose operands mix kinds or dtypes, against eager on fresh random inputs.

Runs the Triton backend on CPU tensors through Triton's interpreter
(``TRITON_INTERPRET=1``). Families that can raise from inside a kernel (the
conformance sweep's "error" outcome): a comparison of a 0-d tensor broadcast into
a bitwise ``&``/``|``/``^`` (logical ops, and the backward of pow, xlogy, median);
a bfloat16 constant (``tl.full``); nextafter on 16-bit floats, which libdevice does
not have. Families that can compute wrong values: integers and bools converted to
bfloat16 (the interpreter may take them as bit patterns), and float negation of zero
(Triton's ``-x`` is ``0 - x``). Integer and bool results are compared exactly, 16-bit floats
bit for bit where eager's rounding is the same.
"""

import pytest
import torch

import braze
from helpers import TRITON_ONLY, check, check_low_precision

pytest.importorskip("triton")
pytestmark = TRITON_ONLY



def check_each(fn, *cases, **kwargs):
    """``check`` of ``fn`` on each tuple of arguments, each compiled afresh (new shapes
    would otherwise make Dynamo trace sizes symbolically)."""
    for args in cases:
        torch._dynamo.reset()
        check(fn, *args, **kwargs)


def _with_zeros(x):
    """``x`` with about a third of its elements zero, so logical ops see both truths."""
    return torch.where(torch.rand(x.shape) < 0.3, torch.zeros_like(x), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fn", [torch.logical_and, torch.logical_or, torch.logical_xor], ids=lambda f: f.__name__)
def test_logical_ops_with_a_0d_operand(fn, dtype):
    block = _with_zeros(torch.randn(37)).to(dtype)
    for scalar in (torch.tensor(0.0, dtype=dtype), torch.randn(()).to(dtype)):
        check_each(fn, (block, scalar), (scalar, block))


def test_masks_of_0d_comparisons_meet_block_ones():
    x, s = torch.randn(6, 7), torch.randn(())
    check(lambda x, s: ((x > 0) & (s > 0), (x < s) | (s != 0), (x > 0) ^ (s < 0)), x, s)


@pytest.mark.parametrize("fn", [torch.pow, torch.xlogy, torch.special.xlog1py], ids=lambda f: f.__name__)
def test_binary_with_a_0d_exponent_and_gradients(fn):
    base = torch.rand(10, 5) + 0.1
    base[0, :2] = 0.0
    other = torch.rand(()).add(0.5)
    check_each(fn, (base.requires_grad_(), other.requires_grad_()),
               (other.detach().requires_grad_(), base.detach().requires_grad_()), grad=True)


@pytest.mark.parametrize("fn", [torch.fmax, torch.fmin], ids=lambda f: f.__name__)
def test_fmax_fmin_with_a_0d_operand_and_nan(fn):
    x = torch.randn(5, 9)
    x[0, :3] = float("nan")
    check_each(fn, *[(x.requires_grad_(), s.requires_grad_()) for s in (torch.randn(()), torch.tensor(float("nan")))],
               grad=True)


@pytest.mark.parametrize("fn", [torch.median, torch.nanmedian], ids=lambda f: f.__name__)
def test_median_gradient_compares_with_the_0d_median(fn):
    x = torch.randn(2)
    check(fn, x.requires_grad_(), grad=True)


def _differ(actual, expected):
    """Where 16-bit float results differ: not the same bits, and not both NaN."""
    return ~((actual.view(torch.int16) == expected.view(torch.int16)) | (actual.isnan() & expected.isnan()))


def test_bfloat16_constants():
    """Constants are rounded as eager rounds them (double, float, bfloat16), NaN and
    tiny ones included (Triton would print a bfloat16 constant with six decimals)."""
    empty = torch.randn(0, dtype=torch.bfloat16)
    out = torch.compile(lambda x: torch.std_mean(x), backend="braze")(empty)
    assert all(o.dtype == torch.bfloat16 and o.isnan() for o in out)
    y = torch.randn(3, 5).to(torch.bfloat16)
    check_low_precision(lambda y: y.amax(-1) * 3, y)
    for value in (1e-7, 0.1, 3.0e38, float("nan"), float("-inf")):
        torch._dynamo.reset()
        out = torch.compile(lambda y: (torch.full_like(y, value), y.amax(-1)), backend="braze")(y)
        assert not _differ(out[0], torch.full_like(y, value)).any() and not _differ(out[1], y.amax(-1)).any()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_nextafter_16_bit_floats_bit_for_bit(dtype):
    special = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e-40, -1e-40,
                            6e-8, -2.5, 3.3e38]).to(dtype)
    a = torch.cat([special.repeat_interleave(len(special)), torch.randn(64).to(dtype)])
    b = torch.cat([special.repeat(len(special)), torch.randn(64).to(dtype)])
    b[-8:] = a[-8:]
    out = torch.compile(torch.nextafter, backend="braze")(a, b)
    expected = torch.nextafter(a, b)
    differ = _differ(out, expected)
    assert not differ.any(), (a[differ], b[differ], out[differ], expected[differ])


@pytest.mark.parametrize("src", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_integers_and_bools_to_bfloat16(src):
    """Rounded to nearest even through float32, as eager converts (257 -> 256, 1000001 -> 999424)."""
    x = torch.randint(0, 2, (40,)).to(src) if src is torch.bool else torch.randint(-3000, 3000, (40,)).to(src)
    if src is torch.int64:
        x[:3] = torch.tensor([257, 1000001, -(1 << 40) - 12345])
    out = torch.compile(lambda x: (x.to(torch.bfloat16), (x != 0).to(torch.bfloat16)), backend="braze")(x)
    assert not _differ(out[0], x.to(torch.bfloat16)).any() and not _differ(out[1], (x != 0).to(torch.bfloat16)).any()


def test_bfloat16_mean_divides_by_a_converted_count():
    x = torch.randn(5, 5, 5).to(torch.bfloat16)
    mask = torch.rand(5, 5, 5) < 0.5
    check_low_precision(lambda x, m: (x.var(), x.float().mean().to(torch.bfloat16), x * m.to(torch.bfloat16) * 2.5),
                        x, mask)


def test_negation_keeps_the_sign_of_zero():
    x = torch.tensor([0.0, -0.0, 1.5, -2.0, float("inf"), float("nan")] * 3)
    check(lambda x: (torch.signbit(-x), 1.0 / -x, torch.copysign(torch.ones_like(x), -x)), x)


def test_digamma_at_zero_and_integers():
    check(torch.digamma, torch.tensor([0.0, -0.0, 1.0, -2.0, 3.5] + torch.randn(11).tolist()))
    torch._dynamo.reset()
    check(torch.digamma, torch.randint(-3, 4, (30,)))
    torch._dynamo.reset()
    check(torch.digamma, torch.tensor([True, False, True]))


def test_interpreter_fma_rounds_once():
    """The interpreter's float32 ``tl.fma`` keeps the exact product, as the GPU's does (it
    rounded the product first): (1 + 2^-23)^2 - (1 + 2^-22) is 2^-46 exactly, 0 that way."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    from braze.codegen.triton.interpret import install
    install()
    value = lambda v: interpreter.TensorHandle(np.array([v], dtype=np.float32), tl.float32)  # noqa: E731
    one_ulp_up = np.float32(1 + 2 ** -23)
    out = interpreter.InterpreterBuilder().create_fma(value(one_ulp_up), value(one_ulp_up), value(-(1 + 2 ** -22)))
    assert out.data.dtype == np.float32 and out.data[0] == 2.0 ** -46


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_floor_division_past_the_float_range_and_by_subnormals(dtype):
    """Quotients that overflow give eager's infinities, and subnormal bfloat16 divisors keep
    their value. The interpreter's ``fmod`` is torch's vectorized CPU one, NaN where a / b
    overflows in blocks of 16 (the GPU's libdevice is exact), and a careless conversion of
    bfloat16 subnormals to float32 gives other numbers (1.001e-38 to 8.27e-39)."""
    values = torch.tensor([-3e38, 3e38, -1e-30, 1e-30, -7.0, 2.5, 1e-38, -1e-38, 5e-40], dtype=dtype)
    a = values[:, None].expand(9, 9).contiguous()
    b = values[None, :].expand(9, 9).contiguous()
    # (not fmod itself: eager's has the NaNs); the float32 bits of b are compared exactly
    check(lambda a, b: (torch.floor_divide(a, b), (b.float() * 2).view(torch.int32)), a, b)
