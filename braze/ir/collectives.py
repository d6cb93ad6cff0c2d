"""Which extern calls are functional collectives (``torch.ops._c10d_functional``).

Takes: an extern node's target. Gives: ``starts_collective`` (the call starts an
asynchronous collective whose result is ready only after its ``wait_tensor``) and
``waits`` (the call is that wait), for the scheduler (collectives in program order,
waits as late as their readers allow) and the wrapper (a collective's arguments keep
their storage until its wait). The lowering rule is ``lower/collectives.py``.
"""
from __future__ import annotations

import torch

_START = ("all_reduce", "all_reduce_coalesced", "all_gather_into_tensor", "all_gather_into_tensor_coalesced",
          "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced", "all_to_all_single", "broadcast")


def _ops(names) -> frozenset:
    found = []
    for name in names:
        try:
            found.append(getattr(torch.ops._c10d_functional, name).default)
        except (AttributeError, RuntimeError):  # a torch built without distributed
            pass
    return frozenset(found)


STARTS = _ops(_START)
WAITS = _ops(["wait_tensor"])


def starts_collective(target) -> bool:
    return target in STARTS


def waits(target) -> bool:
    return target in WAITS
