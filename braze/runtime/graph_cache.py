"""Compiled graphs on disk, keyed by the ATen graph they came from.

Takes: an FX graph (after braze chose its layouts), its kind, how many outputs
the user sees and the real arguments it is compiled for, if any. Gives:
``key_of`` (a hash of everything that decides what braze generates),
``load(key)`` -> ``Entry`` or None, and ``save(key, entry)``; and the parts of
the key that other caches share (``common_parts``, ``describe``,
``device_identity``, ``target_name``: ``runtime/trace_cache.py``).

An ``Entry`` is what a later process needs to run the graph without compiling
it: the wrapper's text, the backend's ``recipe`` (what to load: the C++
source, or the Triton modules and launch parameters; the binaries come from
the kernel caches) and the report (kernels with their ATen ops, fusion log,
inlining decisions, externs, fallbacks, sources). A hit skips lowering,
inlining, scheduling, planning and code generation; the IR itself is rebuilt
only if someone asks for it (``CompiledGraph.graph``).

The key covers: braze's own source files, torch's and Triton's versions, every
knob that changes generated code, the FX graph's nodes and the metadata of every
value in it (sizes, strides, dtypes, devices; tensor constants' values are not
baked into the code, they are read when the graph runs), the real arguments'
strides, the device (name, capability, device count), the OpenMP thread count
and PyTorch's deterministic mode. Entries are pickles written through
``runtime/cache.py`` (atomic, in the private directory, authenticated by an
HMAC checked before they are unpickled: docs/security.md).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
from dataclasses import dataclass

import torch

from braze import config
from braze.runtime import cache

# Knobs that change what is reported or where things go, not what is generated.
_NEUTRAL_KNOBS = {"strict", "debug", "debug_dir", "cache", "cache_dir", "graph_cache", "trace_cache",
                  "compile_workers", "host_cache_mb", "native_launch", "guards", "progress"}
_FORMAT = "braze-graph-1"


@dataclass
class Entry:
    wrapper: str  # the text of ``call(args)``
    recipe: object  # the backend's loadable description (has ``load(device)``)
    constants: list  # (wrapper global name, FX attribute) of the graph's tensor constants
    device: str
    restrided: bool
    report: dict  # CompiledGraph fields: kernels, externs, fallbacks, decisions, fusion_log, source, ...


def enabled() -> bool:
    """On with the disk cache, off while debugging (a debug dump shows a fresh compile)."""
    return config.cache and config.graph_cache and not (config.debug or config.debug_dir)


def key_of(gm: torch.fx.GraphModule, kind: str, visible, args) -> str:
    """The key, or "" when the graph cannot be described (then it is not cached)."""
    try:
        return _key(gm, kind, visible, args)
    except Exception:
        return ""


def _key(gm: torch.fx.GraphModule, kind: str, visible, args) -> str:
    parts = [_FORMAT, common_parts(), kind, repr(visible)]
    devices = set()
    for node in gm.graph.nodes:  # what gm.code says, without generating and compiling it
        parts.append(f"{node.name}={node.op}:{target_name(node.target)}{node.args!r}{node.kwargs!r}")
        parts.append(describe(node.meta.get("val"), devices))
        if node.op == "output":  # outputs given strides other than traced (eager's: lower/layouts.py)
            parts.append(describe(node.meta.get("braze_layouts"), devices))
        if node.op == "get_attr":  # a tensor constant is read at run time (its metadata is in the code)
            value = getattr(gm, node.target, None)
            parts.append(describe(value, devices) if isinstance(value, torch.Tensor) else repr(value))
    if args is not None:
        parts.append(describe(list(args), devices))
    parts += [device_identity(d) for d in sorted(devices)]
    return cache.key_of(*parts)


def common_parts() -> str:
    """What every compiled graph depends on: braze's sources, torch's and Triton's versions,
    the knobs that change generated code, deterministic mode, the thread count, the interpreter."""
    return repr([_braze_sources(), torch.__version__, _triton_version(),
                 sorted((k, repr(v)) for k, v in config.snapshot().items() if k not in _NEUTRAL_KNOBS),
                 torch.are_deterministic_algorithms_enabled(), config.num_threads or torch.get_num_threads(),
                 os.environ.get("TRITON_INTERPRET", "")])


def load(key: str) -> Entry | None:
    return cache.load_object(key, ".graph", Entry)


def save(key: str, entry: Entry) -> None:
    """Store ``entry``; a failure (an unpicklable recipe, a full disk) only loses the entry."""
    cache.save_object(key, ".graph", entry)


def describe(value, devices: set) -> str:
    """Sizes, strides, offset, dtype and device of tensors (nested in lists), repr of the rest."""
    if isinstance(value, torch.Tensor):
        devices.add(str(value.device))
        return (f"T({tuple(value.shape)},{tuple(value.stride())},{value.storage_offset()},"
                f"{value.dtype},{value.device},{value.requires_grad})")
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(describe(v, devices) for v in value) + "]"
    return repr(value)


def target_name(target) -> str:
    if isinstance(target, str):
        return target
    try:
        return torch.fx.node._get_qualified_name(target)
    except Exception:  # not importable by name: its repr
        return repr(target)


def device_identity(device: str) -> str:
    d = torch.device(device)
    if d.type != "cuda":
        return device
    return (f"{device}:{torch.cuda.get_device_name(d)}:{torch.cuda.get_device_capability(d)}:"
            f"{torch.cuda.device_count()}")  # several devices: the wrapper sets the current one


@functools.lru_cache(maxsize=1)
def _braze_sources() -> str:
    """A hash of braze's Python files: a changed braze compiles afresh."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, root).encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def _triton_version() -> str:
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return ""
