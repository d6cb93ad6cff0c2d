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


def compare(fn, args, module, attrs, variants: dict, reads: int, copy_gbs: float, reference=None) -> list:
    """``fn(*args)`` compiled by braze with ``module``'s ``attrs`` (a name, or a tuple of names) set to
    each of ``variants``' values in turn (label -> value, or tuple of values), then by Inductor; the
    attributes are restored after. One line each: label, us, % of copy for ``reads`` bytes, braze's
    launch, and the largest relative error against ``reference`` (a tensor or tuple) when given."""
    names = (attrs,) if isinstance(attrs, str) else attrs
    saved = [getattr(module, name) for name in names]
    lines = []
    for label, values in [*variants.items(), ("inductor", None)]:
        torch._dynamo.reset()
        if values is None:
            f, launch = torch.compile(fn), ""
        else:
            for name, value in zip(names, (values,) if isinstance(attrs, str) else values):
                setattr(module, name, value)
            f, launch = compile_braze(fn, *args)
        out = f(*args)
        ms = triton.testing.do_bench(lambda: f(*args))
        line = f"{label} {ms * 1e3:.1f} us {reads / ms / 1e6 / copy_gbs * 100:.0f}% {launch}"
        if reference is not None:
            pairs = zip(out, reference) if isinstance(reference, tuple) else [(out, reference)]
            line += f" err {max(((o.double() - r).abs().max() / r.abs().max()).item() for o, r in pairs):.0e}"
        lines.append(line)
    for name, value in zip(names, saved):
        setattr(module, name, value)
    return lines


def wider_split(factor: int):
    """shapes.few_programs that also splits a column reduction while its blocks of 64 columns number
    fewer than ``factor`` x the SM count."""
    from braze.fuse import legality
    original = legality.few_programs

    def few_programs(outer, reduce, columnar, fill):
        if columnar and reduce >= legality.SPLIT_MIN_COLUMN and triton.cdiv(outer, 64) < factor * fill // 2:
            return True
        return original(outer, reduce, columnar, fill)
    return few_programs
