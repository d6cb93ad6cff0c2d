"""Lowering: an ATen FX graph in, a braze ``Graph`` out.

Takes: a ``torch.fx.GraphModule`` from AOTAutograd whose nodes carry
``meta["val"]`` (fake tensors with sizes, strides and dtypes).
Gives: a ``Graph`` of input, compute and extern nodes, plus the count of ATen ops
that ran through ATen because braze has no rule for them.

Each FX value becomes a ``TensorValue``: a dtype, sizes and one expression over
the output variables ``x0, x1, ...`` that says how to compute any element.
Pointwise ops create a ``ComputeNode`` per ATen op and read it with a ``LOAD``;
view ops only rewrite the index of that load. Whether a node is stored or
recomputed inside its readers is decided later, by ``braze.fuse.inline``.

Rules live in a table keyed by ATen overload (``register``); a missing rule or a
rule that raises ``Unsupported`` makes the op an extern call into ATen, counted
as a fallback. Any other exception is a bug, reported with the op and its inputs.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, replace
from typing import Any, Callable

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from braze import config
from braze.ir import dtypes
from braze.ir import simplify as S
from braze.ir import size_floats, symbols
from braze.ir.size_floats import SizeFloat
from braze.ir.traced import concrete, offset_of, sizes_of, strides_of
from braze.ir.expr import Expr, Op, cast, load, substitute
from braze.ir.graph import (BufferArg, ComputeNode, ExternNode, Graph, InputNode, Layout,
                            OutputSpec, out_vars)

aten = torch.ops.aten
LOWERINGS: dict = {}
SIZE_FLOAT_RULES: set = set()  # ATen ops whose rules take a ``SizeFloat`` as a number
_NODE_VALUE = object()  # extern(): describe the results by the current node's value


class Unsupported(Exception):
    """A rule cannot lower this particular call; the op runs through ATen instead."""


class LoweringError(Exception):
    """braze failed on an op; carries the op and its inputs for the error message."""

    def __init__(self, op, detail: str, inputs: str):
        self.op, self.detail, self.inputs = op, detail, inputs
        super().__init__(f"braze could not compile {op} with inputs {inputs}: {detail}")


def constant_on(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A graph's tensor constant on the device its kernels read it from: a CPU index
    (``x[:, torch.tensor([1, 3])]``, kept on the CPU by Dynamo) copied to a CUDA graph's device,
    outside any fake mode the lowering runs under."""
    if tensor.device == device:
        return tensor
    with unset_fake_temporarily():
        return tensor.to(device)


def is_host_scalar(val) -> bool:
    """A 0-d CPU tensor: a CPU scalar to ATen's TensorIterator, whose value eager's CUDA
    kernels take as an argument (braze's wrapper copies it to the GPU)."""
    return isinstance(val, torch.Tensor) and val.device.type == "cpu" and val.dim() == 0


def register(*ops, overloads: bool = False, size_floats: bool = False):
    """Register a lowering rule for ATen ops (all overloads of a packet if asked).
    ``size_floats``: the rule takes a float computed from sizes (``ir/size_floats.py``) as
    it takes a number; any other rule gets it as the float of the call being compiled,
    its sizes guarded (a rule may test a number's value: ``x ** 2`` is ``x * x``)."""
    def decorate(fn: Callable) -> Callable:
        for op in ops:
            packet = isinstance(op, torch._ops.OpOverloadPacket)
            for overload in [getattr(op, n) for n in op.overloads()] if packet else [op]:
                LOWERINGS[overload] = fn
                SIZE_FLOAT_RULES.update([overload] if size_floats else [])
        return fn
    return decorate


@dataclass(frozen=True)
class TensorValue:
    """A tensor during lowering: element ``(x0, x1, ...)`` is ``expr``."""
    dtype: Any
    sizes: tuple
    expr: Expr

    @property
    def ndim(self) -> int:
        return len(self.sizes)

    @property
    def numel(self) -> int:
        return math.prod(self.sizes)

    def at(self, indices) -> Expr:
        """The element at per-dimension ``indices`` (index expressions)."""
        mapping = dict(zip(out_vars(self.sizes), indices))
        return substitute(self.expr, mapping)


def graph_device(gm: torch.fx.GraphModule) -> torch.device:
    """The graph's device: its first tensor's, a 0-d CPU tensor beside CUDA ones aside."""
    devices = [val.device for val in (node.meta.get("val") for node in gm.graph.nodes)
               if isinstance(val, torch.Tensor) and val.device.type != "meta"]
    return next((d for d in devices if d.type == "cuda"), devices[0] if devices else torch.device("cpu"))


