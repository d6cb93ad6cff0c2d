"""CUDA graphs for graphs that update state: a ResNet-50 training step and an Adam step.

Run: ``python -m benchmarks.cudagraphs_mutation [--device cuda] [--workloads resnet50,adam]
[--batch 32] [--image-size 224] [--tensors 32] [--json PATH]``

Takes: the device (CUDA; on the CPU the CUDA-graph columns are left empty, which only
checks the script's logic), the workloads, their sizes. Gives: a markdown table: per
workload the median ms of one step in eager, braze, braze with ``cudagraphs`` and
Inductor's ``mode="reduce-overhead"`` (each compiled, checked and timed in turn in one
process: ``triton.testing.do_bench`` through ``benchmarks.measure``), and per compiler
whether its state after ``CHECK_STEPS`` steps matches eager's. ``--json PATH`` writes the
same rows as JSON.

Workloads (their state is updated inside the compiled graph):
- ``resnet50``: torchvision's ResNet-50 (random weights) training step under bf16
  autocast: forward, cross-entropy, backward (BatchNorm updates its running statistics);
  checked: the loss, the gradients and the running statistics (bf16 tolerance).
- ``adam``: a hand-written Adam step over ``--tensors`` tensors, parameters, gradients,
  moments and the step count marked static (``torch._dynamo.mark_static_address``), all
  updated in place; checked: parameters and moments (float32 tolerance).

Results: docs/benchmarks.md, "CUDA graphs".
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics

import torch

from benchmarks.measure import TOLERANCE, time_cpu, time_gpu

CHECK_STEPS = 3  # steps compared with eager: the first runs the graph, the next replay it
COMPILERS = ("eager", "braze", "braze+cudagraphs", "inductor reduce-overhead")


def compiled(compiler: str, fn):
    """``fn`` as ``compiler`` runs it (a fresh Dynamo for each)."""
    torch._dynamo.reset()
    if compiler == "eager":
        return fn
    if compiler == "inductor reduce-overhead":
        return torch.compile(fn, mode="reduce-overhead")
    return torch.compile(fn, backend="braze", options={"cudagraphs": compiler == "braze+cudagraphs"})


def close(actual: list, expected: list, tolerance: float) -> tuple[bool, float]:
    """Whether each tensor is within ``tolerance`` of eager's largest value, and the worst."""
    worst = 0.0
    for a, e in zip(actual, expected, strict=True):
        a64, e64 = a.detach().double(), e.detach().double()
        worst = max(worst, ((a64 - e64).abs().max() / e64.abs().max().clamp_min(1e-30)).item())
    return worst <= tolerance, worst


