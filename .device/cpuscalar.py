"""CUDA graphs that read a 0-d CPU tensor (eager's CPU-scalar case): braze against eager, bit for bit.
python .device/cpuscalar.py"""
import torch
import braze
from braze.backend import Recording

x = torch.randn(1 << 20, device="cuda") * 100
s = torch.tensor(3.0)
cases = {"x / s": lambda x, s: x / s, "x * s": lambda x, s: x * s, "x + s": lambda x, s: x + s,
         "floor(x / s)": lambda x, s: torch.div(x, s, rounding_mode="floor"),
         "where": lambda x, s: torch.where(x > 0, x, s)}
for name, fn in cases.items():
    torch._dynamo.reset()
    with Recording() as rec:
        try:
            got = torch.compile(fn, backend="braze")(x, s)
        except Exception as exc:
            print(f"{name}: raised {type(exc).__name__}: {str(exc)[:200]}")
            continue
    want = fn(x, s)
    same = (got == want) | (got.isnan() & want.isnan())
    print(f"{name}: graphs {len(rec.graphs)}, failures {len(rec.failures)}, differing {int((~same).sum())} of {x.numel()}")
