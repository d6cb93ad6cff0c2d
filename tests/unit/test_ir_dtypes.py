"""Tier 1: the dtype facts of ``braze/ir/dtypes.py`` against torch's own.

Which dtypes are floats, integers, bools and low precision; the dtype arithmetic is carried
out in (bf16 and fp16 in float32, as eager's kernels compute them; checked against eager's
own rounding); the accumulator of sums and products; item sizes and the IR's short names."""
import pytest
import torch

from braze.ir import dtypes

ALL = dtypes.SUPPORTED


def test_every_supported_dtype_is_exactly_one_kind():
    for dtype in ALL:
        kinds = [dtypes.is_float(dtype), dtypes.is_integer(dtype), dtypes.is_bool(dtype)]
        assert kinds.count(True) == 1, dtype
        assert dtypes.is_supported(dtype)
        assert dtypes.is_float(dtype) == dtype.is_floating_point
        assert dtypes.is_integer(dtype) == (not dtype.is_floating_point and dtype is not torch.bool)
    assert set(dtypes.INTEGERS) == set(dtypes.SIGNED) | set(dtypes.UNSIGNED)
    assert all(torch.iinfo(d).min < 0 for d in dtypes.SIGNED) and torch.iinfo(torch.uint8).min == 0


@pytest.mark.parametrize("dtype", [torch.complex64, torch.float8_e4m3fn, torch.uint16, torch.int4]
                         if hasattr(torch, "int4") else [torch.complex64, torch.float8_e4m3fn, torch.uint16])
def test_other_dtypes_are_not_supported(dtype):
    assert not dtypes.is_supported(dtype)
    assert not dtypes.is_float(dtype) and not dtypes.is_integer(dtype)


def test_low_precision_computes_in_float32():
    for dtype in ALL:
        expected = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
        assert dtypes.compute_dtype(dtype) is expected
    assert set(dtypes.LOW_PRECISION) == {torch.float16, torch.bfloat16}


@pytest.mark.parametrize("dtype", dtypes.LOW_PRECISION)
def test_one_rounding_from_float32_is_what_eager_gives_for_one_op(dtype):
    """Eager's bf16/fp16 kernels compute one op in float32 and round once: what braze's
    ``compute_dtype`` promises for a single op."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(4096, generator=gen).to(dtype)
    b = torch.randn(4096, generator=gen).to(dtype)
    compute = dtypes.compute_dtype(dtype)
    for op in (torch.add, torch.mul, torch.div):
        assert torch.equal(op(a, b), op(a.to(compute), b.to(compute)).to(dtype)), op


def test_sums_accumulate_as_eager_does():
    assert dtypes.sum_dtype(torch.bool) is torch.int64 is torch.ones(3, dtype=torch.bool).sum().dtype
    for dtype in dtypes.LOW_PRECISION:
        assert dtypes.sum_dtype(dtype) is torch.float32
    for dtype in (torch.float32, torch.float64) + dtypes.INTEGERS:
        assert dtypes.sum_dtype(dtype) is dtype


def test_item_sizes_and_short_names():
    for dtype in ALL:
        assert dtypes.itemsize(dtype) == torch.empty((), dtype=dtype).element_size()
    names = [dtypes.short(d) for d in ALL] + [dtypes.short(dtypes.INDEX)]
    assert len(set(names)) == len(names)
    assert dtypes.short(torch.bfloat16) == "bf16" and dtypes.short(torch.bool) == "b8"
    assert dtypes.short(dtypes.INDEX) == "idx" and dtypes.short(torch.complex64) == "complex64"
