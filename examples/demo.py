"""braze demo: compile a small model, show what braze built, compare with eager.

The first compile runs with an empty compile cache of its own (a temporary folder), so its
time is a true cold compile: Dynamo, AOTAutograd, braze's passes and the C++ compiler.
Then the same compile again after torch._dynamo.reset(), with that cache warm.

Run: python examples/demo.py
"""
import shutil
import tempfile
import time

import torch
import torch.nn.functional as F

import braze


class Block(torch.nn.Module):
    """LayerNorm -> Linear -> GELU -> Linear, with a residual: a transformer MLP block."""

    def __init__(self, dim=256):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.up = torch.nn.Linear(dim, 4 * dim)
        self.down = torch.nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def median_ms(fn, *args, repeat=50):
    for _ in range(5):
        fn(*args)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2] * 1000


def first_call_s(model, x) -> float:
    """Seconds of the first call of a freshly compiled model (Dynamo starts anew)."""
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="braze")
    t = time.perf_counter()
    compiled(x)
    return time.perf_counter() - t


def main():
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(64, 128, 256)
    cache = tempfile.mkdtemp(prefix="braze-demo-")
    try:
        with braze.config.patch(cache_dir=cache), torch.no_grad():
            cold_s = first_call_s(model, x)
            warm_s = first_call_s(model, x)
            print("== braze.explain(model, x) ==")
            print(braze.explain(model, x))
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="braze")
            err = (compiled(x) - model(x)).abs().max().item()
            eager_ms = median_ms(model, x)
            braze_ms = median_ms(compiled, x)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    print("\n== eager vs braze (inference, CPU) ==")
    print(f"max abs difference from eager: {err:.2e}")
    print(f"first call, cold compile (Dynamo + AOTAutograd + braze + C++ compiler, empty cache): {cold_s:.2f} s")
    print(f"first call again after torch._dynamo.reset(), the compile cache warm: {warm_s:.2f} s")
    print(f"eager: {eager_ms:.2f} ms   braze: {braze_ms:.2f} ms   speed-up: {eager_ms / braze_ms:.2f}x")


if __name__ == "__main__":
    main()
