"""What braze knows of the host CPU: the sizes of its caches.

Takes: ``/sys/devices/system/cpu/cpu0/cache`` (Linux). Gives: ``cache_bytes(level, kind)``,
the size of one cache of cpu0 (``kind``: "Data", "Instruction" or "Unified"), and
``last_level_cache_bytes()``; each with a stated default where sysfs cannot be read.
The C++ backend sizes by them what its kernels keep in a cache: the scratch of a tiled
transpose (L1 data, ``codegen/cpp/tiles.py``) and the output size above which stores go
around the caches (``config``'s ``cpp_stream_min_bytes``).
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
