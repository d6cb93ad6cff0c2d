"""GPU kernel time of one training step, Inductor against braze, by kernel: where a model's gap is.
python .device/trainprof.py llama"""
import sys, collections, torch
sys.path.insert(0, ".")
import braze  # noqa: F401
from benchmarks import model_zoo
from torch.profiler import profile, ProfilerActivity

name = sys.argv[1]
case = model_zoo.case(name, False)
model = model_zoo.build(case, "cuda")
step = model_zoo.Step(case, model, "train", "cuda")
fns = {"inductor": torch.compile(model), "braze": torch.compile(model, backend="braze")}
for f in fns.values():
    for _ in range(3):
        step(f)
torch.cuda.synchronize()
for label, f in fns.items():
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step(f)
        torch.cuda.synchronize()
    per = collections.Counter()
    count = collections.Counter()
    for e in prof.events():
        if e.device_type.name == "CUDA":
            key = e.name[:90]
            per[key] += e.device_time_total / 3 / 1000
            count[key] += 1
    total = sum(per.values())
    gen = sum(v for k, v in per.items() if k.startswith("triton"))
    print(f"== {name} train {label}: GPU {total:.2f} ms per step, generated kernels {gen:.2f} ms, "
          f"launches {sum(count.values()) // 3}")
    for k, v in per.most_common(16):
        print(f"   {v:7.3f} ms  x{count[k] // 3:4d}  {k}")
