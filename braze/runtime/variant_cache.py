"""The variants of a graph with symbolic sizes, on disk: a later process loads the variant
whose guards hold for its sizes instead of compiling it again.

Takes: the FX graph with symbolic sizes and its kind (the index's key, from
``graph_cache.key_of``: the graph's nodes and traced metadata, symbols included, and
everything else that decides generated code), and, for each variant compiled, its guards,
the strides its tensor arguments must have, its ``SizeClass`` and its graph-cache entry.
Gives: ``index_key``, ``stored(key)`` (the variants recorded for a graph), ``add`` and
``entry_of``. Entries go through ``runtime/cache.py`` like every other (private directory,
authenticated before they are unpickled). Two processes adding a variant at once both keep
theirs: the index is rewritten under its own lock.
"""
from __future__ import annotations

import dataclasses

import torch

from braze.runtime import cache, graph_cache

_SUFFIX = ".variants"


@dataclasses.dataclass
class StoredVariant:
    guards: list  # the guards' texts (Python, over the symbols' names)
    strides: list  # (argument position, stride texts, loose) of the tensor arguments it checks (``symbolic._strides``)
    size_class: object  # ``runtime.symbolic.SizeClass``, for explain
    entry_key: str  # the variant's graph-cache entry


def index_key(gm: torch.fx.GraphModule, kind: str) -> str:
    """The key of ``gm``'s index, or "" where it cannot be cached."""
    if not graph_cache.enabled():
        return ""
    key = graph_cache.key_of(gm, kind, None, None)
    return cache.key_of(key, "variants") if key else ""


def stored(key: str) -> list:
    return list(cache.load_object(key, _SUFFIX, list) or [])


def add(key: str, guards: list, strides: list, size_class, entry) -> None:
    """Record a variant compiled in this process (its entry first, then the index)."""
    variant = StoredVariant(list(guards), list(strides), size_class, cache.key_of(key, repr(guards), repr(strides)))
    graph_cache.save(variant.entry_key, entry)
    with cache.entry_lock(cache.cache_dir(), key + _SUFFIX + ".index"):
        variants = [v for v in stored(key) if v.entry_key != variant.entry_key]
        cache.save_object(key, _SUFFIX, variants + [variant], replace=True)


def entry_of(variant: StoredVariant):
    return graph_cache.load(variant.entry_key)