def constant_value(value, dtype) -> TensorValue:
    from braze.ir.expr import const
    return TensorValue(dtype, (), const(value, dtype))


class Lowerer:
    def __init__(self, gm, target, keep_padding: bool = True, group_matmuls: bool = False, through_aten=frozenset()):
        self.gm = gm
        self.through_aten = through_aten  # ATen graph nodes (by name) run through ATen on purpose
        self.group_matmuls = group_matmuls  # products of one left operand as one (lower/matmul_groups.py)
        self.matmul_groups: dict | None = None  # {product node: its group}, found at the first product
        self.graph = Graph(device=graph_device(gm), target=target)
        self.env: dict = {}
        self.node: torch.fx.Node | None = None
        self.fallbacks: list[str] = []
        self._names = 0
        self.padded: set = set()  # matrix products stored with padded rows (see ``extern``)
        self.eager_buffers: dict = {}  # (fx node, strides) -> its buffer in eager's layout (``_eager_output``)
        self.keep_padding = keep_padding  # outputs may keep that padding (not the backward's)
        self.random_seed: Expr | None = None  # this call's seed, once a random op needs it
        self.random_offset = 0  # Philox words the graph's earlier random ops draw per call

    # ------------------------------------------------------------------ driving

    def run(self) -> Graph:
        placeholders = 0
        for node in self.gm.graph.nodes:
            self.node = node
            if node.op == "placeholder":
                self.env[node] = self._placeholder(node, placeholders)
                placeholders += 1
            elif node.op == "get_attr":
                self.env[node] = self._constant(node)
            elif node.op == "call_function" and node not in self.env:  # (else lowered ahead)
                first = len(self.graph.nodes)
                self.env[node] = self._call(node)
                for made in self.graph.nodes[first:]:  # the nodes computing it (a copy computes no op)
                    if isinstance(made, ComputeNode) and made.origins != ["copy"]:
                        made.sources = [node.name]
            elif node.op == "output":
                self._outputs(node)
        return self.graph

    def lower_ahead(self, node) -> Any:
        """The value of ``node``, lowering it (and what it reads) now if its turn has not
        come: a rule that needs a later node's value (``lower/matmul_groups.py``, which
        checks that those nodes are pure and read nothing not yet lowered)."""
        if node not in self.env:
            for source in node.all_input_nodes:
                self.lower_ahead(source)
            self.env[node] = self.as_node(node, lambda ctx: ctx._call(node))
        return self.env[node]

    def as_node(self, node, rule, *args) -> Any:
        """``rule(self, *args)`` run as if lowering ``node`` (rules read the current node's value)."""
        current, self.node = self.node, node
        try:
            return rule(self, *args)
        finally:
            self.node = current

    @property
    def out(self):
        """The fake value the current FX node produces (sizes, strides, dtype)."""
        return self.node.meta.get("val")

    def fresh(self, prefix: str = "buf") -> str:
        name = f"{prefix}{self._names}"
        self._names += 1
        return name

    def _placeholder(self, node, position: int):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            self.graph.inputs.append(None)
            return _concrete(val)
        name = f"arg{position}"
        layout = Layout(sizes_of(val), strides_of(val), 0)
        host_scalar = self.graph.device.type == "cuda" and is_host_scalar(val)
        self.graph.add(InputNode(name, val.dtype, sizes_of(val), [node.name], position, layout,
                                 storage_offset=offset_of(val), host_scalar=host_scalar,
                                 elsewhere=not host_scalar and val.device != self.graph.device))
        self.graph.inputs.append(name)
        return TensorValue(val.dtype, sizes_of(val), load(name, out_vars(sizes_of(val)), val.dtype))

    def _constant(self, node):
        tensor = getattr(self.gm, node.target)
        if not isinstance(tensor, torch.Tensor):
            return tensor
        name = self.fresh("const")
        tensor = constant_on(tensor, self.graph.device)
        layout = Layout(sizes_of(tensor), strides_of(tensor), 0)
        self.graph.add(InputNode(name, tensor.dtype, sizes_of(tensor), [node.target], -1, layout, tensor))
        return TensorValue(tensor.dtype, sizes_of(tensor), load(name, out_vars(sizes_of(tensor)), tensor.dtype))

    def _call(self, node):
        target = node.target
        args = torch.fx.node.map_arg(node.args, lambda n: self.env[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: self.env[n])
        if target is operator.getitem:
            return args[0][args[1]]
        if target is torch.ops.higher_order.with_effects:
            return self._with_effects(args, kwargs)
        if not isinstance(target, torch._ops.OpOverload):
            return self._python_call(node, target, args, kwargs)
        if target not in SIZE_FLOAT_RULES and size_floats.holds((args, kwargs)):
            args, kwargs = size_floats.plain(args), size_floats.plain(kwargs)
        from braze.lower import data_sizes
        if data_sizes.values_decide_size(node, target):
            return data_sizes.sized_by_values(self, node, target, args, kwargs)
        if node.name in self.through_aten:  # (``single_op_kernels`` off: a lone op's kernel)
            return self.extern(target, args, kwargs)
        rule = LOWERINGS.get(target)
        why = "braze has no rule for it" if rule is None else "its dtypes are not generated"
        if rule is not None and not _disabled(target) and _dtypes_supported(node):
            try:
                return _checked_shape(node, rule(self, *args, **kwargs))
            except Unsupported as exc:
                why = f"its rule declined these arguments ({exc})" if str(exc) else "its rule declined these arguments"
            except (LoweringError, KeyboardInterrupt):
                raise
            except Exception as exc:  # a bug in a rule: name the op and its inputs
                raise LoweringError(target, f"{type(exc).__name__}: {exc}", describe_inputs(node)) from exc
        if config.strict and config.strict_ops and not _disabled(target):
            raise LoweringError(target, f"it would run through ATen: {why} (strict_ops)", describe_inputs(node))
        return self.extern(target, args, kwargs, fallback=True)

    def _with_effects(self, args, kwargs):
        """An effectful op, ordered by the token AOTAutograd threads through it: the op
        runs through ATen where it stands; the token passes through unchanged."""
        token, op, *rest = args
        val = self.out
        op_meta = val[1] if len(val) == 2 else tuple(val[1:])
        result = self.extern(op, tuple(rest), kwargs, fallback=True, meta=op_meta)
        return (token, *result) if len(val) > 2 else (token, result)

    def _python_call(self, node, target, args, kwargs):
        """Python arithmetic on sizes (``operator.mul``, ``sym_size``...): the traced
        value (a ``Size`` where it is symbolic), else evaluated."""
        if any(isinstance(a, TensorValue) for a in args):
            raise LoweringError(target, "python call on a tensor", describe_inputs(node))
        traced = node.meta.get("val")
        if isinstance(traced, torch.SymFloat) and symbols.active():  # a float the kernels compute from sizes
            return target(*[SizeFloat.of(a) if symbols.is_symbolic(a) else a for a in args], **kwargs)
        if isinstance(traced, torch.SymBool) and symbols.active():
            from braze.lower import data_sizes
            holds = data_sizes.condition(node, target, args)
            if holds is not None:
                return holds
        if isinstance(traced, (torch.SymBool, torch.SymFloat)) and not any(map(symbols.is_symbolic, args)):
            return target(*args, **kwargs)  # (a compile per shape: ``sym_float(1031)``, traced by torch 2.11)
        if isinstance(traced, (torch.SymBool, torch.SymFloat)):
            raise LoweringError(target, f"a symbolic {type(traced).__name__} ({traced}): braze's sizes are "
                                "integers", describe_inputs(node))
        if isinstance(traced, torch.SymInt) and symbols.active():  # (per shape: the traced value is stale)
            return concrete(traced)
        return target(*args, **kwargs)

    def _outputs(self, node):
        results = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
        eager = node.meta.get("braze_layouts") or []  # strides the user sees, where braze chose others
        given = {}  # fx node -> (spec, padded): a node returned twice is one tensor, as in eager
        for k, fx_value in enumerate(results):
            value = self.env.get(fx_value) if isinstance(fx_value, torch.fx.Node) else fx_value
            wanted = eager[k] if k < len(eager) else None
            key = (fx_value, id(wanted)) if isinstance(fx_value, torch.fx.Node) else None  # no tensor ==
            if key in given:
                spec, padded = given[key]
            else:
                spec = self._padded_output(value) if wanted is None else None
                padded = spec is not None
                spec = spec or self._output_spec(fx_value, value, wanted)
                if key is not None:
                    given[key] = spec, padded
            meta = fx_value.meta.get("val") if isinstance(fx_value, torch.fx.Node) else None
            if isinstance(meta, torch.Tensor) and meta.device != self.graph.device:
                spec = replace(spec, device=meta.device)
            if padded:
                self.graph.padded_outputs.append(k)
            self.graph.outputs.append(spec)

    def _padded_output(self, value) -> OutputSpec | None:
        """An output read straight from a matrix product stored with padded rows keeps
        the padding, as Inductor's outputs do: copying GPT-2's logits to eager's strides
        would cost more than the product."""
        if not (self.keep_padding and isinstance(value, TensorValue) and value.expr.op is Op.LOAD
                and value.expr.arg in self.padded):
            return None
        view = self.strided_view(value)
        if view is None:
            return None
        return OutputSpec("view", view.buffer, tuple(view.sizes), tuple(view.strides), view.offset)

    def _output_spec(self, fx_value, value, wanted=None) -> OutputSpec:
        if not isinstance(value, TensorValue):
            return OutputSpec("value", value=size_floats.plain(value))
        if wanted is not None and dtypes.is_supported(value.dtype):
            spec = self._eager_output(fx_value, value, wanted)
            if spec is not None:
                return spec
        meta = fx_value.meta.get("val") if wanted is None else wanted
        base = _view_base(fx_value) if wanted is None else None
        if base is not None and not _same_interpretation(base.meta["val"], meta):
            base = None  # a view that reinterprets the data (view_as_real, view.dtype, conj)
        if base is not None and isinstance(self.env.get(base), TensorValue):
            buffer = self.storage_of(self.env[base], _meta_layout(base.meta["val"]), reason="viewed by an output",
                                     exact=True)  # eager's view strides hold for eager's layout only (not padded rows)
            if buffer is not None:
                return OutputSpec("view", buffer, sizes_of(meta), strides_of(meta),
                                  offset_of(meta))
        layout = _meta_layout(meta)
        buffer = self.storage_of(value, layout, reason="graph output", exact=True)
        used = {o.buffer for o in self.graph.outputs}
        duplicate = buffer is not None and buffer in used and not isinstance(self.graph.producer(buffer), InputNode)
        if buffer is None or duplicate and dtypes.is_supported(value.dtype):
            buffer = self.materialize(value, layout, reason="graph output")
        return OutputSpec("buffer", buffer)  # an unsupported dtype (complex) is returned twice as is

    def _eager_output(self, fx_value, value, wanted) -> OutputSpec | None:
        """An output to which eager gives strides other than the traced ones (an
        intermediate changed in place: ``lower/layouts.py``): its value stored in eager's
        layout, or where eager's output is a view (a row of such an intermediate), its
        base stored in eager's layout and the output a view of it. Outputs of one base
        share one buffer, as they share storage in eager. None where the graph's output is
        no view of a value of the base's shape (the output is then a copy)."""
        if wanted._base is None:
            node, root = fx_value, wanted
        else:
            node, root = _view_base(fx_value), wanted._base
        tv = self.env.get(node) if isinstance(node, torch.fx.Node) else None
        layout = _meta_layout(root)
        if root._base is not None or not isinstance(tv, TensorValue) or sizes_of(root) != tv.sizes \
                or tv.dtype != root.dtype or not layout.is_dense():
            return None
        key = (node, layout.strides)
        buffer = self.eager_buffers.get(key)
        if buffer is None:
            buffer = self.storage_of(tv, layout, reason="graph output", exact=True)
            taken = {o.buffer for o in self.graph.outputs} | set(self.eager_buffers.values())
            if buffer is None or buffer in taken:
                buffer = self.materialize(tv, layout, reason="graph output")
            self.eager_buffers[key] = buffer
        if wanted._base is None:
            return OutputSpec("buffer", buffer)
        return OutputSpec("view", buffer, sizes_of(wanted), strides_of(wanted),
                          offset_of(wanted) - layout.offset)

    # ------------------------------------------------------------------ building blocks

    def compute(self, dtype, sizes, body: Expr, reduction=None, origin=None) -> TensorValue:
        """A new compute node; returns a value that loads it."""
        name = self.fresh()
        sizes = tuple(sizes)
        origins = [origin or str(self.node.target)] if self.node is not None else []
        self.graph.add(ComputeNode(name, dtype, sizes, origins, body=body, reduction=reduction,
                                   preferred=self._preferred_layout(sizes)))
        return TensorValue(dtype, sizes, load(name, out_vars(sizes), dtype))

    def _preferred_layout(self, sizes) -> Layout | None:
        val = self.out
        if isinstance(val, torch.Tensor) and sizes_of(val) == tuple(sizes):
            layout = _meta_layout(val)
            if layout.is_dense():
                return Layout(layout.sizes, layout.strides, 0)
        return None

    def pin(self, name: str, reason: str, layout: Layout | None = None) -> Layout:
        """Force a compute node to be stored, fixing its layout now. ``layout`` gives
        strides only: a buffer braze allocates starts at its storage's start (offset 0).
        Eager's storage offset (an output that is ``select(view_as_real(t), -1, 1)``
        sits at offset 1 of ``t``) says where a view lay in its base; a fresh buffer
        given it would have its element stored past its end (the wrapper allocates
        ``sizes``/``strides`` and returns the buffer itself)."""
        node = self.graph.producer(name)
        if isinstance(node, ComputeNode):
            if node.layout is None:
                node.layout = Layout(layout.sizes, layout.strides, 0) if layout is not None and layout.is_dense() \
                    else (node.preferred or Layout.contiguous(node.sizes))
            node.pinned = node.pinned or reason
            return node.layout
        return self.graph.layout_of(name)

    def storage_of(self, tv: TensorValue, want: Layout | None = None, reason: str = "",
                   exact: bool = False) -> str | None:
        """The buffer ``tv`` is an identity read of (pinning it), else None.
        With ``exact``, the buffer must also have layout ``want``."""
        e = tv.expr
        if e.op is not Op.LOAD or e.args != out_vars(tv.sizes):
            return None
        node = self.graph.producer(e.arg)
        if isinstance(node, ComputeNode) and node.mutates:
            return None
        layout = self.pin(e.arg, reason, want)
        if exact and want is not None and (layout.strides != want.strides and tv.numel > 1):
            return None
        return e.arg

    def materialize(self, tv: TensorValue, layout: Layout | None = None, reason: str = "") -> str:
        """Store ``tv`` into a new buffer (a copy node) and return its name."""
        return self.stored(tv, layout, reason).expr.arg

    def stored(self, tv: TensorValue, layout: Layout | None = None, reason: str = "") -> TensorValue:
        """Store ``tv`` into a new buffer (a copy node); the value that loads it."""
        value = self.compute(tv.dtype, tv.sizes, tv.expr, origin="copy")
        self.pin(value.expr.arg, reason, layout)
        return value

    def tensor_arg(self, tv: TensorValue) -> BufferArg:
        """``tv`` as an ATen argument: a strided view of a buffer, copying if needed."""
        view = self.strided_view(tv)
        if view is None:
            name = self.materialize(tv, reason="read by an ATen call")
            layout = self.graph.layout_of(name)
            return BufferArg(name, tv.sizes, layout.strides, 0, tv.dtype)
        return view

    def strided_view(self, tv: TensorValue) -> BufferArg | None:
        e = tv.expr
        if e.op is not Op.LOAD:
            return None
        node = self.graph.producer(e.arg)
        if isinstance(node, ComputeNode) and node.mutates:
            return None
        layout = self.pin(e.arg, "read by an ATen call")
        position = layout.position(e.args)
        strides = []
        for v, size in zip(out_vars(tv.sizes), tv.sizes):
            k = S.coefficient(position, v) if size != 1 else 0
            if k is None:
                return None
            strides.append(k)
        terms, const = S.linear(position)
        if any(atom.op is not Op.VAR for atom in terms) or const < 0:
            return None
        return BufferArg(e.arg, tv.sizes, tuple(strides), const, tv.dtype)

    def extern(self, target, args, kwargs, fallback: bool = False, meta=_NODE_VALUE,
               layout: Layout | None = None) -> Any:
        """Run ``target`` through ATen at run time; its results (described by ``meta``,
        by default the current node's value) become buffers. ``layout``: the one result's
        layout where it is not eager's (padded matrix product rows)."""
        if fallback:
            self.fallbacks.append(str(target))
        call_args = _map_values(size_floats.plain(args), self.tensor_arg)
        call_kwargs = {k: _map_values(size_floats.plain(v), self.tensor_arg) for k, v in kwargs.items()}
        val = self.out if meta is _NODE_VALUE else meta
        single = isinstance(val, torch.Tensor)
        metas = [val] if single else list(val) if isinstance(val, (list, tuple)) else [val]
        outputs, values = [], []
        for meta in metas:
            if isinstance(meta, torch.Tensor):
                name = self.fresh()
                eager = _meta_layout(meta)
                outputs.append((name, meta.dtype, layout or Layout(eager.sizes, eager.strides, 0)))
                if layout is not None:
                    self.padded.add(name)
                values.append(TensorValue(meta.dtype, sizes_of(meta), load(name, out_vars(sizes_of(meta)), meta.dtype)))
            else:
                outputs.append(None)
                values.append(_concrete(meta))
        name = outputs[0][0] if outputs and outputs[0] else self.fresh("extern")
        node = ExternNode(name, val.dtype if single else None, sizes_of(val) if single else (),
                          [str(target)], target=target, args=call_args, kwargs=call_kwargs,
                          outputs=outputs, is_fallback=fallback, single=single)
        self.graph.add(node)
        if not isinstance(val, (list, tuple)):
            return values[0]
        return tuple(values) if isinstance(val, tuple) else list(values)


# ----------------------------------------------------------------------------- helpers


def _checked_shape(node, result):
    """``result``, if its sizes are the traced value's: a rule that gets a shape wrong (a
    reduction over a dim of one element keeping it) is a bug that must not reach the user
    as a result of another shape."""
    val = node.meta.get("val")
    if isinstance(result, TensorValue) and isinstance(val, torch.Tensor) \
            and all(isinstance(n, int) for n in val.shape) and tuple(result.sizes) != sizes_of(val):
        raise LoweringError(node.target, f"the rule gave sizes {list(result.sizes)}, the traced value has "
                            f"{list(val.shape)}", describe_inputs(node))
    return result


def _map_values(value, fn):
    if isinstance(value, TensorValue):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_values(v, fn) for v in value)
    return value


