"""CUDA graphs on request: ``options={"cudagraphs": True}``.

Takes: a compiled graph (which inputs it writes into: ``CompiledGraph.mutated_inputs``)
and the indices of its static inputs (those expected to keep their addresses:
parameters and buffers, a backward graph's saved values; ``backend._static_inputs``). Gives: a boxed callable that captures the
graph's launches once and replays them. Static inputs are used in place: the
captured kernels read and write their storage directly (BatchNorm's running
statistics, an optimizer's parameters and state), and a capture is made again when
one of them has moved (its address differs), so a replay never reads or writes a
stale address; one that keeps moving (``MAX_MOVES``) is copied from then on. Other
inputs are copied into the capture's buffers before each replay, and those the graph
writes into are copied back into the caller's tensors after it.
Outputs are returned as aliases of the capture's memory, and a capture is replayed
only once nothing holds its previous outputs (``Replayer``), so a later call never
overwrites what an earlier one returned and no output is copied.

A capture starts with one ordinary run of the graph on the caller's arguments (the
warm-up: lazy initialization stays out of the graph), whose results that call
returns; the capture itself records the launches without running them, so an update
of an input is applied once per call, the first call included. The call given is
the first-call guard (``runtime/guard.py``): the warm-up is the graph's first run,
so a kernel failing there makes the graph eager (captured as such), and under
``config.strict`` its ``BrazeError`` reaches the caller.

A graph with symbolic sizes is captured per concrete shape of its arguments, on
demand (``PerShape``): at most ``config.cudagraph_shapes`` shapes are kept, the least
recently used dropped with its memory.

Graphs that cannot be captured run as usual, after one message saying why: CPU
tensors, or a failed capture (an op that synchronizes with the host).
"""
from __future__ import annotations

import warnings
from collections import OrderedDict

import torch

from braze import config


def why_not_capturable(compiled) -> str | None:
    if compiled.device.type != "cuda":
        return f"the graph runs on {compiled.device.type}, not CUDA"
    return compiled.host_traffic or None


def wrap(call, compiled, static_indices) -> object:
    reason = why_not_capturable(compiled)
    if reason is not None:
        _say(compiled.name, reason)
        return call
    runner = Replayer(call, compiled.name, set(static_indices or ()), set(compiled.mutated_inputs))
    runner._boxed_call = True
    return runner


def _say(name: str, reason: str) -> None:
    warnings.warn(f"braze: {name} is not run through CUDA graphs: {reason}", stacklevel=3)


def input_roles(args, static: set, mutated: set) -> tuple:
    """How a capture treats each tensor input: ``(static, copied_in, copied_back)``, lists
    of positions. Static inputs are used in place; every other tensor is copied into the
    capture's buffer before a replay, and those the graph writes into are copied back."""
    tensors = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor)]
    in_place = [k for k in tensors if k in static]
    copied = [k for k in tensors if k not in static]
    return in_place, copied, [k for k in copied if k in mutated]


def per_shape(call, name: str, static_indices, mutated) -> object:
    """CUDA graphs for a graph with symbolic sizes (``call``: its variants' dispatcher):
    a ``Replayer`` per concrete shape (``PerShape``)."""
    runner = PerShape(call, name, set(static_indices or ()), set(mutated), config.cudagraph_shapes)
    runner._boxed_call = True
    return runner


class PerShape:
    """A ``Replayer`` for each concrete shape of the arguments (their sizes and strides, and
    the integers among them: a capture holds every address and size), made at the first
    call of that shape. At most ``limit`` are kept: the least recently used is dropped, and
    with it its captures and their memory, so memory stays bounded however many sizes
    come. A capture that fails for one shape (a host synchronization) would fail for all:
    the graph then runs without CUDA graphs."""

    def __init__(self, call, name: str, static: set, mutated: set, limit: int, graphs=None):
        self.call, self.name, self.static, self.mutated = call, name, static, mutated
        self.limit, self.graphs = max(1, limit), graphs
        self.replayers: OrderedDict = OrderedDict()
        self.failed = False

    def __call__(self, args):
        if self.failed:
            return self.call(args)
        key = tuple((tuple(a.shape), a.stride()) if isinstance(a, torch.Tensor) else a for a in args)
        replayer = self.replayers.pop(key, None)
        if replayer is None:
            shape = ", ".join(str(list(k[0])) for k in key if isinstance(k, tuple))
            replayer = Replayer(self.call, f"{self.name} at ({shape})", set(self.static), self.mutated,
                                self.graphs)
            while len(self.replayers) >= self.limit:
                self.replayers.popitem(last=False)
        self.replayers[key] = replayer
        outputs = replayer(args)
        self.failed = replayer.failed
        return outputs


MAX_CAPTURES = 2  # per graph: a loop that keeps the last output while it computes the next needs two
MAX_MOVES = 2  # a static input that moved this often is copied in (and back) instead


