"""What braze knows of the host CPU: the sizes of its caches and the width of its vectors.

Takes: ``/sys/devices/system/cpu/cpu0/cache`` and ``/proc/cpuinfo`` (Linux). Gives:
``cache_bytes(level, kind)``, the size of one cache of cpu0 (``kind``: "Data", "Instruction"
or "Unified"), ``last_level_cache_bytes()``, and ``vector_bits()``, the widest x86 vector
registers the CPU has; each with a stated default where the files cannot be read.
The C++ backend sizes by them what its kernels keep in a cache: the scratch of a tiled
transpose (L1 data, ``codegen/cpp/tiles.py``) and the output size above which stores go
around the caches (``config``'s ``cpp_stream_min_bytes``), and the vectors its compiler
uses for vector math (``cpp_math_vector_bits``).
"""
from __future__ import annotations

import functools

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@functools.cache
def _caches() -> tuple:
    """(level, kind, bytes) of each cache of cpu0."""
    found = []
    for index in range(8):
        base = f"/sys/devices/system/cpu/cpu0/cache/index{index}/"
        try:
            level, kind, size = (_read(base + name) for name in ("level", "type", "size"))
        except OSError:
            break
        digits = size.rstrip("KMG")
        if level.isdigit() and digits.isdigit():
            found.append((int(level), kind, int(digits) * _UNITS.get(size[-1:], 1)))
    return tuple(found)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def cache_bytes(level: int, kind: str, default: int) -> int:
    return next((size for lv, k, size in _caches() if lv == level and k == kind), default)


def last_level_cache_bytes() -> int:
    """The largest CPU cache (32 MiB when sysfs cannot be read)."""
    return max((size for _, _, size in _caches()), default=32 << 20)


@functools.cache
def vector_bits() -> int:
    """512 on an x86 CPU with AVX-512F, 256 with AVX2, 128 with SSE2; 0 elsewhere (or when
    ``/proc/cpuinfo`` cannot be read)."""
    try:
        flags = next((line.split(":", 1)[1].split() for line in _read("/proc/cpuinfo").splitlines()
                      if line.startswith("flags")), [])
    except OSError:
        return 0
    return next((bits for flag, bits in (("avx512f", 512), ("avx2", 256), ("sse2", 128)) if flag in flags), 0)
