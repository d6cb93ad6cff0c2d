"""braze demo: compile a small model, show what braze built, compare with eager.

Run: python examples/demo.py
"""
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


def main():
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(64, 128, 256)

    print("== braze.explain(model, x) ==")
    with torch.no_grad():
        print(braze.explain(model, x))

    torch._dynamo.reset()
    compiled = torch.compile(model, backend="braze")
    with torch.no_grad():
        t = time.perf_counter()
        out = compiled(x)
        compile_s = time.perf_counter() - t
        err = (out - model(x)).abs().max().item()
        eager_ms = median_ms(model, x)
        braze_ms = median_ms(compiled, x)
    print("\n== eager vs braze (inference, CPU) ==")
    print(f"max abs difference from eager: {err:.2e}")
    print(f"first call (Dynamo + AOTAutograd + braze compile, cache as found): {compile_s:.2f} s")
    print(f"eager: {eager_ms:.2f} ms   braze: {braze_ms:.2f} ms   speed-up: {eager_ms / braze_ms:.2f}x")


if __name__ == "__main__":
    main()
