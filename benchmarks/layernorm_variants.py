"""How a persistent LayerNorm row kernel computes its variance, on the GPU:
``gelu(layer_norm(x, w, b))`` of 16384x4096 bfloat16 rows.

What it measures: a hand copy of the row kernel braze generates for this workload (one
row of 4096 per program, the weight and bias rows loaded first, GELU through braze's
``erf_plus_one`` helper), with the row statistics written four ways:
- *corrected, three sums*: the mean from one sum, then the sum of the deviations
  (which corrects the rounded mean) and the sum of their squares, each its own reduction;
- *corrected, tuple sum*: the same two sums as one ``tl.reduce`` of a tuple;
- *two-pass*: the mean from one sum, then the sum of squared deviations (what braze's
  ``rows._moments`` computes, as Inductor's persistent Welford does);
- *one pass*: E[x^2] - E[x]^2 from one tuple sum (cancels on rows with a large mean);
each also with GELU's ``erf`` replaced by ``1 + z``, which shows what the LayerNorm part
costs alone. Then the tuple-sum variant with 2 or 4 rows a program. Prints microseconds
per call (``triton.testing.do_bench`` median), the percentage of a device-to-device copy
of the same bytes, the largest error against float64, and how many outputs differ from
the first variant's.

Device: an NVIDIA GPU (written for the H100). ``--check`` runs 4 rows in Triton's
interpreter on the CPU instead: values only, no timings.

    python -m benchmarks.layernorm_variants
    python -m benchmarks.layernorm_variants --check

Results and what braze takes from them: docs/benchmarks.md, "Normalizations".
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from benchmarks import handwritten
from benchmarks.measure import time_gpu

COLUMNS = 4096
MEAN = f'''
    tmp1 = tl.load(in0 + (r0 + x0 * {COLUMNS})).to(tl.float32)
    tmp3 = tl.math.div_rn(tl.reduce(tmp1, 1, add, keep_dims=True), {COLUMNS}.0)
    tmp4 = tmp1 - tmp3
'''
# each gives the mean (tmp7) and the sum of squared deviations (tmp8)
STATISTICS = {
    "corrected, three sums": MEAN + f'''
    tmp5 = tl.reduce(tmp4, 1, add, keep_dims=True)
    tmp6 = tl.reduce(tmp4 * tmp4, 1, add, keep_dims=True)
    tmp7 = tmp3 + tl.math.div_rn(tmp5, {COLUMNS}.0)
    tmp8 = tmp6 - tmp5 * tl.math.div_rn(tmp5, {COLUMNS}.0)
''',
    "corrected, tuple sum": MEAN + f'''
    tmp5, tmp6 = tl.reduce((tmp4, tmp4 * tmp4), 1, add2, keep_dims=True)
    tmp7 = tmp3 + tl.math.div_rn(tmp5, {COLUMNS}.0)
    tmp8 = tmp6 - tmp5 * tl.math.div_rn(tmp5, {COLUMNS}.0)
''',
    "two-pass": MEAN + '''
    tmp6 = tl.reduce(tmp4 * tmp4, 1, add, keep_dims=True)
    tmp7 = tmp3
    tmp8 = tmp6
''',
    "one pass": f'''
    tmp1 = tl.load(in0 + (r0 + x0 * {COLUMNS})).to(tl.float32)
    s, tmp6 = tl.reduce((tmp1, tmp1 * tmp1), 1, add2, keep_dims=True)
    tmp7 = s * (1.0 / {COLUMNS}.0)
    tmp8 = tmp6 - s * tmp7
''',
}
NORMALIZE_AND_GELU = f'''
    tmp12 = tl.math.div_rn(1.0, tl.sqrt_rn(tl.math.div_rn(tmp8, {COLUMNS}.0) + 1e-05))
    tmp19 = (tmp1 - tmp7) * tmp12 * W + B
    tmp21 = tmp19.to(tl.bfloat16).to(tl.float32)
    tmp25 = 0.5 * tmp21 * ERF(tmp21 * 0.7071067811865476)
    tl.store(out0 + (r0 + x0 * {COLUMNS}), tmp25.to(tl.bfloat16))
'''
TUPLE_SUM = "k1"  # the kernel the rows-per-program sweep runs
ROWS_PER_PROGRAM = [(2, 4), (2, 8), (4, 8), (4, 16), (2, 16)]  # (XBLOCK, warps)


def kernel_source(name: str, statistics: str, erf: str) -> str:
    body = (statistics + NORMALIZE_AND_GELU).replace("ERF", erf)
    return f'''
@triton.jit
def {name}(in0, in1, in2, out0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r0 = tl.arange(0, RBLOCK)[None, :]
    W = tl.load(in1 + r0).to(tl.float32)
    B = tl.load(in2 + r0).to(tl.float32)
{body}'''


def variants() -> dict:
    """kernel name -> (label, statistics, erf): every statistics with GELU, and with erf -> 1 + z."""
    out = {}
    for i, (label, statistics) in enumerate(STATISTICS.items()):
        out[f"k{i}"] = (label, statistics, "erf_plus_one")
        out[f"k{i}_no_erf"] = (label + ", erf -> 1 + z", statistics, "1.0 + ")
    return out


def _run_once(fn) -> float:
    fn()
    return float("nan")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="4 rows in Triton's interpreter on the CPU, no timings")
    args = parser.parse_args(argv)
    if args.check:
        handwritten.interpret()
    kernels = variants()
    source = handwritten.HEAD + handwritten.helpers(["add", "add2", "erf_plus_one"]) + "".join(
        kernel_source(name, statistics, erf) for name, (_, statistics, erf) in kernels.items())
    module = handwritten.load("layernorm_variants", source)
    device, rows = ("cpu", 4) if args.check else ("cuda", 16384)
    timed = _run_once if args.check else (lambda fn: time_gpu(lambda _: fn(), None))

    x = (torch.randn(rows, COLUMNS, device=device) * 3 + 5).to(torch.bfloat16)
    w, b = (torch.randn(COLUMNS, device=device, dtype=torch.bfloat16) for _ in range(2))
    reference = F.gelu(F.layer_norm(x.double(), (COLUMNS,), w.double(), b.double()))
    out, dst = torch.empty_like(x), torch.empty_like(x)
    copy_ms = timed(lambda: dst.copy_(x))
    if not args.check:
        print(f"copy of the same bytes: {copy_ms * 1e3:.1f} us, {2 * x.numel() * 2 / copy_ms / 1e6:.0f} GB/s")

    def report(label: str, call, first, error=None) -> torch.Tensor:
        call()
        first = out.clone() if first is None else first
        ms = timed(call)
        timing = "" if ms != ms else f"{ms * 1e3:.1f} us, {copy_ms / ms * 100:.0f} % of copy, "
        error_text = "" if error is None else f"max error {error():.3g}, "
        print(f"{label}: {timing}{error_text}{int((out != first).sum())} outputs differ from the first", flush=True)
        return first

    first = None
    for warps in (4, 8):
        for name, (label, _, erf) in kernels.items():
            kernel = getattr(module, name)
            call = lambda kernel=kernel, warps=warps: kernel[(rows,)](x, w, b, out, XBLOCK=1, RBLOCK=COLUMNS,
                                                                      num_warps=warps)
            error = (lambda: (out.double() - reference).abs().max().item()) if erf == "erf_plus_one" else None
            first = report(f"{warps} warps, {label}", call, first, error)
    for xblock, warps in ROWS_PER_PROGRAM:
        if rows % xblock:
            continue
        kernel = getattr(module, TUPLE_SUM)
        call = lambda xblock=xblock, warps=warps: kernel[(rows // xblock,)](x, w, b, out, XBLOCK=xblock,
                                                                           RBLOCK=COLUMNS, num_warps=warps)
        report(f"corrected, tuple sum, {xblock} rows a program, {warps} warps", call, first)


if __name__ == "__main__":
    main()
