"""Where a cold compile's first call goes, per phase (fresh caches, one process per run):
Dynamo's own timers (torch._dynamo.utils.compile_times), the partitioner, braze's own share,
and a cProfile of braze's GPT-2 training first call written to $OUT.
python .device/coldphases.py gpt2:train:braze gpt2:train:inductor ..."""
import json, os, subprocess, sys, tempfile, time

CHILD = r'''
import cProfile, json, os, sys, time
sys.path.insert(0, ".")
import torch
import braze, braze.backend
from braze.backend import Recording
from torch._functorch import partitioners
from benchmarks import model_zoo
from benchmarks.models import eager, first_call, _warm_up
name, mode, backend = sys.argv[1].split(":")
spent = {"partition": 0.0}
orig = partitioners.min_cut_rematerialization_partition
def timed(*a, **k):
    t = time.perf_counter()
    try:
        return orig(*a, **k)
    finally:
        spent["partition"] += time.perf_counter() - t
braze.backend.min_cut_rematerialization_partition = timed
import torch._inductor.compile_fx as cfx
if hasattr(cfx, "min_cut_rematerialization_partition"):
    cfx.min_cut_rematerialization_partition = timed
partitioners.min_cut_rematerialization_partition = timed
case = model_zoo.case(name, False)
step = model_zoo.Step(case, model_zoo.build(case, "cuda"), mode, "cuda")
_warm_up("cuda", ["braze" if backend != "inductor" else "inductor"])
expected, eager_ms = eager(step)
fn = torch.compile(step.model) if backend == "inductor" else torch.compile(step.model, backend=backend)
prof = cProfile.Profile() if "prof" in sys.argv[2:] else None
with Recording() as rec:
    if prof: prof.enable()
    r = first_call(step, fn, expected, eager_ms)
    if prof: prof.disable()
if prof: prof.dump_stats(os.path.join(os.environ["OUT"], f"{name}_{mode}_{backend}.pstats"))
own = sum(sum(g.timings.values()) for g in rec.graphs) / 1000
phases = {}
for g in rec.graphs:
    for k, v in g.timings.items():
        phases[k] = phases.get(k, 0) + v / 1000
print(torch._dynamo.utils.compile_times(repr="str"), file=sys.stderr)
print(json.dumps({"first_call_s": round(r["compile_s"], 2), "cos": r["cos"], "partition_s": round(spent["partition"], 2),
                  "braze_own_s": round(own, 2), "phases": {k: round(v, 2) for k, v in phases.items()}}))
'''

for spec in sys.argv[1:]:
    caches = {k: tempfile.mkdtemp() for k in ("BRAZE_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")}
    args = spec.split("+")
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD] + args, env={**os.environ, **caches}, capture_output=True, text=True)
    line = [l for l in p.stdout.splitlines() if l.startswith("{")]
    print(f"== {spec}: {json.loads(line[-1]) if line else ''}  (process {time.perf_counter() - t:.1f} s)", flush=True)
    err = p.stderr.splitlines()
    keep = [l for l in err if any(w in l for w in ("compile", "aot", "partition", "trace", "Function", "inductor", "fx_codegen", "backward", "lower"))]
    print("\n".join(keep[-40:]) if line else p.stderr[-3000:], flush=True)
