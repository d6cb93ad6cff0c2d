"""Column sums (x.sum(0)) compiled by braze on the H100, with the rule that sends a column reduction to the
split shape (row chunks over several programs, partials merged by a second kernel) as it is and with wider
thresholds: split when the columns make fewer blocks of 64 than SMS_FACTOR x the SM count. Prints us and % of
copy (bytes read / copy rate), the kernels' shapes, and the error against float64.
python .device/colsplit.py"""
import torch, triton
import braze
import braze.codegen.triton.shapes as S
from braze.fuse import legality

original = S.few_programs


def wider(factor):
    def few_programs(outer, reduce, columnar, fill):
        if columnar and reduce >= legality.SPLIT_MIN_COLUMN and triton.cdiv(outer, 64) < factor * fill // 2:
            return True
        return original(outer, reduce, columnar, fill)
    return few_programs


big = torch.randn(1 << 26, device="cuda")
src = torch.empty_like(big)
copy_ms = triton.testing.do_bench(lambda: src.copy_(big))
copy_gbs = 2 * big.numel() * 4 / copy_ms / 1e6
print(f"copy {copy_ms * 1e3:.1f} us = {copy_gbs:.0f} GB/s")
del big, src
rules = {"now": original, "split below 1 block of 64 per SM": wider(1), "below 2 per SM": wider(2),
         "now (again)": original, "below 1 per SM (again)": wider(1)}
for rows, cols, dtype in ((8192, 8192, torch.float32), (4096, 32000, torch.float32), (16384, 8192, torch.float32),
                          (2048, 16384, torch.float32), (32768, 5120, torch.float32), (8192, 8192, torch.bfloat16),
                          (65536, 1024, torch.float32), (16384, 4096, torch.bfloat16)):
    x = torch.randn(rows, cols, device="cuda").to(dtype)
    ref = x.double().sum(0)
    for label, rule in rules.items():
        S.few_programs = rule
        torch._dynamo.reset()
        with braze.config.patch(graph_cache=False):
            report = braze.explain(lambda x: x.sum(0), x)
            f = braze.compile(lambda x: x.sum(0))
            out = f(x)
        err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
        ms = triton.testing.do_bench(lambda: f(x))
        shapes = "+".join(k.shape for k in report.kernels)
        launches = [line.strip() for line in report.graphs[0].source.split("# ---- launchers")[1].splitlines()
                    if "[(" in line]
        shapes += " " + " ".join(line[line.index("[("):line.index(")](") + 1] + line[line.index("XBLOCK"):-1]
                                 for line in launches)
        print(f"{rows}x{cols} {str(dtype)[6:]} {label}: {shapes}, {ms * 1e3:.1f} us, "
              f"{x.numel() * x.element_size() / ms / 1e6 / copy_gbs * 100:.0f}% of copy (rel err {err:.1e})")
    del x
S.few_programs = original