def _disabled(target) -> bool:
    if not config.fallback_ops:
        return False
    name = str(target)  # e.g. aten.exp.default
    return name in config.fallback_ops or name.rsplit(".", 1)[0] in config.fallback_ops


def _dtypes_supported(node) -> bool:
    """Rules only see dtypes braze can generate code for (no complex, no fp8)."""
    def ok(v):
        return not isinstance(v, torch.Tensor) or dtypes.is_supported(v.dtype)
    vals = [node.meta.get("val")]
    for arg in node.all_input_nodes:
        vals.append(arg.meta.get("val"))
    flat = []
    for v in vals:
        flat.extend(v if isinstance(v, (list, tuple)) else [v])
    return all(ok(v) for v in flat)


def _concrete(value):
    """A traced scalar: a ``Size`` in a symbolic compile; per shape, a size still symbolic
    in the trace is not the call's (the graph's propagated values are), so no rule."""
    if isinstance(value, torch.SymInt) and not symbols.active():
        raise Unsupported("symbolic size")
    return concrete(value)


def _meta_layout(val: torch.Tensor) -> Layout:
    return Layout(sizes_of(val), strides_of(val), offset_of(val))


def _view_base(fx_value):
    """The first non-view ancestor of an output that is a view, else None. Looks
    through ``getitem`` of multi-output views (``split``, ``unbind``)."""
    node, seen_view = fx_value, False
    while isinstance(node, torch.fx.Node) and node.op == "call_function":
        if node.target is operator.getitem and _is_view_op(node.args[0]):
            node = node.args[0]
        elif _is_view_op(node):
            seen_view = True
            node = node.args[0]
        else:
            break
    return node if seen_view and isinstance(node, torch.fx.Node) else None


def _is_view_op(node) -> bool:
    return (isinstance(node, torch.fx.Node) and node.op == "call_function"
            and isinstance(node.target, torch._ops.OpOverload) and node.target.is_view)


def _same_interpretation(base, view) -> bool:
    """Does ``view`` read its base's bytes as the base does (dtype, conj and neg bits)?"""
    return (base.dtype == view.dtype and base.is_conj() == view.is_conj()
            and base.is_neg() == view.is_neg())


def describe_inputs(node) -> str:
    parts = []
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor):
            parts.append(f"{dtypes.short(val.dtype) if dtypes.is_supported(val.dtype) else val.dtype}"
                         f"{list(val.shape)}")
        else:
            parts.append(repr(val))
    return "(" + ", ".join(parts) + ")"


def as_index_value(tv_expr: Expr) -> Expr:
    """A value expression used as an index (indirect loads)."""
    return cast(tv_expr, dtypes.INDEX)
