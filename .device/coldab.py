"""A one-kernel graph's cold first call (fresh caches, a new process each), with braze's own launcher
(BRAZE_NATIVE_LAUNCH=1, built in that fresh cache) and with Triton's (=0), alternating.
python .device/coldab.py [rounds]"""
import json, os, subprocess, sys, tempfile

CHILD = r'''
import json, sys, time
sys.path.insert(0, ".")
import torch, braze
from braze.backend import Recording
x = torch.randn(1 << 20, device="cuda"); torch.cuda.synchronize()
f = torch.compile(lambda x: x.sin() ** 2 + x.cos() ** 2, backend="braze")
with Recording() as r:
    t = time.perf_counter(); f(x); torch.cuda.synchronize(); first = time.perf_counter() - t
print(json.dumps({"first_s": round(first, 3), "own_ms": round(sum(sum(g.timings.values()) for g in r.graphs)),
                  "build_ms": round(sum(g.timings.get("codegen+build", 0) for g in r.graphs))}))
'''
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
for _ in range(rounds):
    for native in ("1", "0"):
        env = {**os.environ, "BRAZE_NATIVE_LAUNCH": native,
               **{k: tempfile.mkdtemp() for k in ("BRAZE_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")}}
        p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True)
        line = [l for l in p.stdout.splitlines() if l.startswith("{")]
        print(f"native_launch={native}: {line[-1] if line else p.stderr[-1500:]}", flush=True)
