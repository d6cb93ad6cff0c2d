"""Graphs with symbolic sizes, compiled once per size class.

Takes: an FX graph whose inputs have symbolic sizes (Dynamo's ``SymInt``s), its kind,
the options in force, and braze's compile function. Gives: ``Symbolic``, a boxed
callable. At a call it reads the value of each size symbol from the arguments (a size
or stride of an input tensor, or an integer argument) and runs the first compiled
variant whose guards hold for them. On a miss it compiles a new variant: the same graph
with the call's values as hints (``ir/symbols.py``); every decision the compiler made on
a size that the ranges do not prove becomes one of the variant's guards. Kernels and
wrapper take the sizes as arguments, so one variant serves every size of its class; a
quotient in the traced sizes (``(s0 + 1) // 2``) is an argument of its own (``_derive``).
A size an op of the graph decides from values (Dynamo's unbacked ``u0``) is a symbol no
argument gives: the wrapper reads it from that op's result, its range is the ShapeEnv's, and
no decision on it is guarded (``ir/unbacked.py``), so it never splits classes.

A graph braze cannot compile symbolically (a size it cannot represent, a symbol neither
an argument nor an op's result gives) is handed to ``Specializing`` (one compile per concrete shape) and the reason kept in
``fallback_reason``. More than ``config.max_size_variants`` variants fall back the same
way: the graph's decisions depend on the sizes too finely for variants to pay off.
With ``config.guards`` off (read at construction; unsafe, a test aid) the first variant
compiled runs for every call, its guards unchecked.
"""
from __future__ import annotations

import dataclasses
import functools
import traceback

import torch

from braze import config
from braze.ir import symbols, traced
from braze.runtime import variant_cache
from braze.runtime.wrapper import strides_match


@dataclasses.dataclass
class SizeClass:
    """What one variant was compiled for: the symbols (each with where the wrapper reads it),
    the guards (each with the ``file:line`` that decided it), the sizes used as plain
    integers (``(size, value, file:line)``), and any guard the compile added to Dynamo's
    ``ShapeEnv`` by deciding on a traced ``SymInt`` itself (Dynamo enforces those, but each
    one narrows the graph: a compile should add none)."""
    symbols: dict
    guards: dict
    specialized: list
    dynamo_guards: list = dataclasses.field(default_factory=list)  # added to Dynamo's ShapeEnv by the compile
    unbacked: dict = dataclasses.field(default_factory=dict)  # symbol -> what it stands for, read once run

    def lines(self) -> list:
        out = [f"  symbols: {', '.join(f'{s} = {t}' for s, t in self.symbols.items())}"] if self.symbols else []
        out += [f"  unbacked: {s} = {meaning}" for s, meaning in self.unbacked.items()]
        out += [f"  guard: {g}  ({where})" for g, where in self.guards.items()]
        out += [f"  specialized: {s} = {v}  ({where})" for s, v, where in self.specialized]
        out += [f"  Dynamo guard: {g}" for g in self.dynamo_guards]
        return out


@dataclasses.dataclass
class Variant:
    check: object  # (args, values) -> bool
    call: object  # the boxed compiled graph


