"""Changing sizes: compiles, total time and per-call time, eager vs Inductor vs braze.

Takes (command line): ``--device cpu|cuda``, ``--sizes N`` (distinct sizes per model),
``--only NAME``, ``--no-per-shape``. Gives: a Markdown table per model on stdout.

Models: a transformer block (LayerNorm, q/k/v projections, causal SDPA, an MLP with GELU,
residuals; inference and a training step) called with ``N`` distinct sequence lengths,
and a CNN block (convolution, BatchNorm, ReLU, max pooling; inference) called with ``N``
distinct batch sizes. Each compiler runs on a fresh Dynamo and fresh, private compile
caches, in this one process, in two modes: Dynamo's default (the first size static, a
symbolic graph after a size changes) and ``dynamic=True``. braze also runs with
``symbolic_sizes`` off (its former one-compile-per-shape path).

Columns: ``compiles``: graphs the backend compiled (braze: each size class of each graph,
forward and backward; Inductor: the graphs Dynamo handed it); ``total s``: wall time of
all ``N`` calls, compiles included; ``per call ms``: the median steady-state time at
three sizes, each against the same sizes compiled statically (``static ms``) by the same
compiler.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch


class Block(torch.nn.Module):
    def __init__(self, d=256, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(d, -1))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class ConvBlock(torch.nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)


def models(device: str, count: int) -> list:
    """(name, module, training, sizes, input of a size)."""
    gen = torch.Generator().manual_seed(0)
    lengths = sorted(torch.randperm(512, generator=gen)[:count].add(1).tolist())
    batches = sorted(torch.randperm(128, generator=gen)[:count].add(1).tolist())
    block = Block().to(device)
    conv = ConvBlock().to(device).eval()
    return [
        ("transformer block, inference", block, False, lengths,
         lambda t: torch.randn(2, t, 256, device=device)),
        ("transformer block, training step", block, True, lengths,
         lambda t: torch.randn(2, t, 256, device=device, requires_grad=True)),
        ("CNN block, inference", conv, False, batches, lambda b: torch.randn(b, 32, 28, 28, device=device)),
    ]


def step(fn, x, training: bool):
    if training:
        fn(x).sum().backward()
    else:
        with torch.no_grad():
            fn(x)


class Counting:
    """A backend wrapper that counts what it compiles."""

    def __init__(self, name: str):
        self.name, self.count = name, 0

    def __call__(self, gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx
        self.count += 1
        return compile_fx(gm, example_inputs)


def compiled_fn(module, compiler: str, dynamic, symbolic: bool = True):
    """(the compiled module, () -> compiles so far)."""
    import braze
    torch._dynamo.reset()
    if compiler == "inductor":
        counting = Counting("inductor")
        return torch.compile(module, backend=counting, dynamic=dynamic), lambda: counting.count
    recording = braze.backend.Recording().__enter__()
    options = {} if symbolic else {"symbolic_sizes": False}
    fn = torch.compile(module, backend="braze", dynamic=dynamic, options=options)
    return fn, lambda: len(recording.graphs)


def median_ms(fn, x, training: bool, device: str, calls: int = 20) -> float:
    times = []
    for _ in range(calls):
        sync(device)
        t = time.perf_counter()
        step(fn, x, training)
        sync(device)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def run_mode(module, training, sizes, make, compiler, dynamic, symbolic, device, probe) -> dict:
    fn, compiles = compiled_fn(module, compiler, dynamic, symbolic)
    inputs = [make(s) for s in sizes]
    sync(device)
    t = time.perf_counter()
    for x in inputs:
        step(fn, x, training)
    sync(device)
    total = time.perf_counter() - t
    per_call = [median_ms(fn, make(s), training, device) for s in probe]
    return {"compiles": compiles(), "total": total, "per_call": per_call}


def static_ms(module, training, make, compiler, device, probe) -> list:
    out = []
    for s in probe:
        fn, _ = compiled_fn(module, compiler, False)
        x = make(s)
        step(fn, x, training)
        out.append(median_ms(fn, x, training, device))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", type=int, default=100)
    parser.add_argument("--only", default="")
    parser.add_argument("--no-per-shape", action="store_true", help="leave out braze's one-compile-per-shape mode")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "triton")
        os.environ["BRAZE_CACHE_DIR"] = os.path.join(scratch, "braze")
        import braze.config
        braze.config.cache_dir = os.environ["BRAZE_CACHE_DIR"]
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 4 * args.sizes)
        for name, module, training, sizes, make in models(args.device, args.sizes):
            if args.only and args.only not in name:
                continue
            probe = [sizes[len(sizes) // 4], sizes[len(sizes) // 2], sizes[-1]]
            eager = [median_ms(module, make(s), training, args.device) for s in probe]
            print(f"\n### {name}: {len(sizes)} sizes ({sizes[0]}..{sizes[-1]}), {args.device}\n")
            print(f"per-call times at sizes {probe}\n")
            print("| compiler | mode | compiles | total s | per call ms | static ms |")
            print("|---|---|---|---|---|---|")
            print(f"| eager | | 0 | | {' / '.join(f'{m:.3f}' for m in eager)} | |")
            for compiler in ("inductor", "braze"):
                static = static_ms(module, training, make, compiler, args.device, probe)
                modes = [("default", None, True), ("dynamic=True", True, True)]
                if compiler == "braze" and not args.no_per_shape:
                    modes.append(("dynamic=True, per shape", True, False))
                for label, dynamic, symbolic in modes:
                    r = run_mode(module, training, sizes, make, compiler, dynamic, symbolic, args.device, probe)
                    print(f"| {compiler} | {label} | {r['compiles']} | {r['total']:.1f} | "
                          f"{' / '.join(f'{m:.3f}' for m in r['per_call'])} | "
                          f"{' / '.join(f'{m:.3f}' for m in static)} |", flush=True)


if __name__ == "__main__":
    main()
