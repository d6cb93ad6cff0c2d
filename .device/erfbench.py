"""Is LayerNorm+GELU (bf16 16384x4096) on the H100 bound by libdevice's erf? braze's row kernel as generated, with
erf (MODE 0), with erf replaced by the identity (MODE 1, wrong values: the bound without erf), and with a single-path
stand-in of erfc's cost (MODE 2: |z|, a degree-10 polynomial, exp2, a select; wrong values: its cost only).
python .device/erfbench.py"""
import torch, triton, triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def add(a, b):
    return a + b


@triton.jit
def ln_gelu(in0, in1, in2, out0, MODE: tl.constexpr, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r0 = tl.arange(0, RBLOCK)[None, :]
    tmp1 = tl.load(in0 + (r0 + xindex * 4096)).to(tl.float32)
    tmp3 = tl.math.div_rn(tl.reduce(tmp1, 1, add, keep_dims=True), 4096.0)
    tmp4 = tmp1 - tmp3
    tmp5 = tl.reduce(tmp4, 1, add, keep_dims=True)
    tmp6 = tl.reduce(tmp4 * tmp4, 1, add, keep_dims=True)
    tmp7 = tmp3 + tl.math.div_rn(tmp5, 4096.0)
    tmp8 = tmp6 - tmp5 * tl.math.div_rn(tmp5, 4096.0)
    tmp12 = tl.math.div_rn(1.0, tl.sqrt_rn(tl.math.div_rn(tmp8, 4096.0) + 1e-05))
    tmp19 = (tmp1 - tmp7) * tmp12 * tl.load(in1 + r0).to(tl.float32) + tl.load(in2 + r0).to(tl.float32)
    tmp21 = tmp19.to(tl.bfloat16).to(tl.float32)
    z = tmp21 * 0.7071067811865476
    if MODE == 0:
        one_plus = 1.0 + libdevice.erf(z)
    elif MODE == 1:
        one_plus = 1.0 + z
    else:
        t = tl.minimum(tl.abs(z), 4.5)
        p = -0.0001 * t + 0.001
        p = p * t - 0.003
        p = p * t + 0.004
        p = p * t - 0.005
        p = p * t + 0.006
        p = p * t - 0.007
        p = p * t + 0.008
        p = p * t - 1.4
        p = p * t - 1.6
        p = p * t + 0.0
        e = tl.exp2(p)
        one_plus = tl.where(z < 0, e, 2.0 - e)
    tl.store(out0 + (r0 + xindex * 4096), (0.5 * tmp21 * one_plus).to(tl.bfloat16))


x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)
w, b = (torch.randn(4096, device="cuda", dtype=torch.bfloat16) for _ in range(2))
out = torch.empty_like(x)
src = torch.empty_like(x)
copy_ms = triton.testing.do_bench(lambda: src.copy_(x))
print(f"copy {copy_ms * 1e3:.1f} us = {2 * x.numel() * 2 / copy_ms / 1e6:.0f} GB/s")
for mode in (0, 1, 2):
    for xb, warps in ((8, 16), (4, 8), (2, 8), (1, 4)):
        ms = triton.testing.do_bench(lambda: ln_gelu[(16384 // xb,)](x, w, b, out, MODE=mode, XBLOCK=xb, RBLOCK=4096,
                                                                     num_warps=warps))
        print(f"mode {mode} XBLOCK {xb} warps {warps}: {ms * 1e3:.1f} us, {copy_ms / ms * 100:.0f}% of copy")
ref = torch.nn.functional.gelu(torch.nn.functional.layer_norm(x.float(), (4096,), w.float(), b.float()))
ln_gelu[(2048,)](x, w, b, out, MODE=0, XBLOCK=8, RBLOCK=4096, num_warps=16)
print("mode 0 max error vs float32 reference", (out.float() - ref).abs().max().item())