class Symbolic:
    def __init__(self, gm: torch.fx.GraphModule, kind: str, options: dict, compile_fn, specializing,
                 load_fn=None):
        self.gm, self.kind, self.options, self.compile_fn = gm, kind, options, compile_fn
        self.specializing = specializing  # (reason) -> the per-shape fallback
        self.load_fn = load_fn  # (graph-cache entry, gm, kind) -> the boxed compiled graph
        self.variants: list[Variant] = []
        self.stored = None  # the variants on disk not loaded yet (``runtime/variant_cache.py``)
        self.fallback = None
        self.fallback_reason = ""
        self.fallback_trace = ""  # the traceback of the failure behind ``fallback_reason``
        self.shape_env = None
        self.guards = config.guards
        self._boxed_call = True
        self.unbacked: dict = {}  # symbol -> (what it stands for, its range): bound by the wrapper
        self.per_shape = None  # the compile per shape for arguments with other strides
        try:
            self.bindings, self.ranges, self.tensors, self.shape_env = _bindings(gm, every_stride=kind == "backward")
            self.unbacked = _unbacked(gm, self.bindings)
            self._values = _binder(self.bindings)
        except (TypeError, ValueError) as exc:
            self._give_up(f"{type(exc).__name__}: {exc}")
        with config.patch(**options):
            self.cache_key = variant_cache.index_key(gm, kind) if load_fn is not None else ""

    def __call__(self, args):
        if self.fallback is not None:
            return self.fallback(args)
        if not self.guards and self.variants:
            return self.variants[0].call(args)
        values = self._values(args)
        for variant in self.variants:
            if variant.check(args, values):
                return variant.call(args)
        if self.per_shape is not None:  # strides no variant takes came before: no compile per miss
            return self.per_shape(args)
        variant = self._compile(args, values)
        if variant is None:
            return self.fallback(args)
        self.variants.append(variant)
        if not variant.check(args, values):  # compiled for the traced strides, which these args lack
            return self._other_strides(args)
        return variant.call(args)

    def _compile(self, args, values: dict) -> Variant | None:
        if len(self.variants) >= config.max_size_variants:
            self._give_up(f"more than {config.max_size_variants} size classes")
            return None
        loaded = self._from_disk(args, values)
        if loaded is not None:
            return loaded
        context = self._context(values)
        ranges = context.ranges
        before = len(self.shape_env.guards) if self.shape_env is not None else 0
        try:
            with symbols.deciding(context), config.patch(**self.options, graph_cache=False):
                _derive(self.gm, context)
                strides = _strides(self.tensors)
                call = self.compile_fn(traced.copy_graph(self.gm), self.kind)  # (passes annotate the graph)
        except Exception as exc:  # any failure: compile per shape instead
            self.fallback_trace = traceback.format_exc()
            self._give_up(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            return None
        check = _checker(list(self.bindings), list(context.guards), strides, self.ranges)
        compiled = getattr(call, "compiled", None)
        if compiled is not None:
            dynamo_guards = [str(g.expr) for g in self.shape_env.guards[before:]] if self.shape_env is not None else []
            compiled.sizes = SizeClass(dict(context.bindings), dict(context.guards),
                                       [(symbols.text_of(s, "plain"), v, w) for s, v, w in context.specialized],
                                       dynamo_guards, {name: _described(meaning, name in self.bindings, *ranges[name])
                                                       for name, (meaning, _) in self.unbacked.items()})
            if self.cache_key and compiled.entry is not None and not dynamo_guards:
                variant_cache.add(self.cache_key, list(context.guards), strides, compiled.sizes, compiled.entry)
            compiled.entry = None
        return Variant(check, call)

    def _context(self, values) -> symbols.Context:
        """The facts a compile for these values of the symbols decides with."""
        hints = dict(zip(self.bindings, values))
        ranges = dict(self.ranges)
        for name, (_, (lo, hi)) in self.unbacked.items():  # (never a guard: a stand-in for heuristics only)
            hints.setdefault(name, max(lo, min(hi, _UNBACKED_HINT)))
            ranges[name] = (lo, hi)
        names = list(self.bindings) + [name for name in self.unbacked if name not in self.bindings]
        context = symbols.Context(hints, ranges, names=names)
        context.bindings = {name: _binding_text(b) for name, b in self.bindings.items()}
        context.unbacked = {name: meaning for name, (meaning, _) in self.unbacked.items()}
        return context

    def _from_disk(self, args, values: dict) -> Variant | None:
        """A variant an earlier process compiled, whose guards hold for this call; or None."""
        if not self.cache_key:
            return None
        if self.stored is None:
            self.stored = variant_cache.stored(self.cache_key)
        for stored in self.stored:
            check = _checker(list(self.bindings), stored.guards, stored.strides, self.ranges)
            entry = variant_cache.entry_of(stored) if check(args, values) else None
            if entry is None:
                continue
            try:
                with config.patch(**self.options):
                    call = self.load_fn(entry, self.gm, self.kind)
            except Exception:  # (a kernel library gone from the cache, say): compile instead
                continue
            self.stored.remove(stored)
            compiled = getattr(call, "compiled", None)
            if compiled is not None:
                compiled.sizes = stored.size_class
                compiled.rebuild = functools.partial(_deciding, compiled.rebuild, self.gm, self._context(values))
            return Variant(check, call)
        return None

    def _other_strides(self, args):
        """A backward called with strides other than AOTAutograd traced for what its forward
        saved (a forward compiled per shape that stored a product with padded rows, say):
        the variants, compiled for the traced strides, would read it wrongly; compiled per
        shape instead, for the strides given (``runtime/specialize.py``)."""
        if self.per_shape is None:
            self.per_shape = self.specializing("a saved tensor's strides differ from the traced ones")
        return self.per_shape(args)

    def _give_up(self, reason: str) -> None:
        self.fallback_reason = reason
        self.fallback = self.specializing(reason)


def _deciding(rebuild, gm: torch.fx.GraphModule, context: symbols.Context):
    """The IR of a variant loaded from disk, lowered again with the sizes it was loaded for."""
    with symbols.deciding(context):
        _derive(gm, context)
        return rebuild()


_DIVISIONS = frozenset({"FloorDiv", "CleanDiv", "Mod", "PythonMod", "CeilToInt", "FloorToInt"})


def _derive(gm: torch.fx.GraphModule, context: symbols.Context) -> None:
    """Give each quotient and remainder in the traced sizes (``(s0 + 1) // 2``, a ``chunk``'s
    half) a parameter of its own, ``q0``, ``q1``...: the wrapper computes it once per call
    from the symbols, and kernels take it as they take a symbol. So a Triton kernel knows
    that the half of a row of 32k elements is a multiple of 16 (``:16``, checked by its
    launcher) and vectorizes the loads it offsets, where ``(s0 + 1) // 2`` computed in the
    kernel told it nothing. Sizes known only once an op has run are left out. Guards keep
    naming only symbols (``symbols.Atom.text``)."""
    import sympy
    given = set(context.bindings)
    for node in gm.graph.nodes:
        for expr in _traced_exprs(node.meta.get("val")):
            for sub in sympy.preorder_traversal(expr):
                if type(sub).__name__ in _DIVISIONS and {str(x) for x in sub.free_symbols} <= given:
                    try:
                        size = traced.from_sympy(sub)
                    except TypeError:
                        continue
                    for atom in symbols.divisions_in(size):
                        _name_division(atom, context)


def _name_division(atom, context: symbols.Context) -> None:
    """Name ``atom`` (once): a size argument, its value computed by the wrapper."""
    if atom.key in context.derived:
        return
    name = f"q{len(context.derived)}"
    context.bindings[name] = atom.definition("python")  # (inner divisions already named)
    context.derived[atom.key] = name
    context.names.append(name)
    context.hints[name] = atom.value(context.hints)


def _traced_exprs(val):
    """The sympy expressions of the sizes in a traced value (a tensor's sizes, strides and
    offset; an integer; a list of them)."""
    if isinstance(val, (list, tuple)):
        for v in val:
            yield from _traced_exprs(v)
    elif isinstance(val, torch.SymInt):
        yield val.node.expr
    elif isinstance(val, torch.Tensor):
        for n in (*val.shape, *val.stride(), val.storage_offset()):
            if isinstance(n, torch.SymInt):
                yield n.node.expr


def _bindings(gm: torch.fx.GraphModule, every_stride: bool) -> tuple:
    """``({symbol: (position, "size"|"stride"|"value", dim)}, {symbol: (lo, hi)},
    [(position, traced value)])``: where each size symbol is read from the arguments, the
    ranges the ShapeEnv knows, and the tensor arguments whose strides the variants check:
    those with symbolic strides, or with ``every_stride`` all (a backward's saved tensors
    are not Dynamo's inputs: no guard of Dynamo checks their strides)."""
    bindings, from_strides, ranges, tensors, shape_env = {}, {}, {}, [], None
    for position, node in enumerate(gm.graph.find_nodes(op="placeholder")):
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt):
            shape_env = val.node.shape_env
            if val.node.expr.is_Symbol:
                bindings.setdefault(str(val.node.expr), (position, "value", 0))
        if not isinstance(val, torch.Tensor):
            continue
        for kind, values, found in (("size", val.shape, bindings), ("stride", val.stride(), from_strides)):
            for dim, n in enumerate(values):
                if isinstance(n, torch.SymInt):
                    shape_env = n.node.shape_env
                    if n.node.expr.is_Symbol:
                        found.setdefault(str(n.node.expr), (position, kind, dim))
        if every_stride or any(isinstance(s, torch.SymInt) for s in val.stride()):
            tensors.append((position, val))
    for name, binding in from_strides.items():  # (a size gives it where one does: a stride may be padded)
        bindings.setdefault(name, binding)
    if shape_env is not None:
        for sym, vr in shape_env.var_to_range.items():
            if str(sym) in bindings:
                lo = int(vr.lower) if vr.lower.is_Integer else 0
                ranges[str(sym)] = (max(lo, 0), int(vr.upper) if vr.upper.is_Integer else symbols.INF)
    strided = [val for _, val in tensors if any(isinstance(s, torch.SymInt) for s in val.stride())]
    used = {str(sym) for val in strided for s in (*val.shape, *val.stride()) if isinstance(s, torch.SymInt)
            for sym in s.node.expr.free_symbols}
    missing = used - set(bindings)
    if missing:
        raise ValueError(f"size symbols no argument gives: {sorted(missing)}")
    return bindings, ranges, tensors, shape_env


