"""Reuse of large CPU buffers between calls, so that memory is not faulted in again.

Takes: allocation requests ``empty(sizes, strides, dtype)`` from the wrappers of
CPU graphs: intermediates, matrix-product results, a backward's gradients and the
activations a forward saves for its backward. Not the outputs the user holds: a
block's storage cannot grow, so ``resize_`` to a larger size would raise.
Gives: tensors whose memory is a block this cache owns. When the last tensor on a
block dies (a gradient set to None, an activation freed after the backward), the
block goes back to a free list and the next request of the same size gets it.

Why: glibc returns freed memory at the top of the heap to the kernel once more than
a threshold lies free, and a training step frees and reallocates megabytes each
step. Every page of a new allocation then costs a page fault and a zeroing in the
kernel: a small MLP's training step took hundreds of faults a step, most of them in
the matrix products that write its weight gradients (docs/benchmarks.md, "CPU kernels").

A block is leased as a ``ctypes`` array object that ``torch.frombuffer`` keeps
alive; the lease's ``__del__`` runs when the storage is released and hands the block
back. The wrapper sends only buffers of at least ``config.host_cache_min_kb`` here
(smaller ones stay with ATen's allocator); free blocks beyond ``config.host_cache_mb``
are given back to the allocator, and ``host_cache_mb = 0`` turns the cache off.
"""
from __future__ import annotations

import ctypes
import threading

import torch

from braze import config
from braze.runtime import pages

_PAGE = 4096


class HostBufferCache:
    def __init__(self):
        self._lock = threading.RLock()
        self._free: dict[int, list[int]] = {}  # block bytes -> addresses of free blocks
        self._owners: dict[int, torch.Tensor] = {}  # address -> the uint8 tensor that owns the block
        self._lease_types: dict[int, type] = {}
        self.free_bytes = 0
        self.hits = self.misses = 0

    def empty(self, sizes, strides, dtype: torch.dtype, numel: int) -> torch.Tensor:
        """Like ``torch.empty_strided`` on the CPU; ``numel``: the elements its storage spans.
        A buffer under ``host_cache_min_kb`` (a symbolic size that came out small) is ATen's."""
        if config.host_cache_mb <= 0 or numel * dtype.itemsize < config.host_cache_min_kb * 1024:
            return pages.aten_empty(sizes, strides, dtype)
        block = -(-numel * dtype.itemsize // _PAGE) * _PAGE
        lease = self._lease_type(block).from_address(self._take(block))
        flat = torch.frombuffer(lease, dtype=dtype, count=numel)
        return _alias(flat, sizes, strides, 0)

    def release_all(self) -> None:
        """Give every free block back to ATen's allocator."""
        with self._lock:
            for addrs in self._free.values():
                for addr in addrs:
                    del self._owners[addr]
            self._free.clear()
            self.free_bytes = 0

    def _take(self, block: int) -> int:
        with self._lock:
            addrs = self._free.get(block)
            if addrs:
                self.hits += 1
                self.free_bytes -= block
                return addrs.pop()
            self.misses += 1
            owner = pages.advise(torch.empty(block, dtype=torch.uint8))
            self._owners[owner.data_ptr()] = owner
            return owner.data_ptr()

    def _give_back(self, block: int, addr: int) -> None:
        with self._lock:
            if self.free_bytes + block > config.host_cache_mb * 2**20:
                self._owners.pop(addr, None)
                return
            self._free.setdefault(block, []).append(addr)
            self.free_bytes += block

    def _lease_type(self, block: int) -> type:
        lease = self._lease_types.get(block)
        if lease is None:
            cache = self

            class Lease(ctypes.c_char * block):
                __slots__ = ()

                def __del__(self):
                    cache._give_back(block, ctypes.addressof(self))
            lease = self._lease_types[block] = Lease
        return lease


_FAST = getattr(torch._C._dynamo, "guards", None)
_alias = getattr(_FAST, "_reinterpret_tensor", None) or (
    lambda t, sizes, strides, offset: t.as_strided(sizes, strides, t.storage_offset() + offset))

CACHE = HostBufferCache()
