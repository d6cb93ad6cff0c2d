"""Unsplit column sums of one bf16 input compiled by braze on the H100: the [RBLOCK, XBLOCK] block at
2x, 4x and 8x the device's block elements, and at 4x with 64 columns a program, next to Inductor.
python .device/coltile2.py (runs against commit a153e51 plus the exploration patch that added
shapes._column_elements; the rule it chose, "x4 64 cols", is shapes._column's half_width since)"""
import torch, triton
import braze
import braze.codegen.triton.shapes as S

half, elements, column = S._half_width, S._column_elements, S._column


def times(k):
    return lambda plan, device: device.block_elements * (k if half(plan) else 1)


def wide_columns(xnumel, rnumel, device, elements=0):
    shape = column(xnumel, rnumel, device, elements)
    x = min(64, S.next_pow2(xnumel))
    r = min(S.next_pow2(rnumel), max(1, (elements or device.block_elements) // x))
    return S.Shape("column", {"XBLOCK": x, "RBLOCK": r}, shape.num_warps, (S.cdiv(xnumel, x), 1, 1), orientation="column")


rules = {"x2": (times(2), column), "x4": (times(4), column), "x8": (times(8), column),
         "x4 64 cols": (times(4), wide_columns), "x8 64 cols": (times(8), wide_columns)}
big = torch.randn(1 << 26, device="cuda")
src = torch.empty_like(big)
copy_ms = triton.testing.do_bench(lambda: src.copy_(big))
copy_gbs = 2 * big.numel() * 4 / copy_ms / 1e6
print(f"copy {copy_ms * 1e3:.1f} us = {copy_gbs:.0f} GB/s")
del big, src
fn = lambda x: x.sum(0)
for rows, cols, dtype in ((4096, 16384, torch.bfloat16), (2048, 16384, torch.bfloat16), (4096, 32000, torch.bfloat16),
                          (8192, 16384, torch.bfloat16), (16384, 16384, torch.bfloat16), (1024, 65536, torch.bfloat16),
                          (4096, 16384, torch.float16), (4096, 8192, torch.bfloat16)):
    x = torch.randn(rows, cols, device="cuda").to(dtype)
    ref = x.double().sum(0)
    reads = x.numel() * x.element_size()
    line = []
    for label in list(rules) + ["inductor"]:
        torch._dynamo.reset()
        if label == "inductor":
            f = torch.compile(fn); launch = ""
        else:
            S._column_elements, S._column = rules[label]
            with braze.config.patch(graph_cache=False):
                report = braze.explain(fn, x)
                f = braze.compile(fn)
                f(x)
            src = report.graphs[0].source.split("# ---- launchers")[1]
            launch = [l for l in src.splitlines() if "[(" in l][0]
            launch = launch[launch.index("[("):launch.index(")](") + 1] + " " + launch[launch.index("XBLOCK"):-1]
        out = f(x)
        err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
        ms = triton.testing.do_bench(lambda: f(x))
        line.append(f"{label} {ms * 1e3:.1f} us {reads / ms / 1e6 / copy_gbs * 100:.0f}% {launch} err {err:.0e}")
    print(f"{rows}x{cols} {str(dtype)[6:]}:\n   " + "\n   ".join(line), flush=True)
    del x
S._column_elements, S._column = elements, column
