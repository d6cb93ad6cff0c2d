"""The braze pipeline for one ATen graph.

Takes: an FX ``GraphModule`` from AOTAutograd (static shapes) and its kind
(forward, backward, inference). Gives: ``CompiledGraph``: a callable taking the
boxed argument list, plus everything a report needs: the IR, inlining
decisions, fusion log, kernels with the ATen ops fused into each, extern and
fallback calls, generated sources and per-phase timings.

Passes: lower -> inline -> schedule -> plan kernels -> backend code -> wrapper.
A graph found in the graph cache (``runtime/graph_cache.py``) skips them all:
its kernels are loaded from the backend's recipe and its wrapper executed; its
IR is rebuilt only when ``CompiledGraph.graph`` is read.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import time
from dataclasses import dataclass

import torch

from braze import config, progress
from braze.codegen import target_for
from braze.fuse.inline import inline
from braze.fuse.kernel import foreach_plan, plan_kernel
from braze.fuse.schedule import schedule
from braze.ir import symbols
from braze.ir.expr import clear_intern_table
from braze.ir.graph import ERROR_RECORD, ExternNode, Graph, InputNode, in_place_text
from braze.lower import graph_device, lower
from braze.lower.core import constant_on
from braze.lower.in_place import scatter_in_place
from braze.lower.layouts import choose_layouts
from braze.runtime import graph_cache
from braze.runtime.checks import Checks
from braze.runtime.guard import mutated_inputs
from braze.runtime.wrapper import Step, environment, generate

log = logging.getLogger(__name__)


class Scope:
    """The graphs of one compiled function (a graph Dynamo hands the backend: its forward,
    backward and any later variant): names count from ``graph0`` in each, and Dynamo's
    compile id (``"0/1"``: frame 0, its second compile; "" outside Dynamo) tells functions apart."""

    def __init__(self, compile_id: str = ""):
        self.compile_id = compile_id
        self._ids = itertools.count()

    def name(self) -> str:
        return f"graph{next(self._ids)}"


_UNSCOPED = Scope()  # graphs compiled outside the backend (tests of the passes)


@dataclass
class KernelInfo:
    name: str
    ops: list  # ATen ops fused into the kernel
    backend: str
    shape: str  # pointwise, row, column, split, ...
    reads: list
    writes: list
    graph: str = ""
    mutates: tuple = ()  # the buffers it writes in place, a graph input as "arg0 (input 0)"
    nodes: list = dataclasses.field(default_factory=list)  # the IR nodes it computes (stored or not)
    launch: str = ""  # launch parameters (Triton: blocks, warps, grid; C++: threads)
    bytes_read: int | None = None  # bytes of the buffers it loads (None: symbolic sizes)
    bytes_written: int | None = None  # bytes of the buffers it stores

    def __str__(self) -> str:
        written = f"; writes {', '.join(self.mutates)} in place" if self.mutates else ""
        return f"{self.name} [{self.backend} {self.shape}] {', '.join(self.ops)}{written}"


@dataclass
class CompiledGraph:
    name: str
    kind: str
    ir: Graph | None  # None for a graph loaded from the graph cache, until ``.graph`` rebuilds it
    decisions: list
    fusion_log: list
    kernels: list
    externs: list  # ATen ops called on purpose (matmul, conv, ...)
    fallbacks: list  # ATen ops braze has no lowering for
    source: str
    wrapper: str
    timings: dict
    device: torch.device
    node_count: int  # IR nodes after inlining
    mutated_inputs: tuple  # positions of the inputs the graph writes into (an update, a scatter)
    host_traffic: str = ""  # why the graph moves data to or from the CPU per call ("" when it does not)
    fx: torch.fx.GraphModule | None = None  # the ATen graph compiled
    run: object = None
    cache_hit: bool = False  # everything came from the caches (graph cache, or every kernel built)
    from_graph_cache: bool = False
    restrided: bool = False  # an output saved for the backward has strides eager would not give it
    cache_key: str = ""  # its key in the graph cache ("" when not cached)
    rebuild: object = None  # () -> the IR, for a graph loaded from the graph cache
    checks: list = dataclasses.field(default_factory=list)  # CheckSite per run-time check
    sizes: object = None  # a variant of a graph with symbolic sizes: ``runtime.symbolic.SizeClass``
    contents: dict = dataclasses.field(default_factory=dict)  # stored buffer -> the ATen ops it holds
    through_aten: frozenset = frozenset()  # ATen graph nodes run through ATen for single_op_kernels
    entry: object = None  # a fresh variant's graph-cache entry (``runtime/variant_cache.py`` stores it)
    compile_id: str = ""  # Dynamo's, for the compiled function the graph belongs to (``Scope``)

    @property
    def mutates_inputs(self) -> bool:
        return bool(self.mutated_inputs)

    @property
    def fx_code(self) -> str:
        return self.fx.code if self.fx is not None else ""

    @property
    def graph(self) -> Graph:
        """The IR after inlining (rebuilt on demand for a graph loaded from the graph cache)."""
        if self.ir is None and self.rebuild is not None:
            self.ir = self.rebuild()
        return self.ir

    def __call__(self, args):
        return self.run(args)


def compile_graph(gm: torch.fx.GraphModule, kind: str, visible: int | None = None, args=None,
                  scope: Scope | None = None) -> CompiledGraph:
    """Compile ``gm``. ``visible``: how many leading outputs the user sees (they keep
    eager's strides; None: all). ``args``: real arguments whose strides to compile for.
    ``scope``: the compiled function it belongs to (names its graphs)."""
    scope = scope or _UNSCOPED
    name = scope.name()
    with progress.tracking(f"{name} ({kind})"):
        return _compile_graph(name, gm, kind, visible, args, scope)


def _compile_graph(name: str, gm: torch.fx.GraphModule, kind: str, visible, args, scope) -> CompiledGraph:
    timings = {}
    t = time.perf_counter()
    restrided = choose_layouts(gm, visible, args)
    timings["layouts"] = _lap(t)
    key = None
    if graph_cache.enabled():
        t = time.perf_counter()
        key = graph_cache.key_of(gm, kind, visible, args)
        entry = graph_cache.load(key) if key else None
        timings["graph cache"] = _lap(t)
        if entry is not None:
            progress.stage("loading from the graph cache")
            compiled = _from_entry(name, kind, gm, entry, timings)
            log.debug("%s (%s): loaded from the graph cache", name, kind)
            compiled.cache_key, compiled.compile_id = key, scope.compile_id
            return compiled
    compiled, entry = _compile(name, kind, gm, visible, restrided, timings)
    compiled.compile_id = scope.compile_id
    if symbols.active():  # a variant of a graph with symbolic sizes: its caller stores it
        compiled.entry = entry
    if key and entry is not None:
        t = time.perf_counter()
        graph_cache.save(key, entry)
        timings["graph cache"] += _lap(t)
        compiled.cache_key = key
    return compiled


def load_entry(entry, gm: torch.fx.GraphModule, kind: str, scope: Scope | None = None) -> CompiledGraph:
    """A graph-cache ``entry`` found by its caller (a stored variant) as a compiled graph."""
    scope = scope or _UNSCOPED
    compiled = _from_entry(scope.name(), kind, gm, entry, {})
    compiled.compile_id = scope.compile_id
    return compiled


def load_cached(key: str, kind: str, constants: dict, scope: Scope | None = None) -> CompiledGraph | None:
    """The graph cache's entry ``key`` as a compiled graph with no FX graph behind it
    (``runtime/trace_cache.py``; ``constants``: its tensor constants by FX attribute; the
    caller gives it a ``rebuild`` for its IR); None if absent."""
    t = time.perf_counter()
    entry = graph_cache.load(key)
    if entry is None or any(attr not in constants for _, attr in entry.constants):
        return None
    scope = scope or _UNSCOPED
    compiled = _from_entry(scope.name(), kind, None, entry, {"graph cache": _lap(t)}, constants)
    compiled.cache_key, compiled.rebuild, compiled.compile_id = key, None, scope.compile_id
    return compiled


def _compile(name: str, kind: str, gm: torch.fx.GraphModule, visible, restrided: bool, timings: dict) -> tuple:
    """The whole pipeline: (CompiledGraph, graph cache entry or None when not cacheable)."""
    clear_intern_table()
    target = target_for(graph_device(gm))
    through_aten = frozenset()
    while True:  # (single_op_kernels off: until no kernel computes a lone op)
        graph, fallbacks, decisions, sched, steps, plans = _passes(gm, kind, target, through_aten, timings)
        lone = frozenset() if config.single_op_kernels else lone_ops(plans, gm) - through_aten
        if not lone:
            break
        through_aten |= lone
    restrided = restrided or kind == "forward" and any(visible is None or k >= visible
                                                       for k in graph.padded_outputs)
    t = time.perf_counter()
    progress.total(len(plans))
    built = target.compile(plans)
    timings["codegen+build"] = _lap(t)
    for step in steps:
        if step.kind == "kernel" and not step.skip:
            step.launch = built.launches[step.name]
    t = time.perf_counter()
    sizes = buffer_bytes(graph)
    constants = [(f"{n.name}_value", n.origins[0], n.constant) for n in graph.nodes
                 if isinstance(n, InputNode) and n.constant is not None]
    wrapper = generate(graph, steps, _private_outputs(graph, kind, visible))
    run = _load_wrapper(name, wrapper, graph.device, {**built.objects, **{g: c for g, _, c in constants}},
                        graph.checks)
    timings["wrapper"] = _lap(t)
    report = dict(
        decisions=decisions, fusion_log=sched.log,
        kernels=[_kernel_info(p, name, target.name, built, sizes, _in_place(graph, p)) for p in plans],
        externs=[str(n.target) for n in graph.nodes if isinstance(n, ExternNode) and not n.is_fallback],
        fallbacks=fallbacks, source=built.source, node_count=len(graph.nodes),
        mutated_inputs=_mutated_inputs(graph, gm),
        host_traffic=_host_traffic(graph), checks=list(graph.checks), contents=buffer_contents(graph),
        through_aten=through_aten)
    compiled = CompiledGraph(name, kind, graph, wrapper=wrapper, timings=timings, device=graph.device,
                             fx=gm, run=run, cache_hit=built.cache_hit, restrided=restrided, **report)
    entry = None
    if built.recipe is not None:
        entry = graph_cache.Entry(wrapper, built.recipe, [(g, attr) for g, attr, _ in constants],
                                  str(graph.device), restrided, report)
    return compiled, entry


def _mutated_inputs(graph: Graph, gm: torch.fx.GraphModule) -> tuple:
    """Positions of the inputs the compiled graph writes into: those its IR updates in
    place, and those an op of the ATen graph writes (an in-place op run through ATen)."""
    written = {position for _, _, position in graph.in_place_writes() if position is not None}
    return tuple(sorted(written | set(mutated_inputs(gm))))


def _from_entry(name: str, kind: str, gm, entry, timings: dict, constants: dict | None = None) -> CompiledGraph:
    """A graph cache hit: load the kernels the recipe names and execute the wrapper. Tensor
    constants come from ``gm`` (or ``constants``, by attribute)."""
    t = time.perf_counter()
    device = torch.device(entry.device)
    objects = entry.recipe.load(device)
    objects.update({g: constant_on(constants[attr] if constants is not None else getattr(gm, attr), device)
                    for g, attr in entry.constants})
    run = _load_wrapper(name, entry.wrapper, device, objects, entry.report.get("checks", []))
    timings["load"] = _lap(t)
    report = dict(entry.report)
    report["kernels"] = [dataclasses.replace(k, graph=name) for k in report["kernels"]]
    return CompiledGraph(name, kind, None, wrapper=entry.wrapper, timings=timings, device=device,
                         fx=gm, run=run, cache_hit=True, from_graph_cache=True,
                         restrided=entry.restrided, **report,
                         rebuild=functools.partial(rebuild_ir, gm, kind, report.get("through_aten", frozenset())))


def _passes(gm: torch.fx.GraphModule, kind: str, target, through_aten: frozenset, timings: dict) -> tuple:
    """Lower, inline, schedule and plan: (graph, fallbacks, decisions, schedule, steps, plans)."""
    t = time.perf_counter()
    graph, fallbacks = lower(gm, target, keep_padding=_outputs_keep_padding(kind), group_matmuls=kind == "inference",
                             through_aten=through_aten)
    scatter_in_place(graph, gm)
    t = _add_lap(timings, "lower", t)
    decisions = inline(graph)
    t = _add_lap(timings, "inline", t)
    sched = schedule(graph)
    t = _add_lap(timings, "schedule", t)
    steps, plans = _steps(graph, sched, target.supports_foreach and not config.one_kernel_per_op)
    _add_lap(timings, "plan", t)
    return graph, fallbacks, decisions, sched, steps, plans


def _outputs_keep_padding(kind: str) -> bool:
    """May outputs keep a matrix product's padded rows? Not a backward's (its gradients
    reach the user), nor a symbolic forward's: its backward's variants are compiled for the
    strides AOTAutograd traced for what the forward saves (given others, it would run per
    shape: ``runtime/symbolic.py``), where a static forward's backward is compiled at its
    first call, for the strides it is given (``compiled.restrided``)."""
    return kind == "inference" or kind == "forward" and not symbols.active()


def rebuild_ir(gm: torch.fx.GraphModule, kind: str, through_aten: frozenset = frozenset()) -> Graph:
    """The IR after inlining, as ``_compile`` built it (for a graph loaded from the graph cache)."""
    graph, _ = lower(gm, target_for(graph_device(gm)), keep_padding=_outputs_keep_padding(kind),
                     group_matmuls=kind == "inference", through_aten=through_aten)
    scatter_in_place(graph, gm)
    inline(graph)
    return graph


def lone_ops(plans: list, gm: torch.fx.GraphModule) -> frozenset:
    """ATen graph nodes (by name) that a kernel, or a part of a foreach kernel, computes alone
    (``config.single_op_kernels``): its only source, an ATen op that writes into no argument."""
    nodes = {n.name: n for n in gm.graph.nodes}
    found = set()
    for part in (p for plan in plans for p in (plan.parts or [plan])):
        sources = part.sources
        node = nodes.get(sources[0]) if len(sources) == 1 else None
        if node is not None and isinstance(node.target, torch._ops.OpOverload) and not node.target._schema.is_mutable:
            found.add(node.name)
    return frozenset(found)


def _kernel_info(plan, graph_name: str, backend: str, built, sizes: dict, mutates: tuple) -> KernelInfo:
    writes = [b for b in plan.writes if b != ERROR_RECORD]
    return KernelInfo(plan.name, plan.origins, backend, built.shapes.get(plan.name, ""), plan.reads, plan.writes,
                      graph_name, mutates, nodes=[m.name for p in (plan.parts or [plan]) for m in p.members],
                      launch=built.params.get(plan.name, ""), bytes_read=_total(sizes, plan.reads),
                      bytes_written=_total(sizes, writes))


def _total(sizes: dict, buffers: list) -> int | None:
    found = [sizes.get(b) for b in buffers]
    return None if any(n is None for n in found) else sum(found)


def buffer_bytes(graph: Graph) -> dict:
    """Each buffer's bytes (inputs, stored buffers, extern results): its elements times its
    dtype's size; None where its size is symbolic."""
    found = {}
    for node in graph.nodes:
        if isinstance(node, ExternNode):
            found.update((o[0], _bytes(o[2].numel if o[2] is not None else None, o[1]))
                         for o in node.outputs if o is not None)
        else:
            found[node.name] = _bytes(node.numel, node.dtype)
    return found


def _bytes(numel, dtype) -> int | None:
    """(A symbolic size is not turned into an int: that would guard it to its value.)"""
    if not isinstance(numel, int) or not isinstance(dtype, torch.dtype):
        return None
    return numel * dtype.itemsize


def buffer_contents(graph: Graph) -> dict:
    """Each stored buffer's ATen ops, short (``buf9: ["addmm", "gelu"]``): what the kernel
    storing it computes into it, or the ATen call that returns it."""
    contents = {}
    for node in graph.nodes:
        if isinstance(node, InputNode):
            continue
        ops = list(dict.fromkeys(o.split(".")[1] if o.startswith("aten.") else o for o in node.origins))
        names = [o[0] for o in node.outputs if o is not None] if isinstance(node, ExternNode) else [node.name]
        contents.update((name, ops) for name in names)
    return contents


def _in_place(graph: Graph, plan) -> tuple:
    """How a report names the buffers ``plan`` writes in place (``arg0 (input 0)``, ``buf1``)."""
    positions = {n.name: n.position for n in graph.nodes if isinstance(n, InputNode)}
    return tuple(in_place_text(b, positions.get(b)) for b in plan.in_place)


def _host_traffic(graph: Graph) -> str:
    """Why the graph moves data between the CPU and its device on each call, or ""."""
    if any(o.device is not None for o in graph.outputs):
        return "a result is returned on the CPU"
    if any(isinstance(n, InputNode) and (n.host_scalar or n.elsewhere) for n in graph.nodes):
        return "an input is a CPU tensor"
    return ""


def _private_outputs(graph: Graph, kind: str, visible) -> frozenset:
    """Output buffers that reach autograd, not the user: a backward's gradients and the
    activations a forward saves for its backward (outputs past ``visible``)."""
    buffers = [o.buffer for o in graph.outputs]
    if kind == "backward":
        return frozenset(b for b in buffers if b is not None)
    if kind == "forward" and visible is not None:
        return frozenset(b for b in buffers[visible:] if b is not None) - set(buffers[:visible])
    return frozenset()


def _load_wrapper(name: str, text: str, device, objects: dict, checks: list):
    namespace: dict = {}
    objects = {**objects, **Checks(checks, device).names()}
    exec(compile(text, f"<braze {name}>", "exec"), environment(device, objects), namespace)
    return namespace["call"]


def _lap(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def _add_lap(timings: dict, phase: str, start: float) -> float:
    """Add the time since ``start`` to ``phase``; the time now (the next phase's start)."""
    timings[phase] = round(timings.get(phase, 0) + _lap(start), 3)
    return time.perf_counter()


def _steps(graph: Graph, sched, foreach: bool) -> tuple:
    """Wrapper steps in schedule order, and the kernel plans."""
    group_of = {}
    for k, group in enumerate(sched.groups):
        for node in group.nodes:
            group_of[node.name] = k
    readers: dict = {}
    for k, group in enumerate(sched.groups):
        for node in group.nodes:
            for buffer in node.reads():
                readers.setdefault(buffer, set()).add(k)
    wanted = {o.buffer for o in graph.outputs if o.buffer is not None}
    steps, plans = [], []
    for k, group in enumerate(sched.groups):
        if group.extern:
            node = group.nodes[0]
            outs = [o[0] for o in node.outputs if o is not None]
            steps.append(Step("extern", node.name, node.reads(), outs, node=node))
            continue
        escaping = {n.name for n in group.nodes if n.name in wanted or readers.get(n.name, set()) - {k}}
        if any(n.numel == 0 for n in group.nodes):  # nothing to compute; outputs still exist
            writes = [n.name for n in group.nodes if n.name in escaping and not n.mutates]
            steps.append(Step("kernel", f"empty{k}", [], writes, skip=True))
            continue
        plan = plan_kernel(graph, group.nodes, f"kernel{len(plans)}", escaping)
        plans.append(plan)
        steps.append(_kernel_step(plan))
    return _bundle(steps, plans) if foreach and config.foreach else (steps, plans)


def _bundle(steps: list, plans: list) -> tuple:
    """Runs of consecutive, mutually independent pointwise kernels become one
    foreach kernel (one launch; an optimizer step over many tensors)."""
    by_name = {p.name: p for p in plans}
    runs: list = []
    for step in steps:
        plan = by_name.get(step.name) if step.kind == "kernel" and not step.skip else None
        if runs and plan is not None and _joins(runs[-1], plan, by_name):
            runs[-1].append(step)
        else:
            runs.append([step] if plan is not None else step)
    out_steps, out_plans = [], []
    for run in runs:
        if not isinstance(run, list):
            out_steps.append(run)
            continue
        parts = [by_name[s.name] for s in run]
        name = f"kernel{len(out_plans)}"
        plan = parts[0] if len(parts) == 1 else foreach_plan(name, parts)
        plan.name = name
        out_plans.append(plan)
        out_steps.append(_kernel_step(plan))
    return out_steps, out_plans


def _kernel_step(plan) -> Step:
    """The wrapper's step for a kernel; the error record it may write is the graph's own."""
    writes = [b for b in plan.writes if b != ERROR_RECORD]
    return Step("kernel", plan.name, plan.reads, writes, checked=len(writes) < len(plan.writes))


def _joins(run: list, plan, by_name: dict) -> bool:
    if plan.reduce or plan.scatters or not isinstance(run, list):
        return False
    members = [by_name[s.name] for s in run]
    if any(m.reduce or m.scatters for m in members):
        return False
    written = {b for m in members for b in m.writes} - {ERROR_RECORD}
    read = {b for m in members for b in m.reads}
    return not (written & set(plan.reads)) and not ((set(plan.writes) - {ERROR_RECORD}) & (read | written))
