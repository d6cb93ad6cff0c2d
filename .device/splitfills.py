"""Split column reductions on the H100 with more programs per row block: shapes.SPLIT_FILLS (2 now) at 2, 4,
8, 16, for var_mean and sum of bf16 and fp32 8192x8192, and bf16 var_mean of BatchNorm-like shapes; Inductor
alongside. python .device/splitfills.py"""
import torch
import probekit
import braze.codegen.triton.shapes as S

copy_gbs = probekit.copy_gbs()
fns = {"var_mean": lambda x: torch.var_mean(x, 0), "sum": lambda x: x.sum(0)}
for rows, cols, dtype, name in ((8192, 8192, torch.bfloat16, "var_mean"), (8192, 8192, torch.float32, "var_mean"),
                                (8192, 8192, torch.bfloat16, "sum"), (8192, 8192, torch.float32, "sum"),
                                (200704, 64, torch.bfloat16, "var_mean"), (12544, 256, torch.bfloat16, "var_mean"),
                                (32768, 1024, torch.bfloat16, "sum")):
    fn = fns[name]
    x = torch.randn(rows, cols, device="cuda").to(dtype)
    line = probekit.compare(fn, (x,), S, "SPLIT_FILLS", {f: f for f in (2, 4, 8, 16)},
                            x.numel() * x.element_size(), copy_gbs)
    print(f"{rows}x{cols} {str(dtype)[6:]} {name}: " + " | ".join(line), flush=True)
    del x
