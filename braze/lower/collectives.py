"""Functional collectives (``torch.ops._c10d_functional``), handed to ATen and so to the
process group (NCCL, gloo) as they stand.

Takes: the collective ops of a graph traced from ``torch.distributed._functional_collectives``
(user code, DDP's Python reducer under compiled autograd, FSDP2 traced whole). Gives:
``ExternNode``s, not counted as fallbacks (``ir/collectives.py`` says which calls start
a collective and which wait for one).

What the passes keep: collectives run in program order (``fuse/schedule.py`` chains
them, so every rank issues them in one order); a wait runs after its collective and as
late as its first reader allows, so independent kernels overlap the communication
(``fuse/schedule.py``); the buffers a collective reads keep their storage until its
wait (the process group may read them until then: ``runtime/wrapper.py``); a
collective's result is not touched (not even copied to other strides) before its wait.
braze adds no host synchronisation: the wait is ATen's, on the stream it belongs to.
Ops that need contiguous arguments (``Tag.needs_contiguous_strides``) get them.
"""
from __future__ import annotations

import torch

from braze.ir.collectives import STARTS, WAITS
from braze.ir.graph import Layout
from braze.lower.core import TensorValue, register


def _contiguous(ctx, value):
    """``value`` (a tensor, or a list of them) as contiguous buffers, copied where not."""
    if isinstance(value, (list, tuple)):
        return type(value)(_contiguous(ctx, v) for v in value)
    if not isinstance(value, TensorValue):
        return value
    want = Layout.contiguous(value.sizes)
    if ctx.storage_of(value, want, "read by a collective", exact=True) is not None:
        return value
    return ctx.stored(value, want, "read by a collective (contiguous)")


def _collective_rule(ctx, *args, **kwargs):
    if torch.Tag.needs_contiguous_strides in ctx.node.target.tags:
        args = tuple(_contiguous(ctx, a) for a in args)
    return ctx.extern(ctx.node.target, args, kwargs, fallback=False)


for _op in (*STARTS, *WAITS):
    register(_op)(_collective_rule)
