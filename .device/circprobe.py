"""One circular-pad sample on CUDA under braze (strict), forward or forward+backward: argv = index mode."""
import sys
import torch
import torch.nn.functional as F
import braze
SAMPLES = [((1, 3, 3), (1, 2)), ((1, 3, 3), (0, 1)), ((3, 3, 5, 5), (0, 2, 0, 1)),
           ((1, 3, 3, 3, 3), (1, 1, 1, 1, 1, 1)), ((1, 3, 4, 4), (-1, 1, -2, 1))]
k, mode = int(sys.argv[1]), sys.argv[2]
shape, pad = SAMPLES[k]
x = torch.randn(*shape, device="cuda", requires_grad=mode == "grad")
fn = lambda x: F.pad(x, pad, mode="circular")  # noqa: E731
with braze.config.patch(strict=True):
    out = torch.compile(fn, backend="braze")(x)
    if mode == "grad":
        g = torch.randn_like(out)
        out.backward(g)
    torch.cuda.synchronize()
ref = fn(x.detach().requires_grad_(mode == "grad"))
print(k, mode, shape, pad, "ok", torch.equal(out.detach(), ref.detach()))
