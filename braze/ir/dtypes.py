"""Dtype facts braze needs, in one place.

Takes: ``torch.dtype`` values. Gives: classification (float / integer / bool /
low precision), the dtype an expression is computed in (bf16 and fp16 compute in
float32, as eager does), accumulator dtypes of reductions, and short names used
by the IR printer.
"""
from __future__ import annotations

import torch

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
LOW_PRECISION = (torch.float16, torch.bfloat16)
SIGNED = (torch.int8, torch.int16, torch.int32, torch.int64)
UNSIGNED = (torch.uint8,)
INTEGERS = SIGNED + UNSIGNED
SUPPORTED = FLOATS + INTEGERS + (torch.bool,)
# Index arithmetic (loop variables, offsets, strides) has its own dtype so that braze
# simplifies it freely, while user integer arithmetic is kept exactly as written.
INDEX = "index"

SHORT_NAMES = {
    torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32", torch.float64: "f64",
    torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64",
    torch.uint8: "u8", torch.bool: "b8", INDEX: "idx",
}


def is_float(dtype: torch.dtype) -> bool:
    return dtype in FLOATS


def is_integer(dtype: torch.dtype) -> bool:
    return dtype in INTEGERS


def is_bool(dtype: torch.dtype) -> bool:
    return dtype is torch.bool


def is_supported(dtype: torch.dtype) -> bool:
    return dtype in SUPPORTED


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype arithmetic on values of ``dtype`` is carried out in."""
    return torch.float32 if dtype in LOW_PRECISION else dtype


def sum_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulator of a sum or product whose result has ``dtype``."""
    if dtype in LOW_PRECISION:
        return torch.float32
    if dtype is torch.bool:
        return torch.int64
    return dtype


_HELD_EXACTLY_BY = {
    torch.float16: (torch.float32, torch.float64), torch.bfloat16: (torch.float32, torch.float64),
    torch.float32: (torch.float64,), torch.int8: (torch.int16, torch.int32, torch.int64),
    torch.uint8: (torch.int16, torch.int32, torch.int64), torch.int16: (torch.int32, torch.int64),
    torch.int32: (torch.int64,),
}


def holds_exactly(wide, narrow) -> bool:
    """Does ``wide`` hold every value of ``narrow``, so that a cast to ``wide`` and back
    gives each value back? (A bool comes back from any dtype: the way back is ``!= 0``.)"""
    return wide in _HELD_EXACTLY_BY.get(narrow, ()) or (narrow is torch.bool and wide in SUPPORTED)


def itemsize(dtype: torch.dtype) -> int:
    return dtype.itemsize


def short(dtype: torch.dtype) -> str:
    return SHORT_NAMES.get(dtype, str(dtype).replace("torch.", ""))
