"""Where a training step's host time goes beyond its GPU time: per compiler, the step's CUDA runtime calls
that block the host (stream/device synchronizations, memcpys) and the ATen calls behind them, from one
profiled step; braze's wrapper lines that move a host scalar to the GPU. python .device/hostsync.py bert,gpt2"""
import collections
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import braze
from benchmarks import model_zoo

BLOCKING = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy", "cudaMemcpyAsync", "cudaEventSynchronize",
            "aten::_local_scalar_dense", "aten::item", "aten::to", "aten::copy_", "aten::_to_copy", "aten::pin_memory")
for name in sys.argv[1].split(","):
    case = model_zoo.case(name, False)
    model = model_zoo.build(case, "cuda")
    step = model_zoo.Step(case, model, "train", "cuda")
    with braze.backend.Recording() as rec:
        fns = {"braze": torch.compile(model, backend="braze"), "inductor": torch.compile(model)}
        for f in fns.values():
            for _ in range(3):
                step(f)
    for g in rec.graphs:
        moves = [line.strip() for line in g.wrapper.splitlines() if ".to(" in line]
        print(f"== {name} braze {g.kind}: host scalars moved per call: {moves}")
    for label, f in fns.items():
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                step(f)
            torch.cuda.synchronize()
        calls, spent = collections.Counter(), collections.Counter()
        for e in prof.events():
            if e.name in BLOCKING:
                calls[e.name] += 1
                spent[e.name] += e.cpu_time_total / 1000 / 3
        print(f"== {name} {label}: " + ", ".join(f"{k} x{calls[k] // 3} {spent[k]:.2f} ms" for k in sorted(calls)))
