"""Mismatches found by the differential fuzzer (tests/fuzz), as minimal repros.

Each test is the smallest program hypothesis shrank a failure to, written out by
hand. A test that fails today is marked ``xfail(strict=True)`` with the cause,
so it turns into a failure (and must be unmarked) the day the bug is fixed; the
fuzzer's ``KNOWN_BUGS`` (or a named exclusion in the generator) keeps the op
out of the CI fuzz run meanwhile, and names this file.
"""
import pytest
import torch

from helpers import check

TORCH_2_13 = torch.__version__ < "2.14"


@pytest.mark.xfail(TORCH_2_13, strict=True, raises=AssertionError,
                   reason="torch 2.13 AOTAutograd drops an in-place op on a 0-d float64 graph input: "
                          "the captured graph is empty, the input keeps its value (backend='aot_eager' "
                          "too; float32/int64/bf16 0-d and float64 1-d are fine; fixed in torch 2.14)")
def test_in_place_mul_of_zero_dim_float64_input():
    def fn(a0):
        a0.mul_(2)
        return a0 + 0
    x = torch.tensor(1.5, dtype=torch.float64)
    expected = fn(x.clone())
    actual_input = x.clone()
    actual = torch.compile(fn, backend="braze")(actual_input)
    assert actual.item() == expected.item() == 3.0
    assert actual_input.item() == 3.0


def test_in_place_mul_of_zero_dim_float32_input():
    """The float32 twin of the case above works on every torch version."""
    def fn(a0):
        a0.mul_(2)
        return a0 + 0
    check(fn, torch.tensor(1.5))


def test_sum_over_size_one_dim_of_negative_zero():
    """Fixed: a sum over one element adds 0.0, as eager's does (-0.0 becomes +0.0)."""
    def fn(x):
        return 1 / x.sum(1), torch.atan2(x.mean(1), torch.tensor(-1.0))
    # eager: 1/x [inf, 0.5], atan2 [pi, 2.03] (braze gave [-inf, 0.5], [-pi, 2.03] before the fix)
    check(fn, torch.tensor([[-0.0], [2.0]]))
