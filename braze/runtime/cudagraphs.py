"""CUDA graphs on request: ``options={"cudagraphs": True}``.

Takes: a compiled graph and the indices of its static inputs (parameters and
buffers, which keep their addresses; AOTAutograd reports them). Gives: a boxed
callable that captures the graph's launches once and replays them: other inputs
are copied into static buffers; outputs are returned as aliases of the capture's
memory, and a capture is replayed only once nothing holds its previous outputs
(``Replayer``), so a later call never overwrites what an earlier one returned and
no output is copied.

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

from braze.errors import BrazeError


def why_not_capturable(compiled) -> str | None:
    if compiled.device.type != "cuda":
        return f"the graph runs on {compiled.device.type}, not CUDA"
    if compiled.mutates_inputs:
        return "the graph mutates an input (copying it back each call would defeat the purpose)"
    return compiled.host_traffic or None


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


MAX_CAPTURES = 2  # per graph: a loop that keeps the last output while it computes the next needs two


class Replayer:
    """Replays captures of one compiled graph. Outputs are returned as aliases of the
    capture's memory, not copies: a capture is replayed only when nothing outside holds
    an output of its last replay (the storages' use counts are back to what they were
    right after capture). Otherwise another capture is made (at most ``MAX_CAPTURES``,
    each with its own memory), or, past that, the graph runs without CUDA graphs."""

    def __init__(self, call, name: str, static: set):
        self.call, self.name, self.static = call, name, static
        self.captures: list = []
        self.failed = False

    def __call__(self, args):
        if self.failed:
            return self.call(args)
        if self.captures and not self.captures[0].same_static(args):
            self.captures = []  # parameters moved: capture again
        capture = next((c for c in self.captures if c.free()), None)
        if capture is None and len(self.captures) < MAX_CAPTURES:
            capture = self._capture(args)
        if capture is None:
            return self.call(args)
        return capture.replay(args)

    def _capture(self, args):
        if any(isinstance(a, torch.Tensor) and a.device.type != "cuda" for a in args):
            _say(self.name, "an input is a CPU tensor")
            self.failed = True
            return None
        try:
            capture = _Capture(self.call, args, self.static)
        except BrazeError:  # the first run failed in strict mode (runtime/guard.py)
            raise
        except Exception as exc:  # an op that cannot be captured: run normally from now on
            _say(self.name, f"capture failed ({type(exc).__name__}: {exc})")
            self.failed = True
            return None
        self.captures.append(capture)
        return capture


class _Capture:
    """One CUDA graph of the compiled graph: its input buffers (static inputs are used
    in place), its outputs, and its output storages' use counts when nobody else held them."""

    def __init__(self, call, args, static: set):
        self.inputs = [a if k in static or not isinstance(a, torch.Tensor) else a.clone()
                       for k, a in enumerate(args)]
        self.static_ptrs = {k: args[k].data_ptr() for k in static if isinstance(args[k], torch.Tensor)}
        self.copied = [k for k, a in enumerate(args) if k not in static and isinstance(a, torch.Tensor)]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            call(list(self.inputs))  # warm up: lazy initialization stays out of the graph
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outputs = call(list(self.inputs))
        storages = {o.untyped_storage()._cdata: o.untyped_storage() for o in self.outputs
                    if isinstance(o, torch.Tensor)}
        self.storages = list(storages.values())
        self.counts = [_use_count(st) for st in self.storages]

    def same_static(self, args) -> bool:
        return all(args[k].data_ptr() == ptr for k, ptr in self.static_ptrs.items())

    def free(self) -> bool:
        """No alias of an output of the last replay is alive outside."""
        return all(_use_count(st) <= n for st, n in zip(self.storages, self.counts))

    def replay(self, args) -> tuple:
        for k in self.copied:
            self.inputs[k].copy_(args[k])
        self.graph.replay()
        return tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in self.outputs)


def _use_count(storage) -> int:
    return torch._C._storage_Use_Count(storage._cdata)
