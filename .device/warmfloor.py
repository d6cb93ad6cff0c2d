"""GPT-2 inference's warm start on this machine, split by layer: each a fresh process timing the first
compiled call (minus one eager call) with Dynamo alone (backend 'eager'), Dynamo + AOTAutograd ('aot_eager'),
braze and Inductor, the latter two first cold (filling fresh caches) then warm.
python .device/warmfloor.py"""
import json, os, subprocess, sys, tempfile, time

CHILD = r'''
import json, sys, time
sys.path.insert(0, ".")
import torch
import braze  # noqa: F401
from benchmarks import model_zoo
from benchmarks.models import eager, first_call
backend = sys.argv[1]
case = model_zoo.case("gpt2", False)
step = model_zoo.Step(case, model_zoo.build(case, "cuda"), "infer", "cuda")
expected, eager_ms = eager(step)
fn = torch.compile(step.model) if backend == "inductor" else torch.compile(step.model, backend=backend)
r = first_call(step, fn, expected, eager_ms)
print(json.dumps({"compile_s": r["compile_s"], "cos": r["cos"]}))
'''

caches = {k: tempfile.mkdtemp() for k in ("BRAZE_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")}
env = {**os.environ, **caches}
for backend, label in (("eager", "Dynamo only"), ("aot_eager", "Dynamo + AOTAutograd"), ("braze", "braze cold"),
                       ("braze", "braze warm"), ("braze", "braze warm again"), ("inductor", "Inductor cold"),
                       ("inductor", "Inductor warm"), ("inductor", "Inductor warm again")):
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, backend], env=env, capture_output=True, text=True)
    line = [l for l in p.stdout.splitlines() if l.startswith("{")]
    print(f"{label}: {json.loads(line[-1]) if line else p.stderr[-800:]}  (process {time.perf_counter() - t:.1f} s)", flush=True)
