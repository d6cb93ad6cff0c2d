"""One kernel's launch through braze's launcher (native.py) and through Triton's C launcher, called
directly (no wrapper, no Dynamo), alternating rounds of 20000 launches, best and median of 9.
python .device/launchmicro.py"""
import os, sys, tempfile, time, copy
os.environ["BRAZE_CACHE_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, ".")
import torch, triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from braze.codegen.triton import native
from braze.codegen.triton.worker import ast_source

@triton.jit
def add(a, b, out, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(a + i) + tl.load(b + i))

sig = {"a": "*fp32", "b": "*fp32", "out": "*fp32", "BLOCK": "constexpr"}
k1 = triton.compile(ast_source(add, sig, {"BLOCK": 1024}), target=GPUTarget("cuda", 90, 32))
k1._init_handles()
k2 = triton.compile(ast_source(add, sig, {"BLOCK": 1024}), target=GPUTarget("cuda", 90, 32))
assert native.prepare(k2, 0), native._state
a, b, c = (torch.randn(4096, device="cuda") for _ in range(3))
stream = torch._C._cuda_getCurrentRawStream(0)
run, fn1, meta = k1.run.launch, k1.function, k1.packed_metadata
launch, fn2 = native.launch_function(), k2.function
threads, shared, extra = k2.braze_launch
N = 20000
def triton_round():
    for _ in range(N): run(4, 1, 1, stream, fn1, False, False, None, None, meta, None, None, None, a, b, c, 1024)
def native_round():
    for _ in range(N): launch(fn2, 4, 1, 1, threads, shared, stream, 0, extra, a, b, c)
def empty_round():
    for _ in range(N): pass
res = {"triton": [], "braze": [], "loop": []}
for f in (triton_round, native_round): f(); torch.cuda.synchronize()
for _ in range(9):
    for name, f in (("triton", triton_round), ("braze", native_round), ("loop", empty_round)):
        torch.cuda.synchronize(); t = time.perf_counter(); f(); torch.cuda.synchronize()
        res[name].append((time.perf_counter() - t) / N * 1e6)
torch.testing.assert_close(c, a + b)
for name, v in res.items():
    v.sort(); print(f"{name}: best {v[0]:.2f} us, median {v[4]:.2f} us per launch")
