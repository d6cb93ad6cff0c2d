"""Host time per call of compiled graphs of many small kernels, braze's own launcher (native_launch)
against Triton's launchers and Inductor, timed in alternating rounds (2000 calls each, best of 7).
python .device/launchbench.py"""
import os, sys, tempfile, time
os.environ["BRAZE_CACHE_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, ".")
import torch
import braze

def chain(x, y):
    outs = []
    for k in range(12):  # reductions keep the kernels apart
        x = (x * 1.01 + y).relu()
        outs.append(x.sum(-1) if k % 2 else x.amax(0))
    return outs

def one(x, y):
    return x + y

x, y = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
for fn in (chain, one):
    variants = {}
    for label, backend, options in (("braze, its launcher", "braze", {"native_launch": True}),
                                    ("braze, Triton's launchers", "braze", {"native_launch": False}),
                                    ("inductor", "inductor", None)):
        f = torch.compile(lambda x, y: fn(x, y), backend=backend, options=options)
        t = time.perf_counter(); f(x, y); torch.cuda.synchronize()
        variants[label] = (f, time.perf_counter() - t, [])
    for f, _, _ in variants.values():
        for _ in range(2000): f(x, y)
    torch.cuda.synchronize()
    for _ in range(7):
        for f, _, times in variants.values():
            t = time.perf_counter()
            for _ in range(2000): f(x, y)
            times.append((time.perf_counter() - t) / 2000)
            torch.cuda.synchronize()
    kernels = len(braze.explain(fn, x, y).kernels)
    for label, (f, cold, times) in variants.items():
        print(f"{fn.__name__} ({kernels} braze kernels) {label}: {min(times) * 1e6:.1f} us per call "
              f"(median {sorted(times)[3] * 1e6:.1f}), first call {cold:.2f} s", flush=True)
