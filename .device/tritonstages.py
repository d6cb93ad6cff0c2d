"""What one Triton compile job of braze's costs, stage by stage: braze compiles a model (fresh caches),
its jobs are recorded, then a sample is compiled again one at a time in a fresh Triton cache, timing
Triton's stages (ast->ttir, ttgir, llir, ptx, cubin) and the C launcher, with line info on and off.
python .device/tritonstages.py bert:train [sample]"""
import os, sys, tempfile, time, collections, statistics
os.environ["BRAZE_CACHE_DIR"] = tempfile.mkdtemp()
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, ".")
import torch
import braze
from braze.backend import Recording
from braze.codegen.triton import pool, worker
from benchmarks import model_zoo
from benchmarks.models import _warm_up

jobs, done = [], {}
_submit = pool.submit
def submit(job):
    jobs.append(dict(job)); t = time.perf_counter()
    f = _submit(job)
    if f is not None:
        f.add_done_callback(lambda _f, i=len(jobs) - 1: done.__setitem__(i, time.perf_counter() - t))
    return f
pool.submit = submit
import braze.codegen.triton.build as bld
bld.pool.submit = submit

_warm_up("cuda", ["braze"])
name, mode = sys.argv[1].split(":")
sample = int(sys.argv[2]) if len(sys.argv) > 2 else 24
case = model_zoo.case(name, False)
model = model_zoo.build(case, "cuda")
step = model_zoo.Step(case, model, mode, "cuda")
step(model); torch.cuda.synchronize()
torch._dynamo.reset()
t0 = time.perf_counter()
with Recording() as r:
    step(torch.compile(model, backend="braze")); torch.cuda.synchronize()
print(f"{name} {mode}: first call {time.perf_counter() - t0:.2f} s; {len(jobs)} pool jobs, workers {pool.workers()}; "
      f"submit->done median {statistics.median(done.values()):.2f} s, max {max(done.values()):.2f}")
for g in r.graphs:
    print(f"  {g.kind}: " + ", ".join(f"{k} {v:.0f} ms" for k, v in g.timings.items()))

import triton
from triton.backends.nvidia.compiler import CUDABackend
stage_t = collections.defaultdict(float)
_add = CUDABackend.add_stages
def add_stages(self, stages, options, language):
    _add(self, stages, options, language)
    for k, fn in list(stages.items()):
        def timed(src, md, fn=fn, k=k):
            t = time.perf_counter(); out = fn(src, md); stage_t[k] += time.perf_counter() - t; return out
        stages[k] = timed
CUDABackend.add_stages = add_stages

def run(label, picks):
    stage_t.clear()
    triton.knobs.cache.dir = tempfile.mkdtemp()
    worker._modules.clear()
    total, launcher, per = 0.0, 0.0, []
    for j in picks:
        t = time.perf_counter()
        fn = worker._function(j["path"], j["module"], j["fn"])
        from triton.backends.compiler import GPUTarget
        k = triton.compile(worker.ast_source(fn, j["signature"], j["constexprs"]), target=GPUTarget("cuda", j["arch"], 32),
                           options=j["options"])
        t1 = time.perf_counter(); worker._build_launcher(k); t2 = time.perf_counter()
        launcher += t2 - t1; total += t2 - t; per.append(t2 - t)
    n = len(picks)
    print(f"{label}: {n} jobs serial, mean {total / n * 1000:.0f} ms (median {statistics.median(per) * 1000:.0f}, "
          f"max {max(per) * 1000:.0f}); launcher {launcher / n * 1000:.0f} ms; stages (mean ms): "
          + ", ".join(f"{k} {v / n * 1000:.0f}" for k, v in stage_t.items()))

picks = jobs[:: max(1, len(jobs) // sample)][:sample]
run("warm-up pass (discard)", picks[:2])
run("line info on", picks)
triton.knobs.compilation.disable_line_info = True
run("line info off", picks)
triton.knobs.compilation.disable_line_info = False
big = sorted(range(len(jobs)), key=lambda i: -done.get(i, 0))[:4]
run("the 4 slowest in the pool", [jobs[i] for i in big])
print("slowest pool jobs:", ", ".join(f"{jobs[i]['fn']} {done[i]:.2f}s" for i in big))
