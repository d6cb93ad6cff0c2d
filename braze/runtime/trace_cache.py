"""Inference graphs from Dynamo straight to a cached compiled graph, without AOTAutograd.

Takes: Dynamo's FX graph and its example inputs (``key_of``, before AOTAutograd
runs); after a cold compile, AOTAutograd's metadata and braze's compiled graph
(``remember``). Gives: ``lookup(key)`` -> ``Entry``: which compiled graph of the
graph cache (``runtime/graph_cache.py``) stands for Dynamo's graph, so that a
new process pays neither AOTAutograd's trace nor braze's pipeline for it (the
backend loads it and hands Dynamo a callable).

A hit must behave as AOTAutograd's runtime wrapper would around the same
compiled graph, so only graphs for which that wrapper adds nothing are kept:
inference graphs (no autograd), no input mutated, every output a fresh tensor
(no alias of an input or of another output), no effect tokens, no functionalized
random state, no change of grad mode, plain tensors in and out, as many ATen
inputs as Dynamo inputs (no duplicates merged), no tensor held by Dynamo's
graph (the ATen graph's constants, made from literals such as ``torch.tensor([])``,
are kept in the entry, up to 1 MiB), static shapes, no CUDA graphs. Under autocast the graph runs with autocast off, as
AOTAutograd runs it (the casts are in the graph).

The key covers what decides AOTAutograd's graph and braze's code: Dynamo's nodes
(targets and arguments, subgraphs of higher-order ops), every input's sizes,
strides, dtype, device and ``requires_grad``, grad mode, autocast state, default
dtype, deterministic mode, functorch's config, and what the graph cache's key
covers (braze's sources, versions, knobs, devices). A node calling anything but
torch, operator or builtins (a user function kept in the graph) is not cached:
its body could change under the same name.

A hit's first call is guarded as a compiled graph's always is: if it raises,
Dynamo's graph runs eagerly from then on. Its ATen graph is not at hand: its
IR is rebuilt only when read (``CompiledGraph.graph``), by tracing Dynamo's graph
again (``debug/retrace.py``); debug dumps compile afresh (the cache is off while
debugging).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from braze import config
from braze.runtime import cache, graph_cache

_FORMAT = "braze-trace-1"
_SAFE_MODULES = ("torch", "_operator", "operator", "builtins", "math")
_MAX_CONSTANT_BYTES = 1 << 20


@dataclass
class Entry:
    graph_key: str  # the compiled graph in the graph cache
    disable_autocast: bool  # compiled under autocast: AOTAutograd runs such a graph with autocast off
    constants: dict  # the ATen graph's tensor constants by attribute (from literals in Dynamo's graph)


def enabled() -> bool:
    return config.trace_cache and graph_cache.enabled() and not config.cudagraphs


def key_of(gm: torch.fx.GraphModule, example_inputs) -> str:
    """The key of Dynamo's graph, or "" when it is not cacheable."""
    if not enabled():
        return ""
    try:
        return _key(gm, example_inputs)
    except Exception:  # _NotCacheable, or a graph that cannot be described
        return ""


class _NotCacheable(Exception):
    pass


def _key(gm: torch.fx.GraphModule, example_inputs) -> str:
    devices: set = set()
    parts = [_FORMAT, graph_cache.common_parts(), _global_state()]
    for x in example_inputs:
        if type(x) not in (torch.Tensor, torch.nn.Parameter) or _symbolic(x):
            raise _NotCacheable
        parts.append(graph_cache.describe(x, devices))
    _describe_graph(gm, parts)
    parts += [graph_cache.device_identity(d) for d in sorted(devices)]
    return cache.key_of(*parts)


