"""Graphs with symbolic sizes, compiled once per concrete shape.

Takes: an FX graph whose inputs have symbolic sizes. Gives: a boxed callable
that, at each call, looks up the inputs' concrete sizes, strides and dtypes,
and on a miss re-propagates concrete fake tensors through the graph and
compiles it with static shapes.
"""
from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from braze import config
from braze.ir.traced import copy_graph


class Specializing:
    def __init__(self, gm: torch.fx.GraphModule, kind: str, options: dict, compile_fn):
        self.gm, self.kind, self.options, self.compile_fn = gm, kind, options, compile_fn
        self.compiled: dict = {}
        self._boxed_call = True  # AOTAutograd passes the argument list itself

    def __call__(self, args):
        key = tuple(_signature(a) for a in args)
        fn = self.compiled.get(key)
        if fn is None:
            fn = self._compile(args)
            self.compiled[key] = fn
        return fn(args)

    def _compile(self, args):
        gm = copy_graph(self.gm)
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fakes = [mode.from_tensor(a, static_shapes=True) if isinstance(a, torch.Tensor) else a for a in args]
            FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fakes)
        for node, value in zip(gm.graph.find_nodes(op="placeholder"), args):
            if not isinstance(value, torch.Tensor):  # torch 2.11 keeps the SymInt of a size input
                node.meta["val"] = value
        with config.patch(**self.options):
            return self.compile_fn(gm, self.kind)


def _signature(value):
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), tuple(value.stride()), value.dtype, value.device)
    return value
