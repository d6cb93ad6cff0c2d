"""Buffers and the graph of nodes that produce them.

Takes: expressions from ``braze.ir.expr``. Gives: ``Layout`` (sizes, strides,
offset), the node kinds of a lowered graph and ``Graph``, with a text form.

- ``InputNode``: a graph input, read in place.
- ``ComputeNode``: one buffer defined elementwise by ``body``. A pointwise node's
  body is an expression over its output variables ``x0, x1, ...``; a reduction's
  body is over output variables and reduction variables ``r0, r1, ...``, folded
  by ``reduction.op``. ``mutates`` names an input whose storage the node writes
  (``copy_`` into a graph input) or, for a scatter node, the buffer it scatters into:
  the node writes in place, which the text form says (``buf2: f32[16, 64] scatter,
  writes arg0 (input 0) in place: arg0[...] += ...``; the input's own line ends
  ``(written in place by buf2)``), as ``Graph.in_place_writes`` lists.
- A scatter node (``index_put``, ``scatter``, ``scatter_add``) is a compute node
  whose body is ``SCATTER(value, i0, i1, ...)``: for each element of its own sizes,
  ``value`` is written (or added) at indices ``i0, i1, ...`` of the buffer it
  ``mutates``, a fresh copy of the tensor scattered into. Readers of that buffer
  run after the scatter.
- A scan node (``cumsum``, ``cumprod``) is a compute node whose body is
  ``SCAN(value)``: its element ``k`` along the scanned dimension folds ``value`` at
  ``0..k``.
- ``ExternNode``: a call into ATen (matmul, convolution, or an op braze does not
  lower), producing one or more buffers.

Every node's reads are its body's ``LOAD``s (or an extern's arguments), known at
construction. Views never make nodes: they are index maps inside expressions.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from braze.ir import dtypes
from braze.ir.expr import Expr, Op, cached, index, loads, var
from braze.ir.text import format_body, to_text
from braze.ir.simplify import flat_offset, floordiv, mod, row_major_strides


@dataclass(frozen=True)
class Layout:
    sizes: tuple
    strides: tuple
    offset: int = 0

    @staticmethod
    def contiguous(sizes) -> "Layout":
        return Layout(tuple(sizes), tuple(row_major_strides(sizes)), 0)

    @property
    def numel(self) -> int:
        return math.prod(self.sizes)

    def storage_numel(self) -> int:
        """Elements of storage the layout spans (from offset 0)."""
        if self.numel == 0:
            return 0
        return self.offset + 1 + sum((s - 1) * st for s, st in zip(self.sizes, self.strides))

    def position(self, indices) -> Expr:
        """Storage position of a logical index."""
        return flat_offset(indices, self.strides, self.offset)

    def indices_at(self, position: Expr) -> list:
        """The logical index stored at ``position`` (counted from this layout's offset), for a
        dense layout: each dimension's ``position // stride % size``."""
        return [mod(floordiv(position, st), n) if n != 1 else index(0) for n, st in zip(self.sizes, self.strides)]

    def is_dense(self) -> bool:
        """Non-overlapping and without gaps (a permutation of a contiguous layout)."""
        dims = sorted((st, s) for s, st in zip(self.sizes, self.strides) if s != 1)
        expected = 1
        for stride, size in dims:
            if stride != expected:
                return False
            expected *= size
        return True


class ReduceOp(enum.Enum):
    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    ARGMAX = "argmax"
    ARGMIN = "argmin"
    ANY = "any"
    ALL = "all"
    WELFORD_MEAN = "welford_mean"
    WELFORD_M2 = "welford_m2"


@dataclass(frozen=True)
class Reduction:
    op: ReduceOp
    sizes: tuple  # extents of the reduction variables r0, r1, ...

    @property
    def numel(self) -> int:
        return math.prod(self.sizes)


def out_vars(sizes) -> tuple:
    return _vars("x", tuple(sizes))


def reduce_vars(sizes) -> tuple:
    return _vars("r", tuple(sizes))


@cached
def _vars(prefix: str, sizes: tuple) -> tuple:
    return tuple(var(f"{prefix}{k}", s) for k, s in enumerate(sizes))


@dataclass(eq=False)
class Node:
    name: str
    dtype: Any
    sizes: tuple
    origins: list = field(default_factory=list)  # the ATen ops this node came from

    @property
    def numel(self) -> int:
        return math.prod(self.sizes)

    def reads(self) -> list[str]:
        return []


@dataclass(eq=False)
class InputNode(Node):
    position: int = 0
    layout: Layout | None = None  # relative to the tensor's data pointer (offset 0)
    constant: Any = None  # a tensor baked into the graph (get_attr), else None
    storage_offset: int = 0  # the input's own offset into its storage (for views of it)
    host_scalar: bool = False  # a 0-d CPU tensor read by a CUDA graph (filled on the GPU per call)
    elsewhere: bool = False  # on another device than the graph's, not a 0-d scalar (a CPU index): copied per call


@dataclass(eq=False)
class ComputeNode(Node):
    body: Expr | None = None
    reduction: Reduction | None = None
    layout: Layout | None = None  # set once the node is realized (stored)
    mutates: str | None = None  # buffer written in place (copy_ into an input; a scatter's target)
    preferred: Layout | None = None  # eager's layout for this value, used if it is stored
    pinned: str | None = None  # why the node must be stored whatever the inliner thinks
    sources: list = field(default_factory=list)  # ATen graph nodes (by name) it computes; copies none

    @property
    def is_reduction(self) -> bool:
        return self.reduction is not None

    def reads(self) -> list[str]:
        memo = self.body.memo()
        found = memo.get("reads")
        if found is None:
            found = memo["reads"] = list(dict.fromkeys(ld.arg for ld in loads(self.body)))
        return found + [self.mutates] if self.is_scatter else found

    @property
    def is_scatter(self) -> bool:
        return self.body is not None and self.body.op is Op.SCATTER

    @property
    def is_scan(self) -> bool:
        return self.body is not None and self.body.op is Op.SCAN

    @property
    def accumulates(self) -> bool:
        """A scatter that adds into its target rather than overwriting it."""
        return self.is_scatter and self.body.arg == "add"

    @property
    def target(self) -> str:
        """The buffer the node stores into."""
        return self.mutates or self.name


@dataclass(frozen=True)
class BufferArg:
    """A tensor argument of an extern call: a buffer seen through a strided view."""
    buffer: str
    sizes: tuple
    strides: tuple
    offset: int
    dtype: Any


@dataclass(eq=False)
class ExternNode(Node):
    target: Any = None  # an OpOverload (or callable) run at run time
    args: tuple = ()  # BufferArg, nested lists/tuples, or plain values
    kwargs: dict = field(default_factory=dict)
    outputs: list = field(default_factory=list)  # (buffer name, dtype, Layout) or None per result
    is_fallback: bool = False  # True: braze could have no lowering for it (reported)
    single: bool = True  # the call returns one tensor, not a tuple
    value_of: str = ""  # the size symbol the call's scalar result is (``item()``: ``u0``), else ""

    def reads(self) -> list[str]:
        found = []
        _collect_buffers(self.args, found)
        _collect_buffers(tuple(self.kwargs.values()), found)
        return found


def _collect_buffers(value, found: list) -> None:
    if isinstance(value, BufferArg):
        if value.buffer not in found:
            found.append(value.buffer)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect_buffers(v, found)


@dataclass(frozen=True)
class OutputSpec:
    """One graph output: a buffer, a view of a buffer, or a plain value."""
    kind: str  # "buffer", "view", "value"
    buffer: str | None = None
    sizes: tuple = ()
    strides: tuple = ()
    offset: int = 0
    value: Any = None
    device: Any = None  # eager's device where it is not the graph's (a CPU result of a CUDA graph)


# The buffer a kernel with run-time checks (``Op.CHECK``) reports to: int64 [site + 1, the
# offending value], 0 while no check has failed; a kernel parameter like any buffer, but
# owned by the compiled graph (``braze.runtime.checks``), not by its schedule.
ERROR_RECORD = "b_errors"
ERROR_RECORD_SIZE = 2


@dataclass(frozen=True)
class CheckSite:
    """What a run-time check (``Op.CHECK``) raises when it fails, as eager raises it: the
    exception's type name, the user's op, and for an index the dimension, its size and the
    indexed tensor's shape."""
    kind: str  # "index" or "divisor"
    op: str  # the user's ATen op (before decompositions)
    exception: str  # "IndexError", "RuntimeError"
    dim: int = 0
    size: int = 0
    shape: tuple = ()
    message: str = ""  # eager's own wording where it names no index ("index out of range in self")


@dataclass(eq=False)
class Graph:
    nodes: list = field(default_factory=list)
    inputs: list = field(default_factory=list)  # per placeholder: buffer name or None
    outputs: list = field(default_factory=list)  # OutputSpec per graph output
    device: torch.device = torch.device("cpu")
    padded_outputs: list = field(default_factory=list)  # output indices with padded matmul rows
    checks: list = field(default_factory=list)  # CheckSite per run-time check site (``Op.CHECK``)
    target: object = None  # the ``braze.target.Target`` the graph is compiled for

    def __post_init__(self):
        self.by_name: dict = {}

    def add(self, node: Node) -> Node:
        self.nodes.append(node)
        self.add_name(node)
        return node

    def add_name(self, node: Node) -> None:
        self.by_name[node.name] = node
        if isinstance(node, ExternNode):
            for out in node.outputs:
                if out is not None:
                    self.by_name[out[0]] = node

    def producer(self, buffer: str) -> Node:
        return self.by_name[buffer]

    def dtype_of(self, buffer: str):
        node = self.by_name[buffer]
        if isinstance(node, ExternNode):
            return next(o[1] for o in node.outputs if o is not None and o[0] == buffer)
        return node.dtype

    def layout_of(self, buffer: str) -> Layout | None:
        node = self.by_name[buffer]
        if isinstance(node, ExternNode):
            return next(o[2] for o in node.outputs if o is not None and o[0] == buffer)
        return node.layout

    def to_text(self) -> str:
        inputs = {n.name: n.position for n in self.nodes if isinstance(n, InputNode)}
        writers: dict = {}
        for n in self.nodes:
            if isinstance(n, ComputeNode) and n.mutates:
                writers.setdefault(n.mutates, []).append(n.name)
        lines = [node_text(n, inputs, writers.get(n.name, ())) for n in self.nodes]
        return "\n".join(lines) + "\n" + _outputs_text(self.outputs)

    def in_place_writes(self) -> list:
        """``(node, the buffer it writes in place, its input position or None)`` for each
        node that writes into an existing buffer: a scatter into its base or into a graph
        input, an update of a graph input (``copy_``, ``add_``)."""
        return [(n, n.mutates, _input_position(self.by_name.get(n.mutates))) for n in self.nodes
                if isinstance(n, ComputeNode) and n.mutates]


def _input_position(node) -> int | None:
    return node.position if isinstance(node, InputNode) else None


def in_place_text(buffer: str, position: int | None) -> str:
    """How the IR names a buffer written in place: ``arg0 (input 0)``, ``buf1``."""
    return buffer if position is None else f"{buffer} (input {position})"


def node_text(node: Node, inputs: dict | None = None, writers=()) -> str:
    """One node as text; ``inputs``: graph input buffer -> position (a buffer written in
    place is named with it); ``writers``: the nodes that write this one's buffer in place."""
    shape = f"{dtypes.short(node.dtype)}{list(node.sizes)}"
    written_by = f" (written in place by {', '.join(writers)})" if writers else ""
    if isinstance(node, InputNode):
        return f"{node.name}: {shape} = input {node.position} strides {list(node.layout.strides)}{written_by}"
    if isinstance(node, ExternNode):
        kind = "fallback" if node.is_fallback else "extern"
        outs = ", ".join(o[0] for o in node.outputs if o is not None)
        return f"{outs} = {kind} {node.target}({_args_text(node.args)})"
    head = f"{node.name}: {shape}"
    if node.layout is not None and not node.mutates:
        head += f" stored strides {list(node.layout.strides)}"
    head += written_by
    body = node.body
    if node.mutates:
        written = in_place_text(node.mutates, (inputs or {}).get(node.mutates))
        head += f"{' scatter,' if node.is_scatter else ''} writes {written} in place:"
    if node.is_scatter:
        indices = ", ".join(to_text(i) for i in body.args[1:])
        head += f" {node.mutates}[{indices}] {'+' if node.accumulates else ''}="
        body = body.args[0]
    elif node.is_scan:
        combine, dim = body.arg
        head += f" = cumulative {combine} along dim {dim} of"
        body = body.args[0]
    else:
        if node.mutates:
            head += f" {node.mutates}[{', '.join(to_text(v) for v in out_vars(node.sizes))}]"
        head += f" = {node.reduction.op.value} over r{list(node.reduction.sizes)} of" if node.reduction else " ="
    lines = format_body(body, "value")
    if len(lines) == 1:
        return f"{head} {lines[0][len('value = '):]}"
    return head + "\n" + "\n".join("    " + line for line in lines)


def _args_text(args) -> str:
    parts = []
    for a in args:
        if isinstance(a, BufferArg):
            parts.append(a.buffer if a.offset == 0 else f"{a.buffer}@{a.offset}")
        elif isinstance(a, (list, tuple)):
            parts.append("[" + _args_text(a) + "]")
        else:
            parts.append(repr(a))
    return ", ".join(parts)


def _outputs_text(outputs) -> str:
    shown = []
    for o in outputs:
        if o.kind == "buffer":
            shown.append(o.buffer)
        elif o.kind == "view":
            shown.append(f"view({o.buffer}, {list(o.sizes)}, {list(o.strides)}, {o.offset})")
        else:
            shown.append(repr(o.value))
    return f"return ({', '.join(shown)})"


def is_load_of(e: Expr, buffer: str) -> bool:
    return e.op is Op.LOAD and e.arg == buffer
