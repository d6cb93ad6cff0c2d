"""half <-> float in the C++ backend, bit for bit against eager.

The prelude stores float16 as ``uint16_t`` and converts with integer and float arithmetic
(so GCC vectorizes the conversions). Every one of the 65,536 halves is widened, and floats
at every rounding boundary (largest half, overflow to inf, the normal/subnormal edge,
halfway cases, signed zeros, inf and NaN) plus a million random bit patterns are narrowed.
NaNs must stay NaN (eager's payload is not compared).
"""
import pytest
import torch

import braze


def _same_bits(actual: torch.Tensor, expected: torch.Tensor, view) -> None:
    nan = expected.isnan()
    assert torch.equal(actual.isnan(), nan)
    a, e = actual[~nan].view(view), expected[~nan].view(view)
    bad = (a != e).nonzero().flatten()
    assert bad.numel() == 0, f"{bad.numel()} differ, first at {expected[~nan][bad[0]].item()!r}: " \
                             f"{a[bad[0]].item():#x} != {e[bad[0]].item():#x}"


def test_every_half_widens_exactly():
    halves = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    widen = braze.compile(lambda h: h.float() * 1.0)
    _same_bits(widen(halves), halves.float(), torch.int32)


def _boundaries() -> torch.Tensor:
    edges = [0.0, 65504.0, 65505.0, 65519.0, 65519.996, 65520.0, 65536.0, 1e10, 2.0 ** -14, 2.0 ** -15,
             2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -25, 2.0 ** -26, 2.0 ** -14 - 2.0 ** -25, 1.0 + 2.0 ** -11,
             1.0 + 3 * 2.0 ** -11, 1e-45, float("inf"), float("nan")]
    values = torch.tensor(edges, dtype=torch.float32)
    near = torch.cat([values.nextafter(torch.tensor(float("inf"))), values.nextafter(torch.tensor(0.0))])
    values = torch.cat([values, near])
    return torch.cat([values, -values])


def test_floats_narrow_to_the_nearest_even_half():
    generator = torch.Generator().manual_seed(7)
    bits = torch.randint(-2 ** 31, 2 ** 31, (1 << 20,), dtype=torch.int64, generator=generator)
    floats = torch.cat([_boundaries(), bits.to(torch.int32).view(torch.float32)])
    narrow = braze.compile(lambda x: (x * 1.0).half())
    _same_bits(narrow(floats), floats.half(), torch.int16)


@pytest.mark.parametrize("dtype, helper", [(torch.float16, "round_to_f16"), (torch.bfloat16, "round_to_bf16")])
def test_an_intermediate_rounded_through_half_matches_eager(dtype, helper):
    """A float32 value rounded to bf16/fp16 and read on as float32 is one rounding in float
    registers (``round_to_f16``, ``round_to_bf16``), bit for bit the two conversions'."""
    generator = torch.Generator().manual_seed(8)
    bits = torch.randint(-2 ** 31, 2 ** 31, (1 << 20,), dtype=torch.int64, generator=generator)
    floats = torch.cat([_boundaries(), bits.to(torch.int32).view(torch.float32)])

    def through(x):
        return (x * 1.0).to(dtype).float() * 1.0
    source = "".join(g.source for g in braze.explain(through, floats).graphs)
    assert f"{helper}(" in source
    _same_bits(braze.compile(through)(floats), through(floats), torch.int32)
