"""The wrapper: straight-line Python that runs one compiled graph.

Takes: the scheduled graph, its kernels (name, argument buffers, a launch
template from the backend) and extern calls. Gives: Python source for
``call(args)`` and the names it needs, so the generated code reads like the
program it runs and can be printed, saved and rerun on its own.

Memory: outputs are allocated with their eager strides. Intermediates live in
raw byte storages taken from a pool: when a buffer is read for the last time its
storage returns to the pool and the next intermediate of the same byte size
reuses it. On the CPU, buffers of at least ``config.host_cache_min_kb`` come from
``host_cache`` (intermediates, matrix-product results written with ``out=``, and
outputs the user never holds), so that memory freed by one call is not faulted in
again by the next. ATen results are checked against the strides braze compiled for
and copied when ATen chose others.

Aliasing, the rule storage reuse obeys: a raw storage goes back to the pool only once
nothing that may share it can still be read. Buffers share storage through the ATen
calls whose results may be views of their arguments (``_may_alias``: a schema's
``Tensor(a)``, so every view op: ``view``, ``select``, ``slice``, ``as_strided``,
``view_as_real``/``view_as_complex``, ``unsqueeze``, ``expand``, ``transpose``,
``permute``, ``reshape``, ``alias``...; ops whose schema hides a view: ``_unsafe_view``,
``unsafe_split``; composites that may return their argument; unknown targets), joined
transitively into groups (``_storage_groups``). A group's storages are released after
the last step that uses any member, and never when a member is a graph output, returned
itself or as a view (``OutputSpec`` "view"): the caller holds it after the call. A
storage the pool gives out is allocated anew by each call (or leased from
``host_cache``, whose block returns only when its storage dies, views of it included),
so a later call never writes into what an earlier call returned. A buffer braze
allocates starts at its storage's start: an output's layout has offset 0 (lower/core.py
``pin``), since ``_empty`` allocates its sizes and strides only.

Devices: inputs on another device than the graph's (0-d CPU scalars, CPU indices of a
CUDA graph) are copied to it, results eager gives on the CPU are returned there, and a
moved input the graph writes is copied back.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from braze import config
from braze.ir import symbols
from braze.ir.collectives import starts_collective, waits
from braze.ir.graph import BufferArg, ComputeNode, ExternNode, Graph, InputNode, row_major_strides
from braze.runtime import host_cache, pages


@dataclass
class Step:
    """One call in the wrapper: a kernel or an extern."""
    kind: str  # "kernel" or "extern"
    name: str
    reads: list
    writes: list  # buffers it defines (kernel stores or extern outputs)
    launch: str = ""  # kernel: the call text, with {buffer} placeholders
    node: ExternNode | None = None
    skip: bool = False  # empty iteration space
    checked: bool = False  # a kernel with run-time checks: its error record is read after it (CPU)


def generate(graph: Graph, steps: list, private_outputs: frozenset = frozenset()) -> str:
    """The text of ``call(args)``. ``private_outputs``: output buffers the user never holds
    (gradients, activations saved for the backward), which may come from the CPU buffer cache."""
    with symbols.language("python"):
        return _Writer(graph, steps, graph.device, private_outputs).run()


def environment(device: torch.device, kernel_objects: dict) -> dict:
    """The globals ``call`` runs with: torch, the run-time helpers below, and the kernel
    launchers and constants it names."""
    return {"torch": torch, "aten": torch.ops.aten, "_device": device, "_empty": _allocator(device),
            "_alias": _alias, "_host_scalar": _host_scalar, "_ensure_layout": _ensure_layout,
            "_aligned_matmul": _aligned_matmul, "_cached_empty": host_cache.CACHE.empty, "_huge_empty": pages.empty,
            "_DeviceGuard": getattr(torch.cuda, "_DeviceGuard", None), **kernel_objects}


class _Writer:
    def __init__(self, graph: Graph, steps: list, device, private_outputs: frozenset):
        self.graph, self.steps, self.device = graph, steps, device
        self.private_outputs = private_outputs
        self.moved = {n.name for n in graph.nodes if isinstance(n, InputNode) and (n.host_scalar or n.elsewhere)}
        self.lines: list[str] = []
        self.outputs = {o.buffer for o in graph.outputs if o.buffer is not None}
        self.last_use = self._last_uses()
        self.pool: dict = {}  # nbytes -> [raw storage names]
        self.raw_of: dict = {}
        self.raw_dtype: dict = {}  # raw storage name -> the dtype it was allocated with
        self.raw_count = 0
        self.allocated: set = set()
        self.unbound: dict = {}  # unbacked symbols not read yet from a result (``_bind``)

    def run(self) -> str:
        inputs = [name for name in self.graph.inputs]
        self.lines.append("def call(args):")
        self.lines += [f"    {name} = {text}" for name, text in symbols.bindings().items()]
        given = symbols.bindings()
        self.unbound = {n: m for n, m in symbols.unbacked().items() if n not in given}  # (``_bind``)
        self.lines += [f"    {name} = 0  # {meaning}: bound below" for name, meaning in self.unbound.items()]
        unpack = ", ".join(name or "_" for name in inputs)
        if inputs:
            self.lines.append(f"    {unpack}{',' if len(inputs) == 1 else ''} = args")
        for node in self.graph.nodes:
            if isinstance(node, InputNode) and node.constant is not None:
                self.lines.append(f"    {node.name} = {node.name}_value")
            self._move_in(node)
        for k, step in enumerate(self.steps):
            self._allocate(step)
            if step.kind == "kernel":
                if not step.skip:
                    self.lines.append("    " + step.launch)
                if step.checked and not step.skip and self.device.type == "cpu":
                    self.lines.append("    if _error_flag[0]: _checks.fail()")
            else:
                self._extern(step)
            self._release(k)
        self._move_back()
        self.lines.append(f"    return ({''.join(self._output(o) + ', ' for o in self.graph.outputs)})")
        if self.device.type == "cuda" and torch.cuda.device_count() > 1:  # allocations go to the current device
            self.lines[1:] = [f"    with _DeviceGuard({self.device.index or 0}):"] + ["    " + x for x in self.lines[1:]]
        return "\n".join(self.lines) + "\n"

    # ------------------------------------------------------------------ buffers

    def _last_uses(self) -> dict:
        """The step after which each buffer is dead (the module's aliasing rule): a buffer
        lives as long as every buffer that may share its storage (``_storage_groups``), and
        to the end of the call (past every step: never released) when one of them is a
        graph output, which the caller holds after the call."""
        last = {}
        for k, step in enumerate(self.steps):
            for name in step.reads + step.writes:
                last[name] = k
        for name in self.outputs:
            last[name] = len(self.steps)
        self._hold_for_collectives(last)
        for group in self._storage_groups():
            end = max(last.get(name, -1) for name in group)
            for name in group:
                if name in last:
                    last[name] = end
        return last

    def _hold_for_collectives(self, last: dict) -> None:
        """The buffers a collective reads live until its last wait: the process group may
        read them until then (gloo in its own thread, NCCL on its own stream), so their
        storage must not go to a buffer written in between. A result nobody waits for in
        this graph holds them to the end of the call."""
        waited = {}  # collective result -> the step that waits for it
        for k, step in enumerate(self.steps):
            if step.kind == "extern" and waits(step.node.target):
                for name in step.reads:
                    waited[name] = k
        for k, step in enumerate(self.steps):
            if step.kind == "extern" and starts_collective(step.node.target):
                end = max((waited.get(name, len(self.steps)) for name in step.writes), default=k)
                for name in step.reads:
                    last[name] = max(last.get(name, k), end)

    def _storage_groups(self) -> list:
        """Sets of buffers that may share storage: the arguments and results of every ATen
        call whose results may be views of its arguments (``_may_alias``: ``select``,
        ``view_as_real``, ``_unsafe_view``, ``unsafe_split``...), joined transitively."""
        parent: dict = {}

        def root(name):
            while parent.setdefault(name, name) != name:
                parent[name] = parent[parent[name]]
                name = parent[name]
            return name
        for step in self.steps:
            if step.kind == "extern" and _may_alias(step.node.target):
                names = step.reads + step.writes
                for name in names[1:]:
                    parent[root(name)] = root(names[0])
        groups: dict = {}
        for name in parent:
            groups.setdefault(root(name), set()).add(name)
        return [g for g in groups.values() if len(g) > 1]

    def _allocate(self, step: Step) -> None:
        if step.kind != "kernel":
            return
        for name in step.writes:
            node = self.graph.producer(name)
            if not isinstance(node, ComputeNode) or node.mutates or name in self.allocated:
                continue  # (a scatter writes into a buffer allocated by the kernel before it)
            self.allocated.add(name)
            layout = node.layout
            if name in self.outputs or layout.storage_numel() == 0:
                # ``_empty_text`` allocates sizes/strides from the storage's start; the kernels
                # store at ``layout.position``, which counts the offset (lower/core.py ``pin``)
                assert layout.offset == 0, f"{name}: a graph output allocated at offset {layout.offset}"
                self.lines.append(f"    {name} = {self._empty_text(name, layout, node.dtype)}")
                continue
            nbytes = layout.storage_numel() * node.dtype.itemsize
            raw = self._raw(nbytes, node.dtype)
            self.raw_of[name] = (raw, nbytes)
            typed = raw if self.raw_dtype[raw] == node.dtype else f"{raw}.view({node.dtype})"
            self.lines.append(f"    {name} = _alias({typed}, {layout.sizes!r}, {layout.strides!r}, 0)")

    def _raw(self, nbytes: int, dtype) -> str:
        """A storage of ``nbytes`` bytes: a dead buffer's, or a new one in ``dtype``."""
        free = self.pool.get(nbytes)
        if free:
            return free.pop()
        raw = f"raw{self.raw_count}"
        self.raw_count += 1
        self.raw_dtype[raw] = dtype
        numel = max(nbytes // dtype.itemsize, 1)
        cached = f", {numel}" if self._reused_bytes(numel * dtype.itemsize) else ""
        self.lines.append(f"    {raw} = {'_cached_empty' if cached else '_empty'}(({numel},), (1,), {dtype}{cached})")
        return raw

    def _empty_text(self, name: str, layout, dtype) -> str:
        """An allocation: from braze's CPU buffer cache where the buffer is large enough and
        the user will not hold it (a cached block's storage cannot grow: ``resize_`` to a
        larger size raises)."""
        if self._reused(name, layout, dtype):
            return f"_cached_empty({layout.sizes!r}, {layout.strides!r}, {dtype}, {layout.storage_numel()})"
        if self.device.type == "cpu" and symbols.known(layout.storage_numel() * dtype.itemsize, ">=",
                                                       pages.MIN_BYTES) is not False:
            return f"_huge_empty({layout.sizes!r}, {layout.strides!r}, {dtype})"  # (runtime/pages.py)
        return f"_empty({layout.sizes!r}, {layout.strides!r}, {dtype})"

    def _reused(self, name: str, layout, dtype) -> bool:
        private = name not in self.outputs or name in self.private_outputs
        return private and self._reused_bytes(layout.storage_numel() * dtype.itemsize)

    def _reused_bytes(self, nbytes: int) -> bool:
        """Large enough for the CPU buffer cache; a symbolic size whose ranges do not tell
        goes to the cache, which hands a small buffer to ATen at run time."""
        if self.device.type != "cpu":
            return False
        large = symbols.known(nbytes, ">=", config.host_cache_min_kb * 1024)
        return True if large is None else large

    def _release(self, k: int) -> None:
        dead = [name for name, last in self.last_use.items() if last == k and name not in self.outputs
                and not isinstance(self.graph.producer(name), InputNode)]
        for name in sorted(dead):
            if name in self.raw_of:
                raw, nbytes = self.raw_of.pop(name)
                self.pool.setdefault(nbytes, []).append(raw)
        if dead:
            self.lines.append(f"    del {', '.join(sorted(dead))}")

    # ------------------------------------------------------------------ calls

    def _extern(self, step: Step) -> None:
        node = step.node
        args = self._args_text(node.args)
        kwargs = "".join(f", {k}={self._args_text([v])}" for k, v in node.kwargs.items())
        target = _target_text(node.target)
        outs = [o for o in node.outputs]
        if node.single:
            name, _, layout = outs[0]
            if node.target in PADDED_MATMULS and _padded(layout):
                self.lines.append(f"    {name} = _aligned_matmul({target[:-len('.default')]}.out, {args}{kwargs})")
            elif node.target in CONTIGUOUS_RESULTS and _row_major(layout) and self._reused(name, layout, outs[0][1]):
                out = self._empty_text(name, layout, outs[0][1])
                self.lines.append(f"    {name} = {target[:-len('.default')]}.out({args}{kwargs}, out={out})")
            else:
                self.lines.append(f"    {name} = {target}({args}{kwargs})")
                self._bind(outs[0])
                contiguous = node.target in CONTIGUOUS_RESULTS and _row_major(layout)
                # (a collective's result is not read before its wait, whose result is checked)
                if not contiguous and not starts_collective(node.target):
                    self._check_layout(outs[0])
            return
        if node.value_of:  # (``item()``: a scalar the sizes after it use)
            self.lines.append(f"    {node.value_of} = {target}({args}{kwargs})")
            self.unbound.pop(node.value_of, None)
            return
        result = f"{node.name}_result"
        self.lines.append(f"    {result} = {target}({args}{kwargs})")
        for k, out in enumerate(outs):
            if out is not None:
                self.lines.append(f"    {out[0]} = {result}[{k}]")
                self._bind(out)
                if not starts_collective(node.target):
                    self._check_layout(out)
        self.lines.append(f"    del {result}")

    def _bind(self, out) -> None:
        """The sizes of an extern's result that only its run decides (``u0`` of ``nonzero``),
        read from the result: the kernels and allocations after it take them."""
        name, _, layout = out
        for dim, size in enumerate(layout.sizes):
            if symbols.is_symbolic(size) and symbols.text_of(size, "python") in self.unbound:
                self.lines.append(f"    {symbols.text_of(size, 'python')} = {name}.shape[{dim}]")
                del self.unbound[symbols.text_of(size, "python")]

    def _args_text(self, args) -> str:
        parts = []
        for a in args:
            if isinstance(a, BufferArg):
                parts.append(self._view_text(a))
            elif isinstance(a, list):
                parts.append("[" + self._args_text(a) + "]")
            elif isinstance(a, tuple):
                parts.append("(" + self._args_text(a) + ("," if len(a) == 1 else "") + ")")
            else:
                parts.append(_value_text(a))
        return ", ".join(parts)

    def _view_text(self, arg: BufferArg) -> str:
        """The buffer itself where the view is its whole layout (decided now, not per call)."""
        layout = self.graph.layout_of(arg.buffer)
        if arg.offset == 0 and _same_strides(arg.sizes, arg.strides, layout):
            return arg.buffer
        return f"_alias({arg.buffer}, {arg.sizes!r}, {arg.strides!r}, {arg.offset})"

    def _check_layout(self, out) -> None:
        name, dtype, layout = out
        if layout.numel > 1:
            self.lines.append(f"    {name} = _ensure_layout({name}, {tuple(layout.strides)!r})")

    def _output(self, spec) -> str:
        if spec.kind == "value":
            return repr(spec.value)
        buffer = f"{spec.buffer}_given" if spec.buffer in self.moved else spec.buffer
        text = buffer if spec.kind == "buffer" else \
            f"torch.as_strided({buffer}, {spec.sizes!r}, {spec.strides!r}, {spec.offset})"
        return text if spec.device is None else f"{text}.to({_value_text(spec.device)})"

    # ------------------------------------------------------------------ other devices

    def _move_in(self, node) -> None:
        """An input the kernels read from a copy on the graph's device (``self.moved``: 0-d
        CPU scalars, CPU indices of a CUDA graph); ``NAME_given`` keeps the caller's tensor."""
        if node.name not in self.moved:
            return
        device = _value_text(self.device)
        self.lines.append(f"    {node.name}_given = {node.name}")
        copy = f"_host_scalar({node.name}, {device})" if node.host_scalar else f"{node.name}.to({device})"
        self.lines.append(f"    {node.name} = {copy}")

    def _move_back(self) -> None:
        """A moved input the graph writes in place (``step.add_(1)`` on a CPU counter): the
        caller's tensor takes the result."""
        written = {n.mutates for n in self.graph.nodes if isinstance(n, ComputeNode) and n.mutates}
        for name in sorted(self.moved & written):
            self.lines.append(f"    {name}_given.copy_({name})")


def _target_text(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        packet = target.overloadpacket
        namespace = target.namespace
        return f"torch.ops.{namespace}.{packet._qualified_op_name.split('::')[-1]}.{target._overloadname}"
    raise NotImplementedError(f"extern target {target}")


def _host_scalar(x: torch.Tensor, device) -> torch.Tensor:
    """A 0-d CPU tensor's value on ``device``, filled by a kernel that takes it as an argument:
    ``x.to(device)`` copies from pageable memory and waits for the stream first (one stream
    synchronization per scalar: BERT's backward reads two per layer, and the GPU would sit
    idle while the host caught up)."""
    return torch.full((), x.item(), dtype=x.dtype, device=device)


def _value_text(value) -> str:
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return f"torch.{str(value).replace('torch.', '')}" if not isinstance(value, torch.device) \
            else f"torch.device({str(value)!r})"
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return f"float({str(value)!r})"
    return repr(value)


# ----------------------------------------------------------------------------- run-time helpers

_FAST = getattr(torch._C._dynamo, "guards", None)  # allocation and aliasing without Python argument parsing
_alias = getattr(_FAST, "_reinterpret_tensor", None) or (
    lambda t, sizes, strides, offset: t.as_strided(sizes, strides, t.storage_offset() + offset))


def _allocator(device: torch.device):
    """``empty(sizes, strides, dtype)`` on ``device``, through torch's C helper where it has one
    (no Python argument parsing: a fraction of ``torch.empty_strided``'s host time)."""
    fast = getattr(_FAST, f"_empty_strided_{device.type}", None)
    if fast is not None:
        return fast
    return lambda sizes, strides, dtype: torch.empty_strided(sizes, strides, dtype=dtype, device=device)


def _same_strides(sizes, strides, layout) -> bool:
    """Do ``sizes``/``strides`` address exactly what ``layout`` does?"""
    return (tuple(sizes) == tuple(layout.sizes) and layout.offset == 0
            and strides_match(sizes, strides, layout.strides))


def strides_match(sizes, strides, wanted) -> bool:
    """Equal strides, those of size-1 dimensions aside (they address nothing)."""
    return all(s == 1 or a == b for s, a, b in zip(sizes, strides, wanted))


def _row_major(layout) -> bool:
    return layout.offset == 0 and tuple(layout.strides) == tuple(row_major_strides(layout.sizes))


def _padded(layout) -> bool:
    """A 2-D layout whose rows are longer than its columns (padded matrix product rows)."""
    return (len(layout.sizes) == 2 and layout.sizes[0] > 1 and layout.strides[1] == 1
            and layout.strides[0] > layout.sizes[1])


PADDED_MATMULS = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default)  # lower/externs.padded_rows
CONTIGUOUS_RESULTS = (*PADDED_MATMULS, torch.ops.aten.bmm.default)


def _aligned_matmul(out_op, *args, **kwargs) -> torch.Tensor:
    """``mm``/``addmm`` written into rows padded to a multiple of 16 bytes, returned as
    the unpadded view (the layout lowering chose, ``padded_rows``). The right operand and
    the bias are padded with zeros in their own memory order (a transposed weight pads
    its rows: a coalesced copy); cuBLAS picks a slow unaligned kernel otherwise."""
    *bias, a, b = args
    cols = b.shape[1]
    pad = (-cols) % (16 // a.element_size())
    b = F.pad(b.t(), (0, 0, 0, pad)).t() if b.stride(0) == 1 else F.pad(b, (0, pad))
    bias = [F.pad(t, (0, pad)) if t.dim() and t.shape[-1] == cols else t for t in bias]
    out = torch.empty((a.shape[0], cols + pad), dtype=a.dtype, device=a.device)
    return out_op(*bias, a, b, **kwargs, out=out)[:, :cols]


def _ensure_layout(t: torch.Tensor | None, strides) -> torch.Tensor | None:
    """``t`` with exactly ``strides`` (for dims of size > 1), copied if ATen chose others.
    None stays None: an output ATen leaves undefined (attention statistics that a CUDA
    kernel computes only when a backward will need them)."""
    if t is None or t.stride() == strides or strides_match(t.shape, t.stride(), strides):
        return t
    out = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def _may_alias(target) -> bool:
    """May ``target`` return a view of an argument, or the argument itself? Its schema says
    so (``Tensor(a)``: every view op), it is unknown, PyTorch tags it
    ``maybe_aliasing_or_mutating`` (``dropout``, ``unsafe_chunk``), it is a composite that
    may return its argument unchanged (``type_as``, ``atleast_1d``), or it is one of the ops
    whose schema hides a view (``_UNANNOTATED_VIEWS``)."""
    schema = getattr(target, "_schema", None)
    if schema is None or any(r.alias_info is not None for r in schema.returns):
        return True
    if not isinstance(target, torch._ops.OpOverload):
        return False
    if target.overloadpacket.__name__ in _UNANNOTATED_VIEWS or torch.Tag.maybe_aliasing_or_mutating in target.tags:
        return True
    return target.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd)


# ATen ops returning views of an argument without saying so in their schema (autograd does
# not see them as views; their storage is the argument's all the same).
_UNANNOTATED_VIEWS = frozenset({"_unsafe_view", "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk"})
