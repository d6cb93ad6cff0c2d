"""exp+cumsum (fp32 8192x4096, along rows) on the H100: braze's scan kernel with its running value and chunk
scans in float64 (as generated for rows longer than 32) against the same kernel in float32, at other
XBLOCK/RBLOCK/warps, and one chunk per row (no running value). Prints us, % of copy, and the largest error
against a float64 cumsum, relative to the row's total, next to eager's (CUDA float32) error.
python .device/scanvariants.py"""
import torch, triton
from probemodule import CHECK, load

def kernel(name, acc, persistent):
    cast = ".to(tl.float64)" if acc == "f64" else ""
    back = "\n        scanned = scanned.to(tl.float32)" if acc == "f64" else ""
    if persistent:
        return f'''
@triton.jit
def {name}(in0, out0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r0 = tl.arange(0, RBLOCK)[None, :]
    chunk = libdevice.exp(tl.load(in0 + (r0 + x0 * 4096))){cast}
    scanned = tl.associative_scan(chunk, 1, add){back.replace("        ", "    ")}
    tl.store(out0 + (r0 + x0 * 4096), scanned)
'''
    return f'''
@triton.jit
def {name}(in0, out0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    rbase = tl.arange(0, RBLOCK)[None, :]
    running = tl.full([XBLOCK, 1], 0, tl.{"float64" if acc == "f64" else "float32"})
    for roffset in range(0, 4096, RBLOCK):
        r0 = roffset + rbase
        chunk = libdevice.exp(tl.load(in0 + (r0 + x0 * 4096))){cast}
        scanned = tl.associative_scan(chunk, 1, add) + running
        running = running + tl.reduce(chunk, 1, add)[:, None]{back}
        tl.store(out0 + (r0 + x0 * 4096), scanned)
'''

KERNELS = {f"{acc}_{'p' if p else 'l'}": (acc, p) for acc in ("f64", "f32") for p in (False, True)}
SOURCE = '''
import triton
import triton.language as tl
from triton.language.extra import libdevice

@triton.jit
def add(a, b):
    return a + b
''' + "".join(kernel(k, acc, p) for k, (acc, p) in KERNELS.items())
mod = load("scan_variants", SOURCE)
dev = "cpu" if CHECK else "cuda"
rows, cols = (4 if CHECK else 8192), 4096
x = torch.randn(rows, cols, device=dev)
if CHECK:
    triton.testing.do_bench = lambda fn: (fn(), 1.0)[1]
ref = x.double().exp().cumsum(1)
scale = ref[:, -1:]
out, src = torch.empty_like(x), torch.empty_like(x)
copy_ms = triton.testing.do_bench(lambda: src.copy_(x))
print(f"copy {copy_ms * 1e3:.1f} us = {2 * x.numel() * 4 / copy_ms / 1e6:.0f} GB/s")
eager = x.exp().cumsum(1)
print(f"eager: {triton.testing.do_bench(lambda: x.exp().cumsum(1)) * 1e3:.1f} us, "
      f"error {((eager.double() - ref).abs() / scale).max().item():.2e}")
SHAPES = {False: [(2, 1024, 8), (1, 1024, 4), (1, 1024, 8), (2, 1024, 4), (4, 512, 4), (1, 2048, 8), (2, 2048, 16)],
          True: [(1, 4096, 8), (1, 4096, 16), (2, 4096, 16), (1, 4096, 32)]}
for name, (acc, persistent) in KERNELS.items():
    for xblock, rblock, warps in SHAPES[persistent]:
        fn = lambda: getattr(mod, name)[(rows // xblock,)](x, out, XBLOCK=xblock, RBLOCK=rblock, num_warps=warps)
        try:
            fn()
        except Exception as e:  # (too many registers, shared memory)
            print(f"{name} {xblock}x{rblock} {warps} warps: failed, {type(e).__name__} {str(e)[:300]}")
            continue
        err = ((out.double() - ref).abs() / scale).max().item()
        ms = triton.testing.do_bench(fn)
        print(f"{acc} {'one chunk' if persistent else 'looped'} XBLOCK {xblock} RBLOCK {rblock} {warps} warps: "
              f"{ms * 1e3:.1f} us, {copy_ms / ms * 100:.0f}% of copy, error {err:.2e}")
