"""LayerNorm+GELU (bf16 16384x4096) on the H100: the generated row kernel's variance (three row sums: mean, then
the sum and the square sum of x - mean, the first correcting the rounded mean) against the same kernel with
the last two sums as one tuple reduction, without the correction, and one-pass sums; GELU's erf replaced by
1 + z to show what the LayerNorm part costs. Prints us, % of copy, max error against float64.
python .device/lnvariants.py"""
import torch, triton
from probemodule import CHECK, ln_kernel, load, module_head

HEAD = '''
    tmp1 = tl.load(in0 + (r0 + x0 * 4096)).to(tl.float32)
    tmp3 = tl.math.div_rn(tl.reduce(tmp1, 1, add, keep_dims=True), 4096.0)
    tmp4 = tmp1 - tmp3
'''
STATS = {
    "three sums": '''
    tmp5 = tl.reduce(tmp4, 1, add, keep_dims=True)
    tmp6 = tl.reduce(tmp4 * tmp4, 1, add, keep_dims=True)
    tmp7 = tmp3 + tl.math.div_rn(tmp5, 4096.0)
    tmp8 = tmp6 - tmp5 * tl.math.div_rn(tmp5, 4096.0)
''',
    "tuple sums": '''
    tmp5, tmp6 = tl.reduce((tmp4, tmp4 * tmp4), 1, add2, keep_dims=True)
    tmp7 = tmp3 + tl.math.div_rn(tmp5, 4096.0)
    tmp8 = tmp6 - tmp5 * tl.math.div_rn(tmp5, 4096.0)
''',
    "no correction": '''
    tmp6 = tl.reduce(tmp4 * tmp4, 1, add, keep_dims=True)
    tmp7 = tmp3
    tmp8 = tmp6
''',
    "one pass": '''
    s, tmp6 = tl.reduce((tmp1, tmp1 * tmp1), 1, add2, keep_dims=True)
    tmp7 = s * (1.0 / 4096.0)
    tmp8 = tmp6 - s * tmp7
''',
}
TAIL = '''
    tmp12 = tl.math.div_rn(1.0, tl.sqrt_rn(tl.math.div_rn(tmp8, 4096.0) + 1e-05))
    tmp19 = (tmp1 - tmp7) * tmp12 * W + B
    tmp21 = tmp19.to(tl.bfloat16).to(tl.float32)
    tmp25 = 0.5 * tmp21 * ERF(tmp21 * 0.7071067811865476)
    tl.store(out0 + (r0 + x0 * 4096), tmp25.to(tl.bfloat16))
'''


def kernel(name, stats, erf):
    body = (HEAD + stats + TAIL).replace("ERF", erf)
    return ln_kernel(name, body)


VARIANTS = {}
for i, (label, stats) in enumerate(STATS.items()):
    VARIANTS[f"k{i}"] = (label, stats, "erf_plus_one")
    VARIANTS[f"k{i}_noerf"] = (label + ", erf -> 1 + z", stats, "1.0 + ")
SOURCE = module_head(["add", "add2", "erf_plus_one"]) + "".join(kernel(k, stats, erf) for k, (_, stats, erf) in VARIANTS.items())

mod = load("ln_variants", SOURCE)
dev = "cpu" if CHECK else "cuda"
rows, cols = (4 if CHECK else 16384), 4096
x = (torch.randn(rows, cols, device=dev) * 3 + 5).to(torch.bfloat16)
w, b = (torch.randn(cols, device=dev, dtype=torch.bfloat16) for _ in range(2))
if CHECK:
    triton.testing.do_bench = lambda fn: (fn(), 1.0)[1]
ref = torch.nn.functional.gelu(torch.nn.functional.layer_norm(x.double(), (cols,), w.double(), b.double()))
out, src = torch.empty_like(x), torch.empty_like(x)
copy_ms = triton.testing.do_bench(lambda: src.copy_(x))
print(f"copy {copy_ms * 1e3:.1f} us = {2 * x.numel() * 2 / copy_ms / 1e6:.0f} GB/s")
base = None
for warps in (4, 8):
    for name, (label, _, erf) in VARIANTS.items():
        fn = lambda: getattr(mod, name)[(rows,)](x, w, b, out, XBLOCK=1, RBLOCK=cols, num_warps=warps)
        fn()
        err = (out.double() - ref).abs().max().item() if erf == "erf_plus_one" else float("nan")
        base = out.clone() if base is None else base
        differ = int((out != base).sum())
        ms = triton.testing.do_bench(fn)
        print(f"{warps} warps, {label}: {ms * 1e3:.1f} us, {copy_ms / ms * 100:.0f}% of copy, "
              f"max error {err:.3g}, {differ} outputs differ from the first")
for xblock, warps in ((2, 4), (2, 8), (4, 8), (4, 16), (2, 16)):
    name = "k1"
    fn = lambda: mod.k1[(rows // xblock,)](x, w, b, out, XBLOCK=xblock, RBLOCK=cols, num_warps=warps)
    fn()
    differ = int((out != base).sum())
    ms = triton.testing.do_bench(fn)
    print(f"tuple sums, XBLOCK {xblock}, {warps} warps: {ms * 1e3:.1f} us, {copy_ms / ms * 100:.0f}% of copy, "
          f"{differ} outputs differ from the first")
