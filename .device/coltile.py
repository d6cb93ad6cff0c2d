"""Column reductions compiled by braze on the H100 with blocks as if every input were float32 ('old') and
with the larger blocks braze gives one half-width input ('new', shapes._half_width: split tiles of 2x,
unsplit column blocks of 4x the elements at 64 columns), next to Inductor. Prints us and % of copy
(bytes read / copy rate). python .device/coltile.py"""
import torch
import probekit
import braze.codegen.triton.shapes as S

half = S._half_width
rules = {"old": lambda plan: False, "new": half}
copy_gbs = probekit.copy_gbs()
fns = {"sum": lambda x, y: x.sum(0), "sum(x*y)": lambda x, y: (x * y).sum(0),
       "bn-like 2 sums": lambda x, y: (y.sum(0), (y * x).sum(0)), "var_mean": lambda x, y: torch.var_mean(x, 0)}
cases = [(8192, 8192, torch.bfloat16, "sum"), (16384, 4096, torch.bfloat16, "sum"), (32768, 1024, torch.bfloat16, "sum"),
         (4096, 16384, torch.bfloat16, "sum"), (2048, 16384, torch.bfloat16, "sum"), (4096, 32000, torch.bfloat16, "sum"),
         (8192, 8192, torch.float32, "sum"), (4096, 16384, torch.float32, "sum"), (8192, 8192, torch.bfloat16, "sum(x*y)"),
         (4096, 16384, torch.bfloat16, "sum(x*y)"), (200704, 64, torch.bfloat16, "bn-like 2 sums"),
         (50176, 128, torch.bfloat16, "sum"), (8192, 8192, torch.bfloat16, "var_mean")]
for rows, cols, dtype, fname in cases:
    fn = fns[fname]
    x = torch.randn(rows, cols, device="cuda").to(dtype)
    y = torch.randn(rows, cols, device="cuda").to(dtype)
    reads = (2 if fname != "sum" and fname != "var_mean" else 1) * x.numel() * x.element_size()
    line = probekit.compare(fn, (x, y), S, "_half_width", rules, reads, copy_gbs)
    print(f"{rows}x{cols} {str(dtype)[6:]} {fname}: " + " | ".join(line), flush=True)
    del x, y
