"""Host µs per matmul call on CUDA (calls issued without sync; GPU work smaller than host work)."""
import time, torch, sys
import torch.nn.functional as F
a = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16)
w = torch.randn(768, 768, device="cuda", dtype=torch.bfloat16)
b = torch.randn(768, device="cuda", dtype=torch.bfloat16)
out = torch.empty(4096, 768, device="cuda", dtype=torch.bfloat16)
x32 = torch.randn(64, 64, device="cuda"); w32 = torch.randn(64, 64, device="cuda"); b32 = torch.randn(64, device="cuda")
aten = torch.ops.aten
cases = {
    "aten.mm.default bf16": lambda: aten.mm.default(a, w.t()),
    "aten.addmm.default bf16": lambda: aten.addmm.default(b, a, w.t()),
    "torch.mm bf16": lambda: torch.mm(a, w.t()),
    "torch.mm out= bf16": lambda: torch.mm(a, w.t(), out=out),
    "F.linear bf16": lambda: F.linear(a, w, b),
    "torch.empty_strided": lambda: torch.empty_strided((4096, 768), (768, 1), device="cuda", dtype=torch.bfloat16),
    "aten.mm.default fp32 64x64": lambda: aten.mm.default(x32, w32),
    "aten.addmm.default fp32 64x64": lambda: aten.addmm.default(b32, x32, w32),
    "x + 1 fp32 64x64": lambda: x32 + 1,
}
for rnd in range(2):
    for name, f in cases.items():
        for _ in range(50): f()
        torch.cuda.synchronize()
        n = 2000
        t = time.perf_counter()
        for _ in range(n): f()
        host = (time.perf_counter() - t) / n * 1e6
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t) / n * 1e6
        print(f"{name:32s} host {host:6.1f} us  wall {wall:6.1f} us")
print(torch.backends.cuda.preferred_blas_library())
