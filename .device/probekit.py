"""Helpers of the H100 probes. copy_gbs(): the device-to-device copy rate their '% of copy' is measured
against (a 256 MiB fp32 copy, triton.testing.do_bench, bytes read and written over time), printed and
returned in GB/s. compile_braze(fn, *args): fn compiled by braze without the graph cache and run once,
with the first kernel's launch line (grid and block sizes)."""
import torch
import triton

import braze


def copy_gbs() -> float:
    big = torch.randn(1 << 26, device="cuda")
    dst = torch.empty_like(big)
    ms = triton.testing.do_bench(lambda: dst.copy_(big))
    gbs = 2 * big.numel() * 4 / ms / 1e6
    print(f"copy {ms * 1e3:.1f} us = {gbs:.0f} GB/s")
    return gbs


def compile_braze(fn, *args):
    with braze.config.patch(graph_cache=False):
        report = braze.explain(fn, *args)
        f = braze.compile(fn)
        f(*args)
    src = report.graphs[0].source.split("# ---- launchers")[1]
    launch = [line for line in src.splitlines() if "[(" in line][0]
    return f, launch[launch.index("[("):launch.index("](") + 1] + " " + launch[launch.index("XBLOCK"):-1]
