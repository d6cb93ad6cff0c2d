"""Plain random kernels on the GPU, eager vs Inductor vs braze: dropout(x, 0.1) of 64M bf16, x + randn_like(x)
and x * rand_like(x) of 64M fp32 (do_bench median, % of a 1 GiB copy's rate). python .device/randflat.py"""
import torch, triton
import torch.nn.functional as F
import braze  # noqa: F401

big = torch.empty(1 << 28, device="cuda")
copy = 2 * big.numel() * 4 / triton.testing.do_bench(lambda: big.clone()) / 1e6
print(f"copy 1 GiB: {copy:.0f} GB/s")
cases = [("dropout bf16", lambda x: F.dropout(x, 0.1, training=True), torch.bfloat16),
         ("x + randn_like", lambda x: x + torch.randn_like(x), torch.float32),
         ("x * rand_like", lambda x: x * torch.rand_like(x), torch.float32)]
for name, fn, dtype in cases:
    x = torch.randn(1 << 26, device="cuda", dtype=dtype)
    line = []
    for label, f in (("eager", fn), ("inductor", torch.compile(fn)), ("braze", torch.compile(fn, backend="braze"))):
        f(x)
        ms = triton.testing.do_bench(lambda: f(x), rep=300)
        line.append(f"{label} {ms * 1e3:6.1f} us {2 * x.numel() * x.element_size() / ms / 1e6 / copy * 100:4.0f} %")
    print(f"{name:16s}: " + " | ".join(line))
