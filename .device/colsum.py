"""Column sums (x.sum(0)) on the H100: braze's column kernel ([RBLOCK, XBLOCK] tiles, one program per block of
columns) at its closed-form tile (A: XBLOCK halved from 64 while programs < 2 per SM, 2048-element tiles) against
B (halved while programs < 1 per SM, 4096-element tiles) and a few fixed tiles, on several shapes.
Prints us and % of the copy bandwidth (bytes read / (copy bytes moved / copy time)).
python .device/colsum.py"""
import torch, triton, triton.language as tl


@triton.jit
def add(a, b):
    return a + b


@triton.jit
def column(in0, out0, ROWS: tl.constexpr, COLS: tl.constexpr, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < COLS
    rbase = tl.arange(0, RBLOCK)[:, None]
    acc0 = tl.full([RBLOCK, XBLOCK], 0.0, tl.float32)
    for roffset in range(0, ROWS, RBLOCK):
        rindex = roffset + rbase
        acc0 += tl.load(in0 + (rindex * COLS + xindex), (rindex < ROWS) & xmask, other=0.0)
    tl.store(out0 + xindex, tl.reduce(acc0, 0, add, keep_dims=True), xmask)


def closed_form(cols, rows, programs_min, tile):
    xblock = min(64, triton.next_power_of_2(cols))
    while xblock > 16 and triton.cdiv(cols, xblock) < programs_min:
        xblock //= 2
    return xblock, min(triton.next_power_of_2(rows), max(1, tile // xblock))


def warps(elements):
    return max(1, min(8, elements // 256))


big = torch.randn(1 << 26, device="cuda")
src = torch.empty_like(big)
copy_ms = triton.testing.do_bench(lambda: src.copy_(big))
copy_gbs = 2 * big.numel() * 4 / copy_ms / 1e6
print(f"copy {copy_ms * 1e3:.1f} us = {copy_gbs:.0f} GB/s")
del big, src
for rows, cols in ((8192, 8192), (4096, 32000), (16384, 8192), (2048, 16384), (32768, 5120)):
    x = torch.randn(rows, cols, device="cuda")
    out = torch.empty(cols, device="cuda")
    ref = x.double().sum(0)
    configs = {"A (now)": closed_form(cols, rows, 264, 2048), "B": closed_form(cols, rows, 132, 4096)}
    for extra in ((32, 128), (64, 64), (16, 256), (32, 64)):
        configs.setdefault(f"{extra}", extra)
    ms = triton.testing.do_bench(lambda: torch.sum(x, 0, out=out))
    print(f"{rows}x{cols} torch.sum: {ms * 1e3:.1f} us, {x.numel() * 4 / ms / 1e6 / copy_gbs * 100:.0f}% of copy")
    for label, (xb, rb) in configs.items():
        fn = lambda: column[(triton.cdiv(cols, xb),)](x, out, ROWS=rows, COLS=cols, XBLOCK=xb, RBLOCK=rb,
                                                      num_warps=warps(xb * rb))
        fn()
        err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
        ms = triton.testing.do_bench(fn)
        print(f"{rows}x{cols} {label} XBLOCK {xb} RBLOCK {rb} warps {warps(xb * rb)}: {ms * 1e3:.1f} us, "
              f"{x.numel() * 4 / ms / 1e6 / copy_gbs * 100:.0f}% of copy (rel err {err:.1e})")
    del x
