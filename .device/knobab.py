"""A/B of one braze knob on whole models: eager, Inductor, braze as configured and braze with KNOB off, timed in
interleaved rounds (do_bench), plus host ms per call (calls issued without sync) and GPU kernel sum.
python knobab.py bert,llama infer group_matmuls   (mode infer32: inference in float32, no autocast)"""
import sys, time, statistics, torch
sys.path.insert(0, ".")
import braze
from benchmarks import model_zoo
from benchmarks.models import time_ms
from torch.profiler import profile, ProfilerActivity

def host_ms(step, fn, n=30):
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): step(fn)
    host = (time.perf_counter() - t) / n * 1000
    torch.cuda.synchronize(); wall = (time.perf_counter() - t) / n * 1000
    return host, wall

def gpu_sum(step, fn):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5): step(fn)
        torch.cuda.synchronize()
    tot = {}; n = 0
    for e in prof.events():
        if e.device_type.name == "CUDA":
            n += 1
            key = "gen" if e.name.startswith("triton") else "other"
            tot[key] = tot.get(key, 0) + e.device_time_total / 5 / 1000
    return tot, n // 5

class Float32Step(model_zoo.Step):
    def __call__(self, fn):
        with torch.no_grad():
            return self.case.output(self.case.call(fn, self.kwargs)), None

knob = sys.argv[3]
for name in sys.argv[1].split(","):
    mode = sys.argv[2]
    case = model_zoo.case(name, False)
    model = model_zoo.build(case, "cuda")
    step = (Float32Step(case, model, "infer", "cuda") if mode == "infer32"
            else model_zoo.Step(case, model, mode, "cuda"))
    torch._dynamo.reset()
    fns = {"eager": model, "inductor": torch.compile(model),
           "braze": torch.compile(model, backend="braze"),
           f"braze_no_{knob}": torch.compile(model, backend="braze", options={knob: False})}
    for k, f in fns.items():
        for _ in range(3): step(f)
    torch.cuda.synchronize()
    ref = step(model)[0].float().flatten()
    for k, f in fns.items():
        out = step(f)[0].float().flatten()
        print(f"{name} {k:14s} cos to eager {torch.nn.functional.cosine_similarity(out, ref, dim=0).item():.6f}", flush=True)
    rounds = {k: [] for k in fns}
    for r in range(5):
        for k, f in fns.items():
            rounds[k].append(time_ms(step, f))
    for k, f in fns.items():
        h, w = host_ms(step, f)
        g, n = gpu_sum(step, f)
        print(f"{name} {mode} {k:10s} do_bench {statistics.median(rounds[k]):7.2f} ms rounds "
              f"{' '.join(f'{x:.2f}' for x in rounds[k])} | host {h:6.2f} wall {w:6.2f} | gpu "
              f"{' '.join(f'{a} {b:.2f}' for a, b in sorted(g.items()))} launches {n}", flush=True)
    del fns, model, step
    torch._dynamo.reset(); torch.cuda.empty_cache()
