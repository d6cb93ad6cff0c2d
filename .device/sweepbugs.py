"""The GPU sweep's index_fill value gradient and int64 __rmod__ mismatches, one sample at a time."""
import torch
import braze
from braze.backend import Recording
from torch.testing._internal.common_methods_invocations import op_db

torch.manual_seed(0)
dev = "cuda"


def index_fill(value_device):
    x = torch.randn(5, 5, device=dev, requires_grad=True)
    v = torch.randn((), device=value_device, requires_grad=True)
    idx = torch.tensor([2, 1, 4, 2, 2], device=dev)
    fn = lambda x, v: x.index_fill(-1, idx, v)  # noqa: E731
    g = torch.randn(5, 5, device=dev)
    ex, ev = torch.autograd.grad(fn(x, v), (x, v), g)
    torch._dynamo.reset()
    with Recording() as rec:
        out = torch.compile(fn, backend="braze")(x, v)
        bx, bv = torch.autograd.grad(out, (x, v), g)
    print("index_fill value on", value_device, "eager", ev.item(), "braze", bv.item(),
          "x grad diff", (bx - ex).abs().max().item(), "graphs", [(c.kind, len(c.kernels), c.fallbacks) for c in rec.graphs],
          "failures", [f[2][:200] for f in rec.failures], flush=True)
    for c in rec.graphs:
        print(c.kind, c.fx_code[:3000])


def rmod():
    op = [o for o in op_db if o.name == "__rmod__"][0]
    for i, s in enumerate(op.sample_inputs(dev, torch.int64)):
        args = (s.input, *s.args)
        fn = lambda a, b: op(a, b)  # noqa: E731
        e = fn(*args)
        torch._dynamo.reset()
        b = torch.compile(fn, backend="braze")(*args)
        bad = (e != b).nonzero()
        divisor = torch.broadcast_to(s.input, e.shape)
        zeros = (divisor == 0).sum().item()
        print("rmod", i, s.input.shape, "mismatches", len(bad), "zero divisors", zeros, flush=True)
        for k in bad[:3].tolist():
            print("   at", k, "divisor", divisor[tuple(k)].item(),
                  "eager", e[tuple(k)].item(), "braze", b[tuple(k)].item())


for d in ("cuda", "cpu"):
    try:
        index_fill(d)
    except Exception as exc:
        print("index_fill", d, "raised", type(exc).__name__, str(exc)[:300])
torch.manual_seed(1)
rmod()