class Replayer:
    """Replays captures of one compiled graph. Outputs are returned as aliases of the
    capture's memory, not copies: a capture is replayed only when nothing outside holds
    an output of its last replay (the storages' use counts are back to what they were
    right after capture). Otherwise another capture is made (at most ``MAX_CAPTURES``,
    each with its own memory), or, past that, the graph runs without CUDA graphs.
    ``captures_made`` and ``replays`` count what happened (tests read them). ``graphs``:
    how to warm up and record (``CUDA_GRAPHS``; a test may record otherwise)."""

    def __init__(self, call, name: str, static: set, mutated: set = frozenset(), graphs=None):
        self.call, self.name, self.static, self.mutated = call, name, set(static), mutated
        self.graphs = graphs or CUDA_GRAPHS
        self.captures: list = []
        self.moves: dict = {}  # static input position -> how often it moved
        self.failed = False
        self.captures_made = self.replays = 0

    def __call__(self, args):
        if self.failed:
            return self.call(args)
        if self.captures:
            self._check_static(args)
        capture = next((c for c in self.captures if c.free()), None)
        if capture is not None:
            self.replays += 1
            return capture.replay(args)
        if len(self.captures) < MAX_CAPTURES:
            return self._capture(args)
        return self.call(args)

    def _check_static(self, args) -> None:
        """Drop the captures when a static input moved (its address is in the graphs). One
        that moved ``MAX_MOVES`` times is copied from then on, as other inputs are."""
        moved = self.captures[0].moved(args)
        if not moved:
            return
        self.captures = []
        for k in moved:
            self.moves[k] = self.moves.get(k, 0) + 1
            if self.moves[k] >= MAX_MOVES:
                self.static.discard(k)

    def _capture(self, args):
        """This call's results, from the warm-up run on ``args``; the capture that follows
        is kept for later calls."""
        reason = self.graphs.refuses(args)
        if reason:
            _say(self.name, reason)
            self.failed = True
            return self.call(args)
        outputs = self.graphs.warm_up(self.call, args)  # the call's own run: its errors are the caller's
        try:
            capture = _Capture(self.call, args, input_roles(args, self.static, self.mutated), self.graphs)
        except Exception as exc:  # an op that cannot be captured: run normally from now on
            _say(self.name, f"capture failed ({type(exc).__name__}: {exc})")
            self.failed = True
            return outputs
        self.captures.append(capture)
        self.captures_made += 1
        return outputs


class CudaGraphs:
    """How a ``Replayer`` warms up and records: CUDA's streams and graphs."""

    @staticmethod
    def refuses(args) -> str:
        """Why these arguments cannot be captured ("" when they can)."""
        if any(isinstance(a, torch.Tensor) and a.device.type != "cuda" for a in args):
            return "an input is a CPU tensor"
        return ""

    @staticmethod
    def warm_up(call, args):
        """``call(args)`` on a side stream (as CUDA graphs' warm-up must run), its outputs
        marked as used by the caller's stream."""
        caller = torch.cuda.current_stream()
        side = torch.cuda.Stream()
        side.wait_stream(caller)
        with torch.cuda.stream(side):
            outputs = call(list(args))  # a copy: the run may clear its list
        caller.wait_stream(side)
        for o in outputs:
            if isinstance(o, torch.Tensor) and o.is_cuda:
                o.record_stream(caller)
        return outputs

    @staticmethod
    def record(call, inputs, copied) -> tuple:
        """``(replay, outputs)``: ``call(inputs)``'s launches recorded, not run; ``replay(args)``
        runs them again (on the addresses recorded: the copies at the ``copied`` positions,
        the static inputs, which the caller checks are ``args``' own)."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = call(list(inputs))
        return lambda args: graph.replay(), outputs


CUDA_GRAPHS = CudaGraphs()


class _Capture:
    """One recording of the compiled graph: its input buffers (static inputs are used in
    place), its outputs, and its output storages' use counts when nobody else held them."""

    def __init__(self, call, args, roles: tuple, graphs: CudaGraphs):
        static, self.copied, self.copied_back = roles
        inputs = list(args)
        for k in self.copied:
            inputs[k] = args[k].clone()
        self.static_ptrs = {k: args[k].data_ptr() for k in static}
        self.run, self.outputs = graphs.record(call, inputs, self.copied)
        # Only the copies are kept: a static input is checked by address before each replay
        # (holding it would hold another graph's output saved for a backward, say).
        self.inputs = {k: inputs[k] for k in self.copied}
        storages = {o.untyped_storage()._cdata: o.untyped_storage() for o in self.outputs
                    if isinstance(o, torch.Tensor)}
        self.storages = list(storages.values())
        self.counts = [_use_count(st) for st in self.storages]

    def moved(self, args) -> list:
        """The static inputs whose address is not the one recorded."""
        return [k for k, ptr in self.static_ptrs.items() if args[k].data_ptr() != ptr]

    def free(self) -> bool:
        """No alias of an output of the last replay is alive outside."""
        return all(_use_count(st) <= n for st, n in zip(self.storages, self.counts))

    def replay(self, args) -> tuple:
        for k in self.copied:
            self.inputs[k].copy_(args[k])
        self.run(args)
        if self.copied_back:
            with torch.no_grad():  # (an input updated under no_grad may require grad)
                for k in self.copied_back:
                    args[k].copy_(self.inputs[k])
        return tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in self.outputs)


def _use_count(storage) -> int:
    return torch._C._storage_Use_Count(storage._cdata)
