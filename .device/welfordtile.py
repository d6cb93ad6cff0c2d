"""Column var_mean of one bf16 input on the H100: braze's split Welford as it is (2048-element tiles),
with the half-width tiles (4096, as a plain sum gets) and 8192, next to Inductor.
python .device/welfordtile.py [--patch-only MODE]: with --patch-only, only patch shapes (for stepab.py)."""
import sys
import torch
import probekit
import braze.codegen.triton.shapes as S
from braze.ir.expr import Op, free_vars, walk

half = S._half_width


def one_narrow_input(plan):
    rvars = set(plan.reduce)
    loads = {(e.arg, e.args[0]) for e in walk(plan.expressions()) if e.op is Op.LOAD and free_vars(e.args[0]) & rvars}
    return sum(plan.dtypes[name].itemsize for name, _ in loads) <= 2


split_tile = S._split_tile


def tile_x4(plan, column, device):
    return S.COLUMN_SPLIT_TILE * 4 if column and one_narrow_input(plan) else split_tile(plan, column, device)


rules = {"now": (half, split_tile), "welford x2": (one_narrow_input, split_tile), "welford x4": (one_narrow_input, tile_x4)}
if "--patch-only" in sys.argv:
    S._half_width, S._split_tile = rules[sys.argv[sys.argv.index("--patch-only") + 1]]
else:
    copy_gbs = probekit.copy_gbs()
    fn = lambda x: torch.var_mean(x, 0)
    for rows, cols in ((8192, 8192), (16384, 4096), (200704, 64), (50176, 128), (12544, 256), (4096, 16384)):
        x = torch.randn(rows, cols, device="cuda").to(torch.bfloat16)
        ref = torch.var_mean(x.double(), 0)
        line = probekit.compare(fn, (x,), S, ("_half_width", "_split_tile"), rules, x.numel() * 2, copy_gbs,
                                reference=ref)
        print(f"{rows}x{cols} bf16 var_mean: " + " | ".join(line), flush=True)
        del x
