"""Cross-entropy 8192x32000 fp32 on the H100, kernel by kernel: braze's generated kernels (pasted from a debug
dump of the benchmark) at other block sizes and warps, against a Triton row sum with the same loop (the read
ceiling of this loop) and torch's row sum. Prints us and GB/s of the logits read.
python .device/cesweep.py"""
import torch, triton
from probemodule import CHECK, load
from braze.codegen.triton.helpers import helper_source

SOURCE = """import triton
import triton.language as tl
from triton.language.extra import libdevice

@triton.jit
def add(a, b):
    return a + b

""" + helper_source(["maximum_nan", "online_sum_exp", "online_sum_total"]) + """

@triton.jit
def triton_row_loop_794853bd13ae(in0, out0, out1, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xnumel: tl.constexpr = 8192
    rnumel: tl.constexpr = 32000
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    rbase = tl.arange(0, RBLOCK)[None, :]
    x0 = xindex
    acc0 = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)
    acc1_ref = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)
    acc1_total = tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + rbase
        rmask = rindex < rnumel
        r0 = rindex
        tmp0 = tl.load(in0 + (r0 + x0 * 32000), rmask & xmask)
        acc0 = maximum_nan(acc0, tl.where(rmask, tmp0, float("-inf")))
        acc1_ref, acc1_total = online_sum_exp(acc1_ref, acc1_total, tl.where(rmask, tmp0, float("-inf")))
    tmp1 = tl.reduce(acc0, 1, maximum_nan, keep_dims=True)
    tl.store(out0 + x0, tmp1, xmask)
    tmp2 = online_sum_total(acc1_ref, acc1_total, tmp1)
    tmp3 = tl.reduce(tmp2, 1, add, keep_dims=True)
    tl.store(out1 + x0, tmp3, xmask)



@triton.jit
def add_(a, b):
    return a + b

@triton.jit
def negate(x):
    '''-x on floats by flipping the sign bit, as eager negates: Triton's -x is 0 - x,
    which gives +0.0 for 0.0 and leaves the sign of NaN.'''
    if x.dtype == tl.float64:
        out = (x.to(tl.int64, bitcast=True) ^ -9223372036854775808).to(tl.float64, bitcast=True)
    elif x.dtype == tl.float32:
        out = (x.to(tl.int32, bitcast=True) ^ -2147483648).to(tl.float32, bitcast=True)
    else:
        out = (x.to(tl.int16, bitcast=True) ^ tl.full([], -32768, tl.int16)).to(x.dtype, bitcast=True)
    return out


@triton.jit
def triton_row_loop_699c110318bf(in0, in1, in2, in3, out0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xnumel: tl.constexpr = 1
    rnumel: tl.constexpr = 8192
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    rbase = tl.arange(0, RBLOCK)[None, :]
    acc0 = tl.full([XBLOCK, RBLOCK], 0, tl.int64)
    acc1 = tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + rbase
        rmask = rindex < rnumel
        r0 = rindex
        tmp0 = tl.load(in0 + r0, rmask)
        tmp1 = tmp0 != -100
        tmp2 = tmp1.to(tl.int64)
        acc0 = acc0 + tl.broadcast_to(tl.where(rmask, tmp2, 0), [XBLOCK, RBLOCK])
        tmp3 = tl.where(tmp1, tmp0, 0)
        tmp4 = tl.load(in1 + (tl.minimum(tl.maximum(r0 * 32000 + tl.where((tmp3.to(tl.int32) < 0), tmp3.to(tl.int32) + 32000, tmp3.to(tl.int32)), 0), 262143999)), rmask)
        tmp5 = tl.load(in2 + r0, rmask)
        tmp6 = tmp4 - tmp5
        tmp7 = tl.load(in3 + r0, rmask)
        tmp8 = libdevice.log(tmp7)
        tmp9 = tmp6 - tmp8
        tmp10 = negate(tmp9)
        tmp11 = tl.where(tmp1, tmp10, 0.0)
        acc1 = acc1 + tl.broadcast_to(tl.where(rmask, tmp11, 0.0), [XBLOCK, RBLOCK])
    tmp12 = tl.reduce(acc0, 1, add_, keep_dims=True)
    tmp13 = tl.reduce(acc1, 1, add_, keep_dims=True)
    tmp14 = tmp12.to(tl.float32)
    tmp15 = tl.math.div_rn(tmp13, tmp14)
    tl.store(tl.broadcast_to(out0 + 0, [XBLOCK, 1]), tmp15, xmask)



@triton.jit
def row_sum(in0, out0, RBLOCK: tl.constexpr):
    x0 = tl.program_id(0)
    acc = tl.zeros([1, RBLOCK], tl.float32)
    for roffset in range(0, 32000, RBLOCK):
        r0 = roffset + tl.arange(0, RBLOCK)[None, :]
        acc += tl.load(in0 + (r0 + x0 * 32000), r0 < 32000, other=0.0)
    tl.store(out0 + x0 + tl.arange(0, 1)[:, None], tl.sum(acc, 1, keep_dims=True))
"""

mod = load("ce_probe", SOURCE)
dev = "cpu" if CHECK else "cuda"
rows = 8192
if CHECK:
    triton.testing.do_bench = lambda fn: (fn(), 1.0)[1]
logits = torch.randn(rows, 32000, device=dev)
target = torch.randint(0, 32000, (rows,), device=dev)
mx, se = (torch.empty(rows, 1, device=dev) for _ in range(2))
rs = torch.empty(rows, device=dev)
out = torch.empty((), device=dev)
want = torch.nn.functional.cross_entropy(logits, target)
gb = logits.numel() * 4 / 1e9


def report(label, fn, read=True):
    ms = triton.testing.do_bench(fn)
    rate = f", {gb / ms:.0f} GB/s" if read else ""
    print(f"{label}: {ms * 1e3:.1f} us{rate}")


report("torch logits.sum(1)", lambda: torch.sum(logits, 1, out=rs))
for rb in ((2048,) if CHECK else (1024, 2048, 4096, 8192)):
    for w in (4, 8, 16):
        report(f"row_sum RBLOCK {rb} warps {w}", lambda: mod.row_sum[(rows,)](logits, rs, RBLOCK=rb, num_warps=w))
k0, k1 = mod.triton_row_loop_794853bd13ae, mod.triton_row_loop_699c110318bf
for rb in (() if CHECK else (1024, 2048, 4096)):
    for w in (4, 8, 16):
        report(f"kernel0 RBLOCK {rb} warps {w}", lambda: k0[(rows,)](logits, mx, se, XBLOCK=1, RBLOCK=rb, num_warps=w))
k0[(rows,)](logits, mx, se, XBLOCK=1, RBLOCK=2048, num_warps=8)
for rb, w in ((2048, 8), (4096, 8), (8192, 8), (8192, 16), (1024, 4)):
    report(f"kernel1 RBLOCK {rb} warps {w}", lambda: k1[(1,)](target, logits, mx, se, out, XBLOCK=1, RBLOCK=rb, num_warps=w), False)
    print("   loss", out.item(), "eager", want.item())
