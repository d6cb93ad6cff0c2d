"""Embedding backward's atomic adds on the H100: braze's generated scatter kernel (XBLOCK 16384, 4 warps:
192 programs) against smaller blocks, more warps and a 2-D shape (a block of rows x the 768 columns, the id
loaded once per row); whether Triton emits vector reductions (red .v2/.v4) for float32.
python .device/embatomic.py"""
import torch, triton, triton.language as tl

V, H, N = tl.constexpr(30522), tl.constexpr(768), tl.constexpr(4096)


@triton.jit
def flat(ids, grad, out, XBLOCK: tl.constexpr):
    x = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    m = x < N * H
    row, col = x // H, x % H
    i = tl.load(ids + row, m)
    g = tl.load(grad + x, m)
    tl.atomic_add(out + (col + i * H), g, mask=m, sem="relaxed")


@triton.jit
def tiled(ids, grad, out, RBLOCK: tl.constexpr, CBLOCK: tl.constexpr):
    r = tl.program_id(0) * RBLOCK + tl.arange(0, RBLOCK)[:, None]
    c = tl.program_id(1) * CBLOCK + tl.arange(0, CBLOCK)[None, :]
    i = tl.load(ids + r)
    g = tl.load(grad + r * H + c)
    tl.atomic_add(out + (c + i * H), g, sem="relaxed")


@triton.jit
def fill(out, XBLOCK: tl.constexpr):
    x = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(out + x, tl.full([XBLOCK], 0.0, tl.float32), x < V * H)


v, h, n = V.value, H.value, N.value
ids = torch.randint(0, v, (n,), device="cuda")
grad = torch.randn(n, h, device="cuda")
out = torch.zeros(v, h, device="cuda")
ref = torch.ops.aten.embedding_dense_backward(grad, ids, v, -1, False)


def check(run):
    out.zero_(); run(); torch.cuda.synchronize()
    return (out - ref).abs().max().item()


def bench(label, run):
    err = check(run)
    ms = triton.testing.do_bench(run)
    print(f"{label}: {ms * 1e3:.1f} us (max err {err:.1e})", flush=True)


ptx_done = False
for xb in (16384, 4096, 2048, 1024, 512):
    for w in (4, 8):
        if xb // (32 * w) < 1:
            continue
        k = lambda xb=xb, w=w: flat[(triton.cdiv(n * h, xb),)](ids, grad, out, XBLOCK=xb, num_warps=w)
        bench(f"flat XBLOCK {xb} warps {w}", k)
        if not ptx_done:
            c = flat.warmup(ids, grad, out, XBLOCK=xb, num_warps=w, grid=(1,))
            ptx = c.asm["ptx"]
            print("  red/atom in ptx:", sorted({l.split()[0] for l in ptx.splitlines() if "red." in l or "atom." in l}))
            ptx_done = True
for rb, cb, w in ((1, 256, 2), (1, 256, 4), (2, 256, 4), (4, 256, 4), (8, 256, 8), (16, 256, 8)):
    k = lambda rb=rb, cb=cb, w=w: tiled[(n // rb, h // cb)](ids, grad, out, RBLOCK=rb, CBLOCK=cb, num_warps=w)
    bench(f"tiled rows {rb} cols {cb} warps {w}", k)
for xb, w in ((16384, 4), (4096, 4), (2048, 8)):
    bench(f"fill XBLOCK {xb} warps {w}", lambda xb=xb, w=w: fill[(triton.cdiv(v * h, xb),)](out, XBLOCK=xb, num_warps=w))
bench("torch zero_", lambda: out.zero_())
