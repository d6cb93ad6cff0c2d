"""Float32 fmod on the H100: libdevice's fmodf against a division-based exact path (|a / b| < 2^23) with
three ways to reach libdevice for the rest: none (wrong for huge quotients: the bound), a select whose
libdevice call gets (1, 1) on covered lanes, and a block-wide 'any uncovered' branch. Checks each against
torch.fmod bit for bit on random pairs with quotients up to 2^40, zeros, infinities and NaN.
python .device/fmodbench.py"""
import torch, triton, triton.language as tl
import os
if os.environ.get("DEV", "cuda") == "cuda":
    from triton.language.extra import libdevice
else:  # a CPU check of the arithmetic under TRITON_INTERPRET=1
    from braze.codegen.triton.interpret import libdevice, install
    install()


@triton.jit
def any_combine(a, b):
    return a | b


@triton.jit
def fmod_fast(a, b, MODE: tl.constexpr):
    if MODE == 0:
        out = libdevice.fmod(a, b)
    else:
        q = tl.math.div_rn(a, b)
        r = tl.fma(-libdevice.trunc(q), b, a)
        past = (r != 0) & ((r < 0) != (a < 0))
        r = tl.where(past, r + libdevice.copysign(b, a), r)
        r = libdevice.copysign(r, a)
        covered = (tl.abs(q) < 8388608.0) & (tl.abs(b) < float("inf"))
        if MODE == 1:
            out = r
        elif MODE == 2:
            out = tl.where(covered, r, libdevice.fmod(tl.where(covered, 1.0, a), tl.where(covered, 1.0, b)))
        else:
            out = r
            if tl.reduce((~covered).to(tl.int32), None, any_combine) != 0:
                out = tl.where(covered, r, libdevice.fmod(a, b))
    return out


@triton.jit
def two_fmods(x, y, out, n, MODE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask=mask, other=1.0)
    b = tl.load(y + offs, mask=mask, other=1.0)
    tl.store(out + offs, fmod_fast(a, tl.full(a.shape, 7.0, tl.float32), MODE) + fmod_fast(a, b, MODE), mask=mask)


def run(x, y, mode):
    out = torch.empty_like(x)
    two_fmods[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), MODE=mode, BLOCK=1024, num_warps=4)
    return out


import os
DEV = os.environ.get("DEV", "cuda")
n = 1 << (26 if DEV == "cuda" else 12)
g = torch.Generator(device=DEV).manual_seed(0)
x = torch.randn(n, device=DEV, generator=g) * 100
y = torch.randn(n, device=DEV, generator=g) * 3
src = torch.empty_like(x)
bench = triton.testing.do_bench if DEV == "cuda" else (lambda f: (f(), 1.0)[1])
copy_ms = bench(lambda: src.copy_(x))
print(f"copy {copy_ms * 1e3:.1f} us; kernel reads 8 bytes, writes 4 per element")
names = {0: "libdevice fmod", 1: "fast only (bound)", 2: "fast + select (1,1)", 3: "fast + block any"}
for mode in range(4):
    ms = bench(lambda: run(x, y, mode))
    print(f"{names[mode]}: {ms * 1e3:.1f} us = {12 * n / ms / 1e6:.0f} GB/s, {copy_ms * 1.5 / ms * 100:.0f}% of copy")
# exactness: random magnitudes over the whole float32 range, specials mixed in
m = 1 << (24 if DEV == "cuda" else 14)
a = torch.randn(m, device=DEV, generator=g) * torch.exp2(torch.randint(-130, 128, (m,), device=DEV, generator=g).float())
b = torch.randn(m, device=DEV, generator=g) * torch.exp2(torch.randint(-130, 128, (m,), device=DEV, generator=g).float())
close = torch.rand(m, device=DEV, generator=g) < 0.5   # half the pairs with quotients below 2^40
b = torch.where(close, a / torch.exp2(torch.randint(0, 40, (m,), device=DEV, generator=g).float()) * (1 + torch.rand(m, device=DEV, generator=g)), b)
specials = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-45, -1e-45, 3.0, -3.0, 7.0], device=DEV)
a[:100] = specials.repeat(10)
b[:100] = specials.repeat_interleave(10)
want = torch.fmod(a, 7.0) + torch.fmod(a, b)
for mode in range(4):
    got = run(a, b, mode)
    same = (got.view(torch.int32) == want.view(torch.int32)) | (got.isnan() & want.isnan())
    print(f"{names[mode]}: {int((~same).sum())} of {m} differ from torch.fmod bit for bit")
    if not bool(same.all()):
        i = int((~same).nonzero()[0])
        print("   first:", a[i].item(), b[i].item(), got[i].item(), want[i].item())
