"""index_fill's backward on CUDA: the graph braze compiles (with aten._unique) and its values."""
import torch
import braze
from braze.backend import Recording
torch.manual_seed(0)
x = torch.randn(5, 5, device="cuda", requires_grad=True)
v = torch.randn((), device="cuda", requires_grad=True)
idx = torch.tensor([2, 1, 4, 2, 2], device="cuda")
fn = lambda x, v: x.index_fill(-1, idx, v)  # noqa: E731
g = torch.randn(5, 5, device="cuda")
ex, ev = torch.autograd.grad(fn(x, v), (x, v), g)
with Recording() as rec:
    out = torch.compile(fn, backend="braze")(x, v)
    bx, bv = torch.autograd.grad(out, (x, v), g)
print("eager", ev.item(), "braze", bv.item())
for c in rec.graphs:
    print("=====", c.kind, c.fallbacks)
    print(c.fx.print_readable(print_output=False))
    for n in c.fx.graph.nodes:
        print(n.name, n.meta.get("val").shape if hasattr(n.meta.get("val"), "shape") else n.meta.get("val"))
    print(c.wrapper)
