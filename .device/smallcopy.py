"""Device-to-device copy bandwidth on the H100 by size (do_bench median, L2 cleared), beside add+relu's 2x32x128x512
fp32 (relu(x + y): 32 MiB in, 16 MiB out) through eager, Inductor and braze: is that row bound by its size?
python .device/smallcopy.py"""
import torch, triton
import braze  # noqa: F401

for mib in (16, 24, 64, 256, 1024):
    x = torch.randn(mib << 18, device="cuda")
    y = torch.empty_like(x)
    ms = triton.testing.do_bench(lambda: y.copy_(x))
    print(f"copy {mib} MiB -> {mib} MiB: {ms * 1e3:.1f} us, {2 * x.numel() * 4 / ms / 1e6:.0f} GB/s")
x, y = (torch.randn(2, 32, 128, 512, device="cuda") for _ in range(2))
fn = lambda x, y: torch.relu(x + y)  # noqa: E731
for label, f in (("eager", fn), ("inductor", torch.compile(fn)), ("braze", torch.compile(fn, backend="braze"))):
    f(x, y)
    ms = triton.testing.do_bench(lambda: f(x, y))
    print(f"add+relu {label}: {ms * 1e3:.1f} us, {3 * x.numel() * 4 / ms / 1e6:.0f} GB/s")
