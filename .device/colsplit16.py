"""bf16 column sums (x.sum(0)) with few rows on the H100: braze's rule for splitting a column reduction
over row chunks as it is, and splitting while blocks of 64 columns number fewer than FACTOR x the SM count
(.device/colsplit.py's wider rule, 2, 4 and 8), next to Inductor. python .device/colsplit16.py"""
import torch
import probekit
import braze.codegen.triton.shapes as S

rules = {"now": S.few_programs, "x2": probekit.wider_split(2), "x4": probekit.wider_split(4),
         "x8": probekit.wider_split(8)}
copy_gbs = probekit.copy_gbs()
fn = lambda x: x.sum(0)
for rows, cols in ((4096, 16384), (2048, 16384), (1024, 65536), (8192, 16384), (4096, 32000), (32768, 1024)):
    x = torch.randn(rows, cols, device="cuda").to(torch.bfloat16)
    line = probekit.compare(fn, (x,), S, "few_programs", rules, x.numel() * 2, copy_gbs)
    print(f"{rows}x{cols} bf16:\n   " + "\n   ".join(line), flush=True)
