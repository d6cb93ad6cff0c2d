"""A/B of the wrapper's stride checks after matrix products (skipped now; 'checked' rebuilds the old
wrapper by emptying CONTIGUOUS_RESULTS while compiling): host ms per call without sync, and do_bench
in interleaved rounds. python ensureab.py bert,llama infer"""
import sys, time, statistics, torch
sys.path.insert(0, ".")
import braze
from braze.runtime import wrapper
from benchmarks import model_zoo
from benchmarks.models import time_ms

def host_ms(step, fn, n=40):
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): step(fn)
    host = (time.perf_counter() - t) / n * 1000
    torch.cuda.synchronize()
    return host

mode = sys.argv[2]
for name in sys.argv[1].split(","):
    case = model_zoo.case(name, False)
    model = model_zoo.build(case, "cuda")
    step = model_zoo.Step(case, model, mode, "cuda")
    torch._dynamo.reset()
    fns = {"eager": model, "inductor": torch.compile(model), "braze": torch.compile(model, backend="braze")}
    for k in ("eager", "inductor", "braze"):
        for _ in range(3): step(fns[k])
    saved = wrapper.CONTIGUOUS_RESULTS
    wrapper.CONTIGUOUS_RESULTS = ()
    fns["braze_checked"] = torch.compile(model, backend="braze", options={"graph_cache": False})
    for _ in range(3): step(fns["braze_checked"])
    wrapper.CONTIGUOUS_RESULTS = saved
    torch.cuda.synchronize()
    bench = {k: [] for k in fns}; host = {k: [] for k in fns}
    for r in range(5):
        for k, f in fns.items():
            bench[k].append(time_ms(step, f)); host[k].append(host_ms(step, f))
    for k in fns:
        print(f"{name} {mode} {k:14s} do_bench {statistics.median(bench[k]):7.2f} ms | host {statistics.median(host[k]):6.2f} ms "
              f"(rounds {' '.join(f'{x:.2f}' for x in host[k])})", flush=True)
    del fns, model, step
    torch._dynamo.reset(); torch.cuda.empty_cache()
