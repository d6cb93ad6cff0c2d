"""Scan kernel shapes on the GPU: ``x.exp().cumsum(1)`` of 8192x4096 float32 rows.

What it measures: hand-written Triton versions of braze's scan kernel, side by side
in one process:
- *looped*: the row in chunks of ``RBLOCK`` elements (``XBLOCK`` rows a program), each
  chunk scanned and offset by a running value carried from the chunks before (braze's
  shape for rows longer than ``shapes.SCAN_ROW_MAX``);
- *one chunk*: the whole row scanned at once, no running value (braze's shape for rows
  up to ``SCAN_ROW_MAX``);
each with the scan accumulated in float64 (what braze generates for float32 rows longer
than 32) and in float32. Prints, per variant, microseconds per call
(``triton.testing.do_bench`` median, the L2 cleared before each call), the percentage of
a device-to-device copy of the same bytes, and the largest error against a float64
cumsum relative to the row's total, with eager's (CUDA float32) error beside it.

Device: an NVIDIA GPU (the shapes are those braze picks for the H100). ``--check`` runs
4 rows in Triton's interpreter on the CPU instead: values only, no timings.

    python -m benchmarks.scan_variants
    python -m benchmarks.scan_variants --check

Results and what braze takes from them: docs/benchmarks.md, "Scans".
"""
from __future__ import annotations

import argparse

import torch

from benchmarks import handwritten
from benchmarks.measure import time_gpu

COLUMNS = 4096
# (XBLOCK, RBLOCK, warps) tried for each kind of kernel
LOOPED = [(2, 1024, 8), (1, 1024, 4), (1, 1024, 8), (2, 1024, 4), (4, 512, 4), (1, 2048, 8), (2, 2048, 16)]
ONE_CHUNK = [(1, 4096, 8), (1, 4096, 16), (2, 4096, 16), (1, 4096, 32)]


def kernel_source(name: str, accumulator: str, one_chunk: bool) -> str:
    """One variant: the scan in ``accumulator`` ("float64" or "float32"), looped or in one chunk."""
    widen = ".to(tl.float64)" if accumulator == "float64" else ""
    narrow = "scanned = scanned.to(tl.float32)" if accumulator == "float64" else "pass"
    if one_chunk:
        return f'''
@triton.jit
def {name}(in0, out0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r0 = tl.arange(0, RBLOCK)[None, :]
    chunk = libdevice.exp(tl.load(in0 + (r0 + x0 * {COLUMNS}))){widen}
    scanned = tl.associative_scan(chunk, 1, add)
    {narrow}
    tl.store(out0 + (r0 + x0 * {COLUMNS}), scanned)
'''
    return f'''
@triton.jit
def {name}(in0, out0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    rbase = tl.arange(0, RBLOCK)[None, :]
    running = tl.full([XBLOCK, 1], 0, tl.{accumulator})
    for roffset in range(0, {COLUMNS}, RBLOCK):
        r0 = roffset + rbase
        chunk = libdevice.exp(tl.load(in0 + (r0 + x0 * {COLUMNS}))){widen}
        scanned = tl.associative_scan(chunk, 1, add) + running
        running = running + tl.reduce(chunk, 1, add)[:, None]
        {narrow}
        tl.store(out0 + (r0 + x0 * {COLUMNS}), scanned)
'''


def _run_once(fn) -> float:
    """``--check``: run the call for its values; no time."""
    fn()
    return float("nan")


def _timing(ms: float, copy_ms: float) -> str:
    return "" if ms != ms else f"{ms * 1e3:.1f} us, {copy_ms / ms * 100:.0f} % of copy, "


VARIANTS = {f"{acc}_{'one_chunk' if one else 'looped'}": (acc, one)
            for acc in ("float64", "float32") for one in (False, True)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="4 rows in Triton's interpreter on the CPU, no timings")
    args = parser.parse_args(argv)
    if args.check:
        handwritten.interpret()
    source = handwritten.HEAD + handwritten.helpers(["add"]) + "".join(
        kernel_source(name, acc, one) for name, (acc, one) in VARIANTS.items())
    module = handwritten.load("scan_variants", source)
    device, rows = ("cpu", 4) if args.check else ("cuda", 8192)
    timed = _run_once if args.check else (lambda fn: time_gpu(lambda _: fn(), None))

    x = torch.randn(rows, COLUMNS, device=device)
    reference = x.double().exp().cumsum(1)
    total = reference[:, -1:]
    out, dst = torch.empty_like(x), torch.empty_like(x)
    copy_ms = timed(lambda: dst.copy_(x))
    if not args.check:
        print(f"copy of the same bytes: {copy_ms * 1e3:.1f} us, {2 * x.numel() * 4 / copy_ms / 1e6:.0f} GB/s")
    eager_error = ((x.exp().cumsum(1).double() - reference).abs() / total).max().item()
    print(f"eager: {_timing(timed(lambda: x.exp().cumsum(1)), copy_ms)}error {eager_error:.2e}")
    for name, (acc, one_chunk) in VARIANTS.items():
        for xblock, rblock, warps in ONE_CHUNK if one_chunk else LOOPED:
            def call(name=name, xblock=xblock, rblock=rblock, warps=warps):
                getattr(module, name)[(rows // xblock,)](x, out, XBLOCK=xblock, RBLOCK=rblock, num_warps=warps)
            label = f"{acc} {'one chunk' if one_chunk else 'looped'}, XBLOCK {xblock} RBLOCK {rblock} {warps} warps"
            try:
                call()
            except Exception as e:  # too many registers or too much shared memory for this shape
                print(f"{label}: failed, {type(e).__name__}: {str(e)[:200]}")
                continue
            error = ((out.double() - reference).abs() / total).max().item()
            print(f"{label}: {_timing(timed(call), copy_ms)}error {error:.2e}", flush=True)


if __name__ == "__main__":
    main()
