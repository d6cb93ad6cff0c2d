"""The IR of an inference graph loaded from the trace cache, rebuilt when someone reads it.

Takes: Dynamo's graph, its example inputs (only their sizes, strides, dtypes, devices and
``requires_grad`` are kept), the options in force and, read at construction, the grad
mode and autocast state (``backend._from_trace_cache``: the trace cache's key covers
them, so they are the compile's). Gives: ``Retrace``, a callable returning the IR after
inlining as the cold compile built it: AOTAutograd traces Dynamo's graph again, on fake
inputs, with braze's decompositions and partitioner; the ATen graph it gives gets eager's
output strides and braze's layouts, then is lowered and inlined (``compiler.rebuild_ir``).

A trace cache hit skips AOTAutograd, so no ATen graph is at hand; nothing here runs
until the IR is asked for (``CompiledGraph.graph``), so a hit stays as cheap as it was.
"""
from __future__ import annotations

import contextlib

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch._subclasses.fake_tensor import FakeTensorMode

from braze import config
from braze.decompositions import table
from braze.lower.layouts import choose_layouts


class Retrace:
    """``aot``: the backend's own steps this needs (``eager_outputs``, ``eager_strides``,
    ``partition``), passed in so that this module does not import the backend."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs, options: dict, aot: dict):
        self.gm, self.aot = gm, aot
        self.inputs = [(tuple(x.shape), tuple(x.stride()), x.dtype, x.device, x.requires_grad)
                       for x in example_inputs]
        self.options = dict(options)
        self.grad = torch.is_grad_enabled()
        self.autocast = [(d, torch.get_autocast_dtype(d)) for d in ("cpu", "cuda") if torch.is_autocast_enabled(d)]

    def __call__(self):
        from braze.compiler import rebuild_ir
        with config.patch(**self.options), torch.set_grad_enabled(self.grad), contextlib.ExitStack() as stack:
            for device, dtype in self.autocast:
                stack.enter_context(torch.autocast(device, dtype))
            aten_gm = self._trace()
            return rebuild_ir(aten_gm, "inference")

    def _trace(self) -> torch.fx.GraphModule:
        """AOTAutograd's inference graph for Dynamo's graph, as the backend gave it to braze."""
        eager = self.aot["eager_outputs"](self.gm)
        captured = []

        def capture(aten_gm, _inputs):
            self.aot["eager_strides"](aten_gm, "inference", eager)
            choose_layouts(aten_gm)
            captured.append(aten_gm)
            return make_boxed_func(aten_gm.forward)

        fake_mode = FakeTensorMode()
        with fake_mode:
            fakes = [torch.empty_strided(shape, stride, dtype=dtype, device=device, requires_grad=grad)
                     for shape, stride, dtype, device, grad in self.inputs]
        with torch._guards.tracing(torch._guards.TracingContext(fake_mode)):
            aot_autograd(fw_compiler=capture, inference_compiler=capture, decompositions=table(config.fallback_random),
                         partition_fn=self.aot["partition"], keep_inference_input_mutations=True)(self.gm, fakes)
        if len(captured) != 1:
            raise RuntimeError(f"braze: tracing the graph again gave {len(captured)} ATen graphs, not one "
                               "inference graph: its IR cannot be rebuilt")
        return captured[0]