_UNBACKED_HINT = 4096  # what heuristics that read a value (never a guard) assume of an unbacked size


def _described(meaning: str, given: bool, lo, hi) -> str:
    known = "" if given else ", read from that result once it has run"
    return f"{meaning}, in [{lo}, {'inf' if hi == symbols.INF else hi}]{known}"


def _unbacked(gm: torch.fx.GraphModule, bindings: dict) -> dict:
    """``{symbol: (what it stands for, (lo, hi))}`` for each size that an op decides from
    its input's values (Dynamo's unbacked ``u0``: ``nonzero``, ``x[mask]``): where no argument
    gives it, the wrapper reads it from that op's result once the op has run; where one does
    (a backward's), it is bound as any symbol, but no decision on it is guarded either."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    found: dict = {}
    for node in gm.graph.find_nodes(op="placeholder"):  # (a backward's: from the forward)
        for sym in free_unbacked_symbols(node.meta.get("val")) if node.meta.get("val") is not None else ():
            if str(sym) in bindings:
                found.setdefault(str(sym), f"a size the forward's ops decided from values, given as "
                                           f"{_binding_text(bindings[str(sym)])}")
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        for k, value in enumerate(val if isinstance(val, (list, tuple)) else [val]):
            for name, meaning in _introduced(node, k, value).items():
                if name not in bindings:
                    found.setdefault(name, meaning)
            for sym in free_unbacked_symbols(value) if value is not None else ():
                if str(sym) not in bindings and str(sym) not in found:
                    raise ValueError(f"the unbacked size {sym} first appears inside {node.name} "
                                     f"({node.target}), not as a size of a result braze can read it from")
    shape_env = _shape_env_of(gm) if found else None
    known = {str(s): vr for s, vr in shape_env.var_to_range.items()} if shape_env is not None else {}
    out = {}
    for name, meaning in found.items():
        vr = known.get(name)
        lo = int(vr.lower) if vr is not None and vr.lower.is_Integer else -symbols.INF  # (an item()'s may be < 0)
        hi = int(vr.upper) if vr is not None and vr.upper.is_Integer and vr.upper < 2**62 else symbols.INF
        out[name] = (meaning, (lo, hi))
    return out


def describe_unbacked(gm: torch.fx.GraphModule) -> str:
    """Each size of the graph an op decides from values, with the op (for error messages)."""
    try:
        found = _unbacked(gm, {})
    except ValueError as exc:
        return str(exc)
    return "; ".join(f"{name}: {meaning}" for name, (meaning, _) in found.items())


def _introduced(node, k: int, value) -> dict:
    """The unbacked symbols that are plain sizes of ``value`` (the ``k``-th result of
    ``node``), with what each stands for."""
    if node.op != "call_function":
        return {}
    if isinstance(value, torch.SymInt) and node.target is torch.ops.aten._local_scalar_dense.default \
            and value.node.expr.is_Symbol:
        return {str(value.node.expr): f"the value of {node.name} (item() of {node.args[0]})"}
    if not isinstance(value, torch.Tensor):
        return {}
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    out = {}
    for dim, n in enumerate(value.shape):
        if isinstance(n, torch.SymInt) and n.node.expr.is_Symbol and free_unbacked_symbols(n):
            result = f"result {k} of " if isinstance(node.meta.get("val"), (list, tuple)) else ""
            out[str(n.node.expr)] = f"the size of dim {dim} of {result}{node.name} ({node.target})"
    return out


def _shape_env_of(gm: torch.fx.GraphModule):
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        for value in val if isinstance(val, (list, tuple)) else [val]:
            if isinstance(value, torch.SymInt) and free_unbacked_symbols(value):
                return value.node.shape_env
            if isinstance(value, torch.Tensor) and free_unbacked_symbols(value):
                return next(n for n in value.shape if isinstance(n, torch.SymInt)).node.shape_env  # (one per graph)
    return None


def _strides(tensors: list) -> list:
    """``(position, stride texts, loose)`` of each tensor argument the variants check (in a
    compile's context: a stride ``Max(1, s0)`` is decided there); ``loose`` where a dimension
    may have one element or none, whose strides then need not match."""
    return [(position, [symbols.text_of(traced.concrete(s), "plain") for s in val.stride()],
             any(symbols.possible(traced.concrete(n), "<=", 1) for n in val.shape))
            for position, val in tensors]


def _binding_text(binding: tuple) -> str:
    position, kind, dim = binding
    if kind == "value":
        return f"args[{position}]"
    return f"args[{position}].{'shape' if kind == 'size' else 'stride()'}[{dim}]"


def _binder(bindings: dict):
    """``args -> [value of each symbol]``, compiled once."""
    body = ", ".join(_binding_text(b) for b in bindings.values())
    return eval(f"lambda args: [{body}]")


def _checker(names: list, guards: list, strides: list, ranges: dict):
    """``(args, values) -> bool``: the guards, the symbols' ranges and the tensor
    arguments' strides hold."""
    tests = list(guards)
    for name, (lo, hi) in ranges.items():
        tests.append(f"{name} >= {lo}" + (f" and {name} <= {hi}" if hi != symbols.INF else ""))
    for position, texts, loose in strides:  # (a plain comparison where no dimension may be 0 or 1)
        a, want = f"args[{position}]", f"({''.join(f'{t}, ' for t in texts)})"
        tests.append(f"{a}.numel() == 0 or strides_match({a}.shape, {a}.stride(), {want})" if loose
                     else f"{a}.stride() == {want}")
    unpack = f"{', '.join(names)}, = values\n    " if names else ""
    source = f"def check(args, values):\n    {unpack}return {' and '.join(f'({t})' for t in tests) or 'True'}\n"
    namespace: dict = {"strides_match": strides_match}
    exec(compile(source, "<braze size guards>", "exec"), namespace)
    return namespace["check"]
