"""Column sum (fp32 8192x8192 -> 8192) on the H100: braze's split column kernel (each program sums RCHUNK
rows of XBLOCK columns in [RBLOCK, XBLOCK] tiles, then a finish kernel adds the RSPLIT partials) at other
tile widths, tile sizes, splits and warps. Prints us (both kernels), % of copy; the read of the same bytes
by a plain contiguous row sum as the ceiling.
python .device/colvariants.py"""
import itertools
import torch, triton
import triton.language as tl


@triton.jit
def add(a, b):
    return a + b


@triton.jit
def split(in0, ws0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr, RCHUNK: tl.constexpr, N: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    rbase = tl.arange(0, RBLOCK)[:, None]
    rstart = tl.program_id(1) * RCHUNK
    acc0 = tl.full([RBLOCK, XBLOCK], 0.0, tl.float32)
    for roffset in range(0, RCHUNK, RBLOCK):
        acc0 = acc0 + tl.load(in0 + ((rstart + roffset + rbase) * N + xindex))
    tl.store(ws0 + (tl.program_id(1) * N + xindex), tl.reduce(acc0, 0, add, keep_dims=True))


@triton.jit
def finish(ws0, out0, XBLOCK: tl.constexpr, SBLOCK: tl.constexpr, N: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    sindex = tl.arange(0, SBLOCK)[None, :]
    tl.store(out0 + xindex, tl.reduce(tl.load(ws0 + (sindex * N + xindex)), 1, add, keep_dims=True))


@triton.jit
def rowsum(in0, out0, RBLOCK: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, RBLOCK)
    acc = tl.zeros([RBLOCK], tl.float32)
    for off in range(0, N, RBLOCK):
        acc += tl.load(in0 + tl.program_id(0) * N + off + r)
    tl.store(out0 + tl.program_id(0), tl.sum(acc, 0))


N = 8192
x = torch.randn(N, N, device="cuda")
ref = x.double().sum(0)
src = torch.empty_like(x)
copy_ms = triton.testing.do_bench(lambda: src.copy_(x))
print(f"copy {copy_ms * 1e3:.1f} us = {2 * x.numel() * 4 / copy_ms / 1e6:.0f} GB/s")
rows = torch.empty(N, device="cuda")
ms = triton.testing.do_bench(lambda: rowsum[(N,)](x, rows, RBLOCK=2048, N=N, num_warps=4))
print(f"read ceiling (contiguous row sums): {ms * 1e3:.1f} us, {x.numel() * 4 / ms / 1e6:.0f} GB/s read, "
      f"{copy_ms / 2 / ms * 100:.0f}% of copy")
out = torch.empty(N, device="cuda")
results = []
for xblock, tile, rsplit, warps in itertools.product((64, 128, 256, 512, 1024), (2048, 4096, 8192),
                                                      (4, 8, 16, 32), (4, 8, 16)):
    rblock = tile // xblock
    if rblock < 1 or N // rsplit < rblock:
        continue
    ws = torch.empty(rsplit, N, device="cuda")
    def fn():
        split[(N // xblock, rsplit)](x, ws, XBLOCK=xblock, RBLOCK=rblock, RCHUNK=N // rsplit, N=N, num_warps=warps)
        finish[(N // 512,)](ws, out, XBLOCK=512, SBLOCK=rsplit, N=N, num_warps=8)
    try:
        fn()
    except Exception as e:
        print(f"{xblock} x {rblock}, {rsplit} splits, {warps} warps: failed {type(e).__name__}")
        continue
    err = ((out.double() - ref).abs() / ref.abs().clamp_min(1)).max().item()
    ms = triton.testing.do_bench(fn)
    results.append((ms, xblock, rblock, rsplit, warps, err))
for ms, xblock, rblock, rsplit, warps, err in sorted(results)[:25] + [r for r in results if r[1:5] == (64, 32, 8, 8)]:
    print(f"XBLOCK {xblock} RBLOCK {rblock} RSPLIT {rsplit} {warps} warps: {ms * 1e3:.1f} us, "
          f"{copy_ms / 2 / ms * 100:.0f}% of copy, error {err:.1e}")
