"""What braze's run-time index checks cost: eager, Inductor, braze with the checks and braze
without them (``config.runtime_checks``), side by side in one run.

Takes: ``--device cpu|cuda`` (and ``--threads``, ``--budget`` on the CPU). Gives: a markdown
table on stdout: per workload the median ms of each, braze's % of the measured copy bandwidth
on the GPU, and the checks' cost (checked / unchecked - 1). The workloads read indices from
memory: an embedding lookup, a gather along rows, an accumulating scatter and an indexed
row pick, sized as the GPU benchmarks are (1/16 on the CPU).

    python -m benchmarks.checks --device cuda
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import braze  # noqa: F401 (registers the backend)
from benchmarks.measure import copy_bandwidth, sync, time_cpu, time_gpu


def _embedding(weight, ids):
    return F.embedding(ids, weight) * 2


def _gather(x, index):
    return torch.gather(x, 1, index) + 1


def _scatter_add(base, index, src):
    return base.scatter_add(1, index, src)


def _rows(x, rows):
    return x[rows].relu()


def workloads(device: str, scale: int) -> dict:
    """name -> (function, arguments, bytes moved)."""
    d = device
    weight, ids = torch.randn(50000, 1024 // scale, device=d), torch.randint(0, 50000, (64, 512), device=d)
    x = torch.randn(8192 // scale, 4096, device=d)
    index = torch.randint(0, 4096, x.shape, device=d)
    src = torch.randn(x.shape, device=d)
    rows = torch.randint(0, x.shape[0], (x.shape[0] // 2,), device=d)
    emb = ids.numel() * weight.shape[1] * 4 * 2 + ids.numel() * 8
    return {
        "embedding lookup": (_embedding, (weight, ids), emb),
        "gather along rows": (_gather, (x, index), x.numel() * (4 + 8 + 4)),
        "scatter_add along rows": (_scatter_add, (x, index, src), x.numel() * (4 + 8 + 4 + 4)),
        "rows picked by index": (_rows, (x, rows), rows.numel() * x.shape[1] * 8 + rows.numel() * 8),
    }


def compiled(fn, backend: str, checks: bool = True):
    if backend != "braze":
        return torch.compile(fn, backend=backend)
    return torch.compile(fn, backend="braze", options={"runtime_checks": checks})


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--budget", type=float, default=2.0, help="CPU: seconds of timed calls per variant")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    gpu = args.device == "cuda"
    copy = copy_bandwidth(args.device) if gpu else None
    print(f"device {torch.cuda.get_device_name() if gpu else 'cpu'}, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}" + (f", copy {copy:.0f} GB/s" if gpu else ""))
    print("\n| workload | eager ms | Inductor ms | braze ms | braze, no checks ms | checks' cost |"
          + (" braze % of copy |" if gpu else ""))
    print("|---|---|---|---|---|---|" + ("---|" if gpu else ""))
    for name, (fn, inputs, nbytes) in workloads(args.device, 1 if gpu else 16).items():
        variants = {"eager": fn, "inductor": compiled(fn, "inductor"), "braze": compiled(fn, "braze"),
                    "unchecked": compiled(fn, "braze", checks=False)}
        for call in variants.values():  # compile and warm up
            call(*inputs)
        sync(args.device)
        if gpu:
            ms = {k: time_gpu(lambda a, c=c: c(*a), inputs) for k, c in variants.items()}
        else:
            times = time_cpu({k: (lambda a, c=c: c(*a)) for k, c in variants.items()}, [inputs],
                             budget_s=args.budget)
            ms = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
        cost = ms["braze"] / ms["unchecked"] - 1
        row = f"| {name} | {ms['eager']:.3f} | {ms['inductor']:.3f} | {ms['braze']:.3f} | {ms['unchecked']:.3f} " \
              f"| {cost * 100:+.1f} % |"
        if gpu:
            row += f" {nbytes / ms['braze'] / 1e6 / copy * 100:.0f} % |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
