"""Sizes of traced tensors as braze sizes.

Takes: values Dynamo traced (``SymInt``s, whose ShapeEnv expressions are sympy) and FX
tensor metadata. Gives: ``concrete`` (a ``SymInt`` as a ``Size`` or an int), ``sizes_of``,
``strides_of`` and ``offset_of`` of a traced tensor, and ``from_sympy``, the translation of a
ShapeEnv expression into ``ir/symbols``' polynomials. And ``copy_graph``, a copy of a traced
FX graph to compile from.
"""
from __future__ import annotations

import copy
import math

import torch
import torch.fx

from braze.ir.symbols import floordiv, modulo, symbol

aten = torch.ops.aten


def from_sympy(expr):
    """A ``Size`` (or int) from a ShapeEnv expression: symbols, + and *, integer powers,
    torch's ``FloorDiv`` / ``Mod`` / ``CleanDiv``, ``CeilToInt`` / ``FloorToInt`` of an
    integer quotient, and ``Max`` / ``Min`` (decided, so possibly guarded); anything else
    is a ``TypeError``."""
    import sympy
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        return symbol(str(expr))
    if isinstance(expr, sympy.Add):
        return sum((from_sympy(a) for a in expr.args), 0)
    if isinstance(expr, sympy.Mul):
        return math.prod(from_sympy(a) for a in expr.args)
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) >= 0:
        return from_sympy(expr.base) ** int(expr.exp)
    name = type(expr).__name__
    if name in ("Max", "Min"):  # decided by the ranges, else guarded
        return (max if name == "Max" else min)(from_sympy(a) for a in expr.args)
    if name in ("CeilToInt", "FloorToInt") and type(expr.args[0]).__name__ == "IntTrueDiv":
        a, b = (from_sympy(x) for x in expr.args[0].args)  # ceil(a / b) = -((-a) // b)
        return -floordiv(-a, b) if name == "CeilToInt" else floordiv(a, b)
    if name in ("FloorDiv", "CleanDiv"):
        return floordiv(from_sympy(expr.args[0]), from_sympy(expr.args[1]))
    if name in ("Mod", "PythonMod"):
        return modulo(from_sympy(expr.args[0]), from_sympy(expr.args[1]))
    raise TypeError(f"a size braze cannot represent: {expr} ({name})")


def sizes_of(val) -> tuple:
    """A traced tensor's sizes: ints, or ``Size`` where Dynamo made them symbolic."""
    return tuple(concrete(n) for n in val.shape)


def strides_of(val) -> tuple:
    return tuple(concrete(n) for n in val.stride())


def offset_of(val):
    return concrete(val.storage_offset())


def concrete(value):
    """A SymInt or int from a traced value as a ``Size`` or int."""
    import torch
    if isinstance(value, torch.SymInt):
        node = value.node
        return int(node.expr) if node.expr.is_number else from_sympy(node.expr)
    return value


def copy_graph(gm):
    """A copy of ``gm`` that compiling may annotate: its own graph, nodes and ``meta`` dicts,
    sharing the module's parameters and the values in the metadata (traced fake tensors,
    which braze reads and never changes). ``copy.deepcopy`` copied every fake tensor too, and
    failed on some: a whole GPT-2 with ``dynamic=True`` raised "Attempted to set the storage of
    a tensor on device meta to a storage on different device cpu"."""
    graph = torch.fx.Graph(owning_module=None, tracer_cls=gm.graph._tracer_cls)
    graph._codegen = copy.deepcopy(gm.graph._codegen)
    copied: dict = {}
    for node in gm.graph.nodes:
        copied[node] = graph.node_copy(node, lambda n: copied[n])
    new = torch.fx.GraphModule(gm, graph, class_name=type(gm).__name__)
    new.meta = dict(getattr(gm, "meta", {}))
    return new