class ResNetStep:
    """One ResNet-50 training step (bf16 autocast) on a model of its own."""

    name = "resnet50"

    def __init__(self, device: str, batch: int, image_size: int):
        import torchvision  # (only this workload needs it)
        self.device = device
        self.model = torchvision.models.resnet50().to(device)
        self.x = torch.randn(batch, 3, image_size, image_size, device=device)
        self.target = torch.randint(0, 1000, (batch,), device=device)

    def make(self, compiler: str):
        model = copy.deepcopy(self.model)
        forward = compiled(compiler, model)
        device_type = torch.device(self.device).type

        def step():
            model.zero_grad(set_to_none=True)
            with torch.autocast(device_type, dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(forward(self.x), self.target)
            loss.backward()
            return loss.detach()
        return step, lambda loss: [loss] + [p.grad for p in model.parameters()] + list(model.buffers())

    tolerance = TOLERANCE[torch.bfloat16]


def adam(params, grads, exp_avgs, exp_avg_sqs, step, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    """Adam, every tensor updated in place (the step count is a 0-d tensor)."""
    step.add_(1)
    correction1 = 1 - beta1 ** step
    correction2 = 1 - beta2 ** step
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        p.sub_(lr * (m / correction1) / ((v / correction2).sqrt() + eps))


class AdamStep:
    """One Adam step over ``tensors`` tensors of a few small shapes (launch-bound)."""

    name = "adam"
    tolerance = TOLERANCE[torch.float32]
    SHAPES = [(4096,), (512, 512), (1024, 256), (64, 1024)]

    def __init__(self, device: str, tensors: int):
        shapes = [self.SHAPES[k % len(self.SHAPES)] for k in range(tensors)]
        self.state = [[torch.randn(s, device=device) for s in shapes],  # parameters
                      [torch.randn(s, device=device) for s in shapes],  # gradients
                      [torch.randn(s, device=device) * 0.1 for s in shapes],  # first moments
                      [torch.rand(s, device=device) * 0.01 for s in shapes],  # second moments
                      torch.tensor(10.0, device=device)]  # steps taken

    def make(self, compiler: str):
        state = copy.deepcopy(self.state)
        for t in [*(t for group in state[:4] for t in group), state[4]]:
            torch._dynamo.mark_static_address(t)
        fn = compiled(compiler, adam)
        return lambda: fn(*state), lambda _: [*state[0], *state[2], *state[3], state[4]]


def measure(workload, device: str) -> dict:
    """Per compiler: ms per step and the check against eager (None where it does not run)."""
    cuda = torch.device(device).type == "cuda"
    row = {"workload": workload.name}
    expected = None
    for compiler in COMPILERS:
        if not cuda and compiler in ("braze+cudagraphs", "inductor reduce-overhead"):
            row[compiler] = None
            continue
        step, state = workload.make(compiler)
        for _ in range(CHECK_STEPS):
            _mark_step()
            result = step()
        now = [t.detach().clone() for t in state(result)]
        if expected is None:
            expected = now
        ok, worst = close(now, expected, workload.tolerance)
        row[compiler] = {"ms": _time(step, cuda), "matches_eager": ok, "worst_error": worst}
        print(f"{workload.name} {compiler}: {row[compiler]['ms']:.3f} ms, "
              f"{'matches' if ok else 'DIFFERS FROM'} eager (worst {worst:.1e})", flush=True)
    return row


def _mark_step() -> None:
    """A new step for Inductor's CUDA graph trees (their outputs of the last may be overwritten)."""
    if hasattr(torch, "compiler") and hasattr(torch.compiler, "cudagraph_mark_step_begin"):
        torch.compiler.cudagraph_mark_step_begin()


def _time(step, cuda: bool) -> float:
    def call(_):
        _mark_step()
        step()
    if cuda:
        return time_gpu(call, None)
    return statistics.median(time_cpu({"step": call}, [None], budget_s=1.0, rounds=3, min_calls=6)["step"])


def table(rows: list) -> str:
    lines = ["| workload | " + " | ".join(f"{c} ms" for c in COMPILERS) + " | all match eager |",
             "|---|" + "---|" * (len(COMPILERS) + 1)]
    for row in rows:
        cells = [f"{row[c]['ms']:.3f}" if row[c] else "-" for c in COMPILERS]
        ok = all(row[c]["matches_eager"] for c in COMPILERS if row[c])
        lines.append(f"| {row['workload']} | " + " | ".join(cells) + f" | {'yes' if ok else 'NO'} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workloads", default="resnet50,adam", help="comma-separated, of resnet50, adam")
    parser.add_argument("--batch", type=int, default=32, help="ResNet-50 images per step")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--tensors", type=int, default=32, help="tensors the Adam step updates")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the rows as JSON")
    ns = parser.parse_args(argv)
    import braze  # noqa: F401  (registers the backend)
    makers = {"resnet50": lambda: ResNetStep(ns.device, ns.batch, ns.image_size),
              "adam": lambda: AdamStep(ns.device, ns.tensors)}
    names = ns.workloads.split(",")
    unknown = [n for n in names if n not in makers]
    if unknown:
        parser.error(f"unknown workloads {unknown}: choose among {', '.join(makers)}")
    device_name = torch.cuda.get_device_name() if torch.device(ns.device).type == "cuda" else ns.device
    rows = [measure(makers[name](), ns.device) for name in names]
    print(f"\n{device_name}, torch {torch.__version__}, median ms per step\n")
    print(table(rows))
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"device": device_name, "rows": rows}, f, indent=1)
    if not all(row[c]["matches_eager"] for row in rows for c in COMPILERS if row[c]):
        raise SystemExit("a compiled step does not match eager")


if __name__ == "__main__":
    main()
