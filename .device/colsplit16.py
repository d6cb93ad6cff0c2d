"""bf16 column sums (x.sum(0)) with few rows on the H100: braze's rule for splitting a column reduction
over row chunks as it is, and splitting while blocks of 64 columns number fewer than FACTOR x the SM count
(.device/colsplit.py's wider rule, 2, 4 and 8), next to Inductor. python .device/colsplit16.py"""
import torch, triton
import probekit
import braze.codegen.triton.shapes as S
from braze.fuse import legality

original = S.few_programs


def wider(factor):
    def few_programs(outer, reduce, columnar, fill):
        if columnar and reduce >= legality.SPLIT_MIN_COLUMN and triton.cdiv(outer, 64) < factor * fill // 2:
            return True
        return original(outer, reduce, columnar, fill)
    return few_programs


rules = {"now": original, "x2": wider(2), "x4": wider(4), "x8": wider(8)}
copy_gbs = probekit.copy_gbs()
fn = lambda x: x.sum(0)
for rows, cols in ((4096, 16384), (2048, 16384), (1024, 65536), (8192, 16384), (4096, 32000), (32768, 1024)):
    x = torch.randn(rows, cols, device="cuda").to(torch.bfloat16)
    line = []
    for label in list(rules) + ["inductor"]:
        torch._dynamo.reset()
        if label == "inductor":
            f = torch.compile(fn); launch = ""
        else:
            S.few_programs = rules[label]
            f, launch = probekit.compile_braze(fn, x)
        f(x)
        ms = triton.testing.do_bench(lambda: f(x))
        line.append(f"{label} {ms * 1e3:.1f} us {x.numel() * 2 / ms / 1e6 / copy_gbs * 100:.0f}% {launch}")
    print(f"{rows}x{cols} bf16:\n   " + "\n   ".join(line), flush=True)
S.few_programs = original
