"""CUDA graphs on request: ``options={"cudagraphs": True}``.

Takes: a compiled graph and the indices of its static inputs (parameters and
buffers, which keep their addresses; AOTAutograd reports them). Gives: a boxed
callable that captures the graph's launches once and replays them: other inputs
are copied into static buffers, outputs are cloned out (so a later call never
overwrites what an earlier one returned).

Graphs that cannot be captured run as usual, after one message saying why:
symbolic sizes, CPU tensors, input mutation, or a failed capture (an op that
synchronizes with the host). The call given is the first-call guard
(``runtime/guard.py``): the warm-up before the first capture is the graph's first
run, so a kernel failing there makes the graph eager (captured as such), and under
``config.strict`` its ``BrazeError`` reaches the caller.
"""
from __future__ import annotations

import warnings

import torch

from braze.compiler import BrazeError


def why_not_capturable(compiled) -> str | None:
    if compiled.device.type != "cuda":
        return f"the graph runs on {compiled.device.type}, not CUDA"
    if compiled.mutates_inputs:
        return "the graph mutates an input (copying it back each call would defeat the purpose)"
    return None


def wrap(call, compiled, static_indices) -> object:
    reason = why_not_capturable(compiled)
    if reason is not None:
        _say(compiled.name, reason)
        return call
    runner = Replayer(call, compiled.name, set(static_indices or ()))
    runner._boxed_call = True
    return runner


def _say(name: str, reason: str) -> None:
    warnings.warn(f"braze: {name} is not run through CUDA graphs: {reason}", stacklevel=3)


class Replayer:
    def __init__(self, call, name: str, static: set):
        self.call, self.name, self.static = call, name, static
        self.graph = None
        self.inputs: list = []
        self.outputs = None
        self.static_ptrs: dict = {}
        self.failed = False

    def __call__(self, args):
        if self.failed:
            return self.call(args)
        if self.graph is None or not self._same_static(args):
            if not self._capture(args):
                return self.call(args)
        for k, (dst, src) in enumerate(zip(self.inputs, args)):
            if k not in self.static and isinstance(src, torch.Tensor):
                dst.copy_(src)
        self.graph.replay()
        return tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in self.outputs)

    def _same_static(self, args) -> bool:
        return all(args[k].data_ptr() == ptr for k, ptr in self.static_ptrs.items())

    def _capture(self, args) -> bool:
        if any(isinstance(a, torch.Tensor) and a.device.type != "cuda" for a in args):
            _say(self.name, "an input is a CPU tensor")
            self.failed = True
            return False
        self.inputs = [a if k in self.static or not isinstance(a, torch.Tensor) else a.clone()
                       for k, a in enumerate(args)]
        self.static_ptrs = {k: args[k].data_ptr() for k in self.static if isinstance(args[k], torch.Tensor)}
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.call(list(self.inputs))  # warm up: lazy initialization stays out of the graph
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.outputs = self.call(list(self.inputs))
            self.graph = graph
            return True
        except BrazeError:  # the first run failed in strict mode (runtime/guard.py)
            raise
        except Exception as exc:  # an op that cannot be captured: run normally from now on
            _say(self.name, f"capture failed ({type(exc).__name__}: {exc})")
            self.failed = True
            self.graph = None
            return False
