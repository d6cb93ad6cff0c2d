"""LayerNorm+GELU (bf16 16384x4096, H100): the cost of the row kernel's per-row scalar arithmetic, which
every thread computes. Variants of braze's generated kernel: as generated (five IEEE divisions by 4096 and
rsqrt as 1 / sqrt_rn), the divisions by 4096 as exact products by 2^-12 (bit for bit the same), and also
rsqrt as libdevice's (rsqrt.approx, what eager's CUDA rsqrt and LayerNorm call). Alternating rounds; us,
% of copy, outputs differing from the generated kernel's.
python .device/lnscalars.py"""
import torch, triton
from probemodule import CHECK, ln_kernel, load, module_head

BODY = '''
    tmp1 = tl.load(in0 + (r0 + x0 * 4096)).to(tl.float32)
    tmp3 = DIV(tl.reduce(tmp1, 1, add, keep_dims=True))
    tmp4 = tmp1 - tmp3
    tmp5, tmp6 = tl.reduce((tmp4, tmp4 * tmp4), 1, add2, keep_dims=True)
    tmp7 = tmp3 + DIV(tmp5)
    tmp8 = tmp6 - tmp5 * DIV(tmp5)
    tmp12 = RSQRT(DIV(tmp8) + 1e-05)
    tmp19 = (tmp1 - tmp7) * tmp12 * W + B
    tmp21 = tmp19.to(tl.bfloat16).to(tl.float32)
    tmp25 = 0.5 * tmp21 * erf_plus_one(tmp21 * 0.7071067811865476)
    tl.store(out0 + (r0 + x0 * 4096), tmp25.to(tl.bfloat16))
'''
VARIANTS = {
    "generated": ("tl.math.div_rn(ARG, 4096.0)", "tl.math.div_rn(1.0, tl.sqrt_rn(ARG))"),
    "products by 2^-12": ("(ARG) * 0.000244140625", "tl.math.div_rn(1.0, tl.sqrt_rn(ARG))"),
    "products, libdevice rsqrt": ("(ARG) * 0.000244140625", "libdevice.rsqrt(ARG)"),
}


def kernel(name, div, rsqrt):
    body = BODY
    for fn, text in (("DIV", div), ("RSQRT", rsqrt)):
        while fn + "(" in body:  # replace FN(arg) with the text around arg (one level of parentheses)
            start = body.index(fn + "(")
            depth, k = 0, start + len(fn)
            while True:
                depth += {"(": 1, ")": -1}.get(body[k], 0)
                if depth == 0:
                    break
                k += 1
            body = body[:start] + text.replace("ARG", body[start + len(fn) + 1:k]) + body[k + 1:]
    return ln_kernel(name, body)


SOURCE = module_head(["add", "add2", "erf_plus_one"]) + "".join(kernel(f"k{i}", *texts) for i, texts in enumerate(VARIANTS.values()))

mod = load("ln_scalars", SOURCE)
dev = "cpu" if CHECK else "cuda"
rows, cols = (4 if CHECK else 16384), 4096
x = (torch.randn(rows, cols, device=dev) * 3 + 5).to(torch.bfloat16)
w, b = (torch.randn(cols, device=dev, dtype=torch.bfloat16) for _ in range(2))
bench = (lambda fn: (fn(), 1.0)[1]) if CHECK else triton.testing.do_bench
out, src = torch.empty_like(x), torch.empty_like(x)
copy_ms = bench(lambda: src.copy_(x))
print(f"copy {copy_ms * 1e3:.1f} us")
runs = {i: (lambda i=i: getattr(mod, f"k{i}")[(rows,)](x, w, b, out, XBLOCK=1, RBLOCK=cols, num_warps=4))
        for i in range(len(VARIANTS))}
runs[0]()
first = out.clone()
for i, fn in runs.items():
    fn()
    print(f"{list(VARIANTS)[i]}: {int((out != first).sum())} outputs differ from the generated kernel's")
times = {i: [] for i in runs}
for _ in range(3):
    for i, fn in runs.items():
        times[i].append(bench(fn) * 1e3)
for i, label in enumerate(VARIANTS):
    print(f"{label}: " + " ".join(f"{t:.1f}" for t in times[i]) + f" us; best {copy_ms * 1e3 / min(times[i]) * 100:.1f}% of copy")