def _describe_graph(gm: torch.fx.GraphModule, parts: list) -> None:
    for node in gm.graph.nodes:
        value = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(value, torch.SymInt) or isinstance(value, torch.Tensor) and _symbolic(value):
            raise _NotCacheable  # dynamic shapes: one compiled graph serves many sizes
        if node.op == "get_attr":
            value = getattr(gm, node.target)
            if not isinstance(value, torch.fx.GraphModule):  # a tensor constant
                raise _NotCacheable
            parts.append(f"subgraph {node.target}")
            _describe_graph(value, parts)
        elif node.op in ("call_function", "call_module") and not _safe(node):
            raise _NotCacheable
        parts.append(f"{node.name}={node.op}:{graph_cache.target_name(node.target)}{node.args!r}{node.kwargs!r}")


def _safe(node: torch.fx.Node) -> bool:
    """A call whose meaning is torch's (or the language's), not user code's."""
    if node.op == "call_module":
        return False  # Dynamo inlines modules; one kept as a call is user code
    if isinstance(node.target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket,
                                torch._ops.HigherOrderOperator)):
        return True
    module = getattr(node.target, "__module__", None) or ""
    return module.split(".")[0] in _SAFE_MODULES


def _symbolic(x: torch.Tensor) -> bool:
    return any(isinstance(s, torch.SymInt) for s in (*x.shape, *x.stride()))


def _global_state() -> str:
    autocast = [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in ("cpu", "cuda")]
    functorch = getattr(torch._functorch.config, "save_config_portable", lambda: {})()
    return repr((torch.is_grad_enabled(), torch.is_inference_mode_enabled(), autocast,
                 torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled(),
                 sorted((k, repr(v)) for k, v in functorch.items())))


def lookup(key: str) -> Entry | None:
    return cache.load_object(key, ".trace", Entry)


def remember(key: str, compiled, aten_gm: torch.fx.GraphModule, dynamo_inputs: int) -> None:
    """After a cold compile of an inference graph: keep its entry if a hit can stand in for
    AOTAutograd. A failure here only loses the entry."""
    try:
        entry = _entry(compiled, aten_gm, dynamo_inputs)
    except Exception:
        return
    if entry is not None:
        cache.save_object(key, ".trace", entry)


def _entry(compiled, aten_gm: torch.fx.GraphModule, dynamo_inputs: int) -> Entry | None:
    metadata = _fw_metadata()
    placeholders = len(aten_gm.graph.find_nodes(op="placeholder"))
    if (not compiled.cache_key or compiled.restrided or metadata is None or not _trivial(metadata)
            or placeholders != dynamo_inputs):
        return None
    with torch._subclasses.fake_tensor.unset_fake_temporarily():  # AOTAutograd's fake mode is active
        constants = {n.target: getattr(aten_gm, n.target).detach().cpu().clone()
                     for n in aten_gm.graph.find_nodes(op="get_attr")
                     if isinstance(getattr(aten_gm, n.target), torch.Tensor)}
    if sum(c.numel() * c.element_size() for c in constants.values()) > _MAX_CONSTANT_BYTES:
        return None
    return Entry(compiled.cache_key, torch._C._is_any_autocast_enabled(), constants)


def _fw_metadata():
    context = torch._guards.TracingContext.try_get()
    return getattr(context, "fw_metadata", None) if context is not None else None


def _trivial(meta) -> bool:
    """AOTAutograd's runtime wrapper only calls the compiled graph: nothing to replay or restore."""
    try:
        from torch._functorch._aot_autograd.schemas import OutputType, SubclassCreationMeta
        return (not any(i.mutates_data or i.mutates_metadata or i.mutates_storage_metadata for i in meta.input_info)
                and all(o.output_type == OutputType.non_alias for o in meta.output_info)
                and meta.num_intermediate_bases == 0 and not meta.is_rng_op_functionalized
                and not meta.tokens and meta.grad_enabled_mutation is None
                and not any(isinstance(m, SubclassCreationMeta)
                            for m in (*meta.subclass_inp_meta, *meta.subclass_fw_graph_out_meta)))
    except (AttributeError, ImportError):  # a torch whose metadata differs: do not cache
        return False
