"""Large fresh CPU buffers on transparent huge pages, so that writing them faults 512 times less.

Takes: a CPU tensor just allocated (an output the user will hold, or a new block of the
buffer cache) and the machine's transparent-huge-page mode
(``/sys/kernel/mm/transparent_hugepage/enabled``). Gives: ``advise(tensor)``, which asks
the kernel to back the 2 MB-aligned part of the tensor's memory with huge pages
(``madvise(MADV_HUGEPAGE)``), and ``empty`` (allocate, then advise).

Why: glibc serves an allocation above 32 MB with a new ``mmap`` and unmaps it on free, so
every call's output of a large kernel starts unmapped, and its first write faults in and
zeroes one 4 KB page at a time: a 64 MB output is 16,385 faults a call, most of a pointwise
kernel's time on a virtual machine (``benchmarks/huge_pages.py``). Where the mode is
``madvise`` (the default of most distributions) the kernel gives huge pages only to memory
that asks; with ``always`` it needs no asking, with ``never`` asking does nothing, and then
``advise`` does nothing. Only whole huge pages inside the tensor are advised, so no memory
beyond the tensor's is touched or kept. ``config.huge_pages`` turns it off.
"""
from __future__ import annotations

import ctypes
import functools

import torch

from braze import config

HUGE_PAGE = 2 << 20
MIN_BYTES = 2 * HUGE_PAGE  # a smaller buffer may hold no whole aligned huge page
_MADV_HUGEPAGE = 14


@functools.cache
def _madvise():
    """libc's ``madvise``, where asking can change anything; else None."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            mode = f.read()
    except OSError:
        return None
    if "[madvise]" not in mode:
        return None
    call = ctypes.CDLL(None, use_errno=True).madvise
    call.argtypes, call.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    return call


def advise(t: torch.Tensor) -> torch.Tensor:
    """Ask for huge pages under ``t``'s storage (a hint: failures change nothing); gives ``t``."""
    nbytes = t.untyped_storage().nbytes()
    madvise = _madvise() if config.huge_pages and nbytes >= MIN_BYTES else None
    if madvise is not None:
        start = t.untyped_storage().data_ptr()
        first, end = -(-start // HUGE_PAGE) * HUGE_PAGE, (start + nbytes) // HUGE_PAGE * HUGE_PAGE
        if end > first:
            madvise(first, end - first, _MADV_HUGEPAGE)
    return t


_FAST = getattr(torch._C._dynamo, "guards", None)
# ``torch.empty_strided`` on the CPU through torch's C helper (no Python argument parsing)
aten_empty = getattr(_FAST, "_empty_strided_cpu", None) or (
    lambda sizes, strides, dtype: torch.empty_strided(sizes, strides, dtype=dtype))


def empty(sizes, strides, dtype: torch.dtype) -> torch.Tensor:
    """``aten_empty``, on huge pages where the buffer is large enough."""
    return advise(aten_empty(sizes, strides, dtype))
