"""LayerNorm+GELU (bf16 16384x4096) on the H100: braze's row kernel as generated (one row per program), against
persistent programs that loop over rows (grid-stride), loading w and b once (HOIST=1) or per row, with Triton's
loop pipelining (num_stages) on or off. Prints us and % of copy; checks each against the generated kernel.
python .device/lnpersist.py"""
import importlib.util, os, sys, tempfile
import torch, triton
from braze.codegen.triton.helpers import helper_source

BODY = '''
    tmp1 = tl.load(in0 + (r0 + x0 * 4096)).to(tl.float32)
    tmp3 = tl.math.div_rn(tl.reduce(tmp1, 1, add, keep_dims=True), 4096.0)
    tmp4 = tmp1 - tmp3
    tmp5 = tl.reduce(tmp4, 1, add, keep_dims=True)
    tmp6 = tl.reduce(tmp4 * tmp4, 1, add, keep_dims=True)
    tmp7 = tmp3 + tl.math.div_rn(tmp5, 4096.0)
    tmp8 = tmp6 - tmp5 * tl.math.div_rn(tmp5, 4096.0)
    tmp12 = tl.math.div_rn(1.0, tl.sqrt_rn(tl.math.div_rn(tmp8, 4096.0) + 1e-05))
    tmp19 = (tmp1 - tmp7) * tmp12 * W + B
    tmp21 = tmp19.to(tl.bfloat16).to(tl.float32)
    tmp25 = 0.5 * tmp21 * erf_plus_one(tmp21 * 0.7071067811865476)
    tl.store(out0 + (r0 + x0 * 4096), tmp25.to(tl.bfloat16))
'''


def indent(text, n):
    return "\n".join((" " * n + line[4:]) if line.strip() else line for line in text.splitlines())


SOURCE = f'''
import triton
import triton.language as tl
from triton.language.extra import libdevice

@triton.jit
def add(a, b):
    return a + b
{helper_source(["erf_plus_one"])}

@triton.jit
def one_row(in0, in1, in2, out0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r0 = tl.arange(0, RBLOCK)[None, :]
    W = tl.load(in1 + r0).to(tl.float32)
    B = tl.load(in2 + r0).to(tl.float32)
{indent(BODY, 4)}


@triton.jit
def persistent(in0, in1, in2, out0, ROWS: tl.constexpr, PROGRAMS: tl.constexpr, RBLOCK: tl.constexpr,
               HOIST: tl.constexpr, STAGES: tl.constexpr):
    r0 = tl.arange(0, RBLOCK)[None, :]
    if HOIST:
        W = tl.load(in1 + r0).to(tl.float32)
        B = tl.load(in2 + r0).to(tl.float32)
    for row in tl.range(tl.program_id(0), ROWS, PROGRAMS, num_stages=STAGES):
        x0 = row
        if not HOIST:
            W = tl.load(in1 + r0).to(tl.float32)
            B = tl.load(in2 + r0).to(tl.float32)
{indent(BODY, 8)}
'''

path = os.path.join(tempfile.mkdtemp(), "ln_probe.py")
open(path, "w").write(SOURCE)
spec = importlib.util.spec_from_file_location("ln_probe", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)

rows, cols = 16384, 4096
x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
w, b = (torch.randn(cols, device="cuda", dtype=torch.bfloat16) for _ in range(2))
out, want = torch.empty_like(x), torch.empty_like(x)
src = torch.empty_like(x)
copy_ms = triton.testing.do_bench(lambda: src.copy_(x))
print(f"copy {copy_ms * 1e3:.1f} us = {2 * x.numel() * 2 / copy_ms / 1e6:.0f} GB/s")
mod.one_row[(rows,)](x, w, b, want, XBLOCK=1, RBLOCK=cols, num_warps=4)


def report(label, fn):
    out.zero_()
    fn()
    same = bool(torch.equal(out, want))
    ms = triton.testing.do_bench(fn)
    print(f"{label}: {ms * 1e3:.1f} us, {copy_ms / ms * 100:.0f}% of copy, equal to generated: {same}")


report("generated: one row per program, 4 warps", lambda: mod.one_row[(rows,)](x, w, b, out, XBLOCK=1, RBLOCK=cols, num_warps=4))
for programs in (132 * 4, 132 * 8, 132 * 16):
    for warps in (4, 8):
        for hoist in (1, 0):
            for stages in (1, 2, 3):
                report(f"persistent {programs} programs, {warps} warps, hoist {hoist}, stages {stages}",
                       lambda: mod.persistent[(programs,)](x, w, b, out, ROWS=rows, PROGRAMS=programs, RBLOCK=cols,
                                                           HOIST=hoist, STAGES=stages, num_warps=warps))
