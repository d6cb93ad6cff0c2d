"""Where braze's own cold-compile time goes on the GPU: per-phase timings of each graph and each Triton
compile job's time in its worker (fresh braze/Triton caches).
python .device/compileprof.py llama:infer,gpt2:infer"""
import os, sys, tempfile, time
os.environ["BRAZE_CACHE_DIR"] = tempfile.mkdtemp()
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, ".")
import torch
import braze
from braze.backend import Recording
from braze.codegen.triton import pool, worker
from benchmarks import model_zoo
from benchmarks.models import _warm_up

jobs = {}
_write, _read = worker.write_message, worker.read_message
def write(stream, job):
    if isinstance(job, dict) and "fn" in job:
        jobs[job["id"]] = [job["fn"], job["path"], time.perf_counter(), None]
    return _write(stream, job)
def read(stream):
    answer = _read(stream)
    if answer is not None and answer[0] in jobs:
        jobs[answer[0]][3] = time.perf_counter()
    return answer
worker.write_message, worker.read_message = write, read

_warm_up("cuda", ["braze"])
for spec in sys.argv[1].split(","):
    name, mode = spec.split(":")
    case = model_zoo.case(name, False)
    model = model_zoo.build(case, "cuda")
    step = model_zoo.Step(case, model, mode, "cuda")
    step(model); torch.cuda.synchronize()
    torch._dynamo.reset(); jobs.clear()
    with Recording() as r:
        t0 = time.perf_counter()
        step(torch.compile(model, backend="braze")); torch.cuda.synchronize()
        total = time.perf_counter() - t0
    own = sum(sum(g.timings.values()) for g in r.graphs) / 1000
    print(f"== {name} {mode}: first call {total:.2f} s, braze own {own:.2f} s, workers {pool.workers()}")
    for g in r.graphs:
        print(f"  {g.name} {g.kind} kernels {len(g.kernels)} nodes {g.node_count}: "
              + ", ".join(f"{k} {v:.0f}" for k, v in g.timings.items()))
    done = [j for j in jobs.values() if j[3]]
    if done:
        first = min(j[2] for j in done)
        secs = sorted((j[3] - j[2] for j in done), reverse=True)
        print(f"  jobs {len(done)}: sum {sum(secs):.2f} s, span {max(j[3] for j in done) - first:.2f} s, "
              f"slowest {' '.join(f'{s:.2f}' for s in secs[:8])}, median {secs[len(secs)//2]:.2f}")
        ranked = sorted(done, key=lambda j: j[2] - j[3])
        for fn, path, a, b in ranked[:5]:
            print(f"    {fn} {os.path.getsize(path)} B module, {b - a:.2f} s, started at +{a - first:.2f}")
        if "--source" in sys.argv:
            print(open(ranked[0][1]).read())
    del model, step
    torch._dynamo.reset(); torch.cuda.empty_cache()
