"""One model's training step under the braze on PYTHONPATH (and Inductor with --inductor): do_bench ms per
step, GPU ms per step (torch profiler) and the generated kernels' share, the top kernels. Run once per tree
for a same-session A/B (.device/stepab.sh).
python .device/stepab.py resnet50 [--inductor] [KERNELS.txt: every generated kernel's ms per step; Inductor's in KERNELS-inductor.txt]"""
import collections
import re
import sys

import torch
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench

import braze  # noqa: F401
from benchmarks import model_zoo

name = sys.argv[1]
case = model_zoo.case(name, False)
model = model_zoo.build(case, "cuda")
step = model_zoo.Step(case, model, "train", "cuda")
fns = {"braze": torch.compile(model, backend="braze")}
if "--inductor" in sys.argv:
    fns["inductor"] = torch.compile(model)
with braze.backend.Recording() as rec:  # braze's graphs: each triton function's ATen ops (OPS)
    for f in fns.values():
        for _ in range(3):
            step(f)
torch.cuda.synchronize()
OPS = {fn: ops.replace("aten.", "") for g in rec.graphs for ops, fn in
       re.findall(r'"""kernel\d+: [^"]*?ops: ([^"]*)"""\s*\n\s*(triton_\w+)\[', g.source)}
for label, f in fns.items():
    ms = do_bench(lambda: step(f), warmup=5, rep=60, return_mode="median")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step(f)
        torch.cuda.synchronize()
    per, count = collections.Counter(), collections.Counter()
    for e in prof.events():
        if e.device_type.name == "CUDA":
            per[e.name[:90]] += e.device_time_total / 3 / 1000
            count[e.name[:90]] += 1
    gen = sum(v for k, v in per.items() if k.startswith("triton"))
    print(f"== {name} train {label}: step {ms:.2f} ms, GPU {sum(per.values()):.2f} ms, generated kernels "
          f"{gen:.2f} ms, launches {sum(count.values()) // 3}")
    generated = [kv for kv in per.most_common() if kv[0].startswith("triton")]
    for k, v in generated[:8]:
        print(f"   {v:7.3f} ms  x{count[k] // 3:4d}  {k}")
    if len(sys.argv) > 2 and sys.argv[-1].endswith(".txt"):
        path = sys.argv[-1] if label == "braze" else sys.argv[-1].replace(".txt", f"-{label}.txt")
        with open(path, "w") as out:
            out.writelines(f"{v:.4f} {count[k] // 3} {k} {OPS.get(k, '')[:150]}\n" for k, v in generated)
