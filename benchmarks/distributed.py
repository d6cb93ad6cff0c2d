"""Training under torch.distributed: DDP and FSDP2 with eager, Inductor and braze, side by side.

Run (one combination, or every one with ``--all``; rank 0 writes ``--out`` as JSON and
markdown, adding to the rows already there)::

    torchrun --nproc_per_node=2 benchmarks/distributed.py --model gpt2 --wrapper ddp --backend braze --steps 20
    torchrun --nproc_per_node=2 benchmarks/distributed.py --all --out dist.json
    torchrun --nproc_per_node=1 benchmarks/distributed.py --all --wrapper single --out dist.json
    python benchmarks/distributed.py --table dist.json
    python benchmarks/distributed.py --launch 2 --device cpu --tiny --all --out /tmp/dist.json

``--launch N`` starts N local processes itself (no torchrun); ``--device cpu --tiny`` runs
gloo on the CPU with the tiny models (a smoke test of the script).

Takes: a model (``gpt2``: GPT-2 small from transformers' ``GPT2Config`` defaults with random
weights, 8 sequences of 512 tokens per rank; ``resnet50``: torchvision's, 64 images of
224 px per rank), a wrapper (``ddp``: ``DDP(torch.compile(model))``; ``compiled_ddp``:
``torch.compile(DDP(model))``, graphs split at DDP's buckets; ``fsdp2``: ``fully_shard``
and ``torch.compile`` per block, then ``fully_shard`` of the model; ``single``: the model
alone on one device, the baseline of scaling), a backend (``eager``, ``inductor``,
``braze``) and a number of SGD steps, each under bfloat16 autocast on a batch of its own
per rank. Gives, per combination: rank 0's loss at every step, each rank's median step
time after ``WARMUP`` steps, its first step (cold compile: a fresh braze and Inductor cache
per combination) and what braze's cache did on it (entries built; found, ``waited``, after
another rank built them; ``hit``), and the number of graphs compiled. The markdown has the
timings table (each compiled loss against eager's, bf16 tolerance) and, where the JSON
holds both, the scaling of one device (``single``) to several (``ddp``).

NVLink multicast stays off (``NCCL_NVLS_ENABLE=0``, set before the process group starts).
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import socket
import statistics
import sys
import tempfile
import time

os.environ["NCCL_NVLS_ENABLE"] = "0"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a file: braze, benchmarks

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

MODELS = ("gpt2", "resnet50")
WRAPPERS = ("ddp", "compiled_ddp", "fsdp2")
BACKENDS = ("eager", "inductor", "braze")
WARMUP = 3  # steps left out of the median: compile, recompiles, the optimizer's first step
LIBRARY = {"gpt2": "transformers", "resnet50": "torchvision"}
BF16_RTOL = 1.6e-2  # torch.testing's relative tolerance for bfloat16


# ----------------------------------------------------------------------------- one combination

def build(model_name: str, tiny: bool, device: torch.device):
    """(model with random weights seeded alike on every rank, its case from the model zoo).

    A language model builds no KV cache: training has no use for it, and its per-layer
    ``is_initialized`` flag makes Dynamo compile each block of ``fsdp2`` again, past its
    limit of 8 recompiles (the last blocks then ran eagerly under both compilers)."""
    from benchmarks import model_zoo
    case = model_zoo.case(model_name, tiny)
    model = model_zoo.build(case, str(device))
    if hasattr(getattr(model, "config", None), "use_cache"):
        model.config.use_cache = False
    return model, case


def blocks(model_name: str, model) -> list:
    """The modules FSDP2 shards and compiles one by one."""
    if model_name == "gpt2":
        return list(model.transformer.h)
    return [b for layer in (model.layer1, model.layer2, model.layer3, model.layer4) for b in layer]


def wrap(model_name: str, model, wrapper: str, backend: str, device: torch.device):
    from torch.nn.parallel import DistributedDataParallel as DDP
    compiled = (lambda m: m) if backend == "eager" else (lambda m: torch.compile(m, backend=backend))
    ids = [device.index] if device.type == "cuda" else None
    if wrapper == "single":
        return compiled(model)
    if wrapper == "ddp":
        return DDP(compiled(model), device_ids=ids)
    if wrapper == "compiled_ddp":
        return compiled(DDP(model, device_ids=ids))
    from torch.distributed.fsdp import fully_shard
    for block in blocks(model_name, model):
        if backend != "eager":
            block.compile(backend=backend)
        fully_shard(block)
    return fully_shard(model)


def batches(case, steps: int, rank: int, device: torch.device) -> list:
    """One batch per step, each rank's its own."""
    import torch.utils._pytree as pytree
    out = []
    for step in range(steps):
        gen = torch.Generator().manual_seed(1000 * step + rank)
        out.append(pytree.tree_map(lambda t: t.to(device), case.inputs(gen, True)))
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(model, case, data: list, device: torch.device) -> tuple:
    """(losses, seconds per step) of SGD steps under bfloat16 autocast."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    losses, seconds = [], []
    for kwargs in data:
        sync(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = case.loss(case.call(model, kwargs), kwargs)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        seconds.append(time.perf_counter() - start)
        losses.append(loss.item())
    return losses, seconds


def run_one(ns, model_name: str, wrapper: str, backend: str, device: torch.device) -> dict:
    """This rank's results for one combination (a fresh Dynamo, fresh compile caches)."""
    import braze
    from braze.backend import Recording
    from braze.runtime import cache
    rank = dist.get_rank()
    folder = _shared_folder(ns)
    braze.config.cache_dir = os.path.join(folder, "braze")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(folder, "inductor")
    torch._dynamo.reset()
    model, case = build(model_name, ns.tiny, device)
    model = wrap(model_name, model, wrapper, backend, device)
    data = batches(case, ns.steps, rank, device)
    before = dict(cache.counts)
    dist.barrier()  # the ranks start compiling together
    with Recording() as rec:
        losses, seconds = train(model, case, data, device)
    timed = seconds[WARMUP:] or seconds
    median = statistics.median(timed)
    return {"losses": losses, "step_s": seconds, "median_ms": 1e3 * median, "first_step_s": seconds[0],
            "compile_s": seconds[0] - median, "graphs": len(rec.graphs),
            "from_graph_cache": sum(g.from_graph_cache for g in rec.graphs), "failures": len(rec.failures),
            "cache": {k: cache.counts[k] - before[k] for k in before}}


def _shared_folder(ns) -> str:
    """A new folder both ranks use (made by rank 0, its name sent to the others)."""
    name = [tempfile.mkdtemp(prefix="braze-dist-", dir=ns.scratch) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(name, src=0)
    return name[0]


# ----------------------------------------------------------------------------- the sweep

def combinations(ns) -> list:
    models = MODELS if ns.all and ns.model is None else [ns.model or "gpt2"]
    wrappers = ns.wrapper.split(",") if ns.wrapper else (WRAPPERS if ns.all else ["ddp"])
    backends = ns.backend.split(",") if ns.backend else (BACKENDS if ns.all else ["braze"])
    return [(m, w, b) for m in models for w in wrappers for b in backends]


def missing(model_name: str) -> str | None:
    library = LIBRARY[model_name]
    if importlib.util.find_spec(library) is None:
        return f"{model_name} skipped: {library} is not installed"
    return None


def sweep(ns, device: torch.device) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    start = time.perf_counter()
    for model_name, wrapper, backend in combinations(ns):
        row = {"model": model_name, "wrapper": wrapper, "backend": backend, "world": world,
               "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               "tiny": ns.tiny, "steps": ns.steps, "batch_per_rank": _batch(model_name, ns.tiny),
               "torch": torch.__version__}
        why = missing(model_name) or _unsupported(wrapper, world)
        over = [time.perf_counter() - start > ns.budget_s]
        dist.broadcast_object_list(over, src=0)  # every rank stops at the same combination
        if over[0]:
            why = f"not run: past --budget-s {ns.budget_s}"
        if why:
            row["skipped"] = why
            _say(rank, why)
        else:
            _say(rank, f"{model_name} / {wrapper} / {backend} on {world} rank(s)")
            mine = run_one(ns, model_name, wrapper, backend, device)
            everyone = [None] * world
            dist.all_gather_object(everyone, mine)
            row.update(ranks=everyone, losses=everyone[0]["losses"])
            _say(rank, f"  median {mine['median_ms']:.1f} ms, first step {mine['first_step_s']:.1f} s, "
                       f"cache {mine['cache']}")
        if rank == 0 and ns.out:
            write(ns.out, [row])


def _unsupported(wrapper: str, world: int) -> str | None:
    if wrapper == "single" and world != 1:
        return f"single is the one-device baseline: run it with one process, not {world}"
    return None


def _batch(model_name: str, tiny: bool) -> str:
    from benchmarks import model_zoo
    return model_zoo.batch(model_name, tiny)


def _say(rank: int, text: str) -> None:
    if rank == 0:
        print(text, flush=True)


# ----------------------------------------------------------------------------- results

def _key(row: dict) -> tuple:
    return row["model"], row["wrapper"], row["backend"], row["world"], row["device"], row["tiny"]


def write(path: str, rows: list) -> None:
    """Add ``rows`` to the JSON at ``path`` (replacing rows of the same combination) and
    write its markdown next to it."""
    old = json.load(open(path)) if os.path.exists(path) else []
    new = {_key(r): r for r in old}
    new.update({_key(r): r for r in rows})
    table = sorted(new.values(), key=lambda r: (r["model"], r["world"], _order(r)))
    with open(path, "w") as f:
        json.dump(table, f, indent=1)
    with open(os.path.splitext(path)[0] + ".md", "w") as f:
        f.write(markdown(table))


def _order(row: dict) -> tuple:
    wrappers = ("single",) + WRAPPERS
    return (wrappers.index(row["wrapper"]) if row["wrapper"] in wrappers else 9,
            BACKENDS.index(row["backend"]) if row["backend"] in BACKENDS else 9)


def markdown(rows: list) -> str:
    lines = ["| model | wrapper | ranks | backend | step ms (median, per rank) | speed-up vs eager | first step s "
             "(per rank) | braze cache per rank: built / found built by another rank / hit | braze graphs | "
             "losses vs eager (max rel. diff) |", "|" + " --- |" * 10]
    eager = {(r["model"], r["wrapper"], r["world"], r["device"], r["tiny"]): r for r in rows
             if r["backend"] == "eager" and "ranks" in r}
    for r in rows:
        if "ranks" not in r:
            lines.append(f"| {r['model']} | {r['wrapper']} | {r['world']} | {r['backend']} | {r['skipped']} |"
                         + " |" * 5)
            continue
        base = eager.get((r["model"], r["wrapper"], r["world"], r["device"], r["tiny"]))
        ms = [x["median_ms"] for x in r["ranks"]]
        ratio = f"{statistics.mean(x['median_ms'] for x in base['ranks']) / statistics.mean(ms):.2f}×" \
            if base else ""
        caches = " · ".join(f"{x['cache']['built']} / {x['cache']['waited']} / {x['cache']['hit']}"
                            for x in r["ranks"]) if r["backend"] == "braze" else ""
        first = " / ".join(f"{x['first_step_s']:.1f}" for x in r["ranks"])
        graphs = " / ".join(str(x["graphs"]) for x in r["ranks"]) if r["backend"] == "braze" else ""
        lines.append(f"| {r['model']} | {r['wrapper']} | {r['world']} | {r['backend']} | "
                     f"{' / '.join(f'{m:.1f}' for m in ms)} | {ratio} | {first} | {caches} | {graphs} | "
                     f"{_loss_check(r, base)} |")
    return "\n".join(lines + [""] + scaling(rows)) + "\n"


def _loss_check(row: dict, base: dict | None) -> str:
    if base is None or row["backend"] == "eager":
        return ""
    diff = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(row["losses"], base["losses"]))
    return f"{diff:.1e} ({'ok' if diff <= BF16_RTOL else 'DIFFERS'})"


def scaling(rows: list) -> list:
    """Step time of one device (``single``) next to DDP on several, at one per-rank batch."""
    single = {(r["model"], r["backend"], r["device"], r["tiny"]): r for r in rows
              if r["wrapper"] == "single" and "ranks" in r}
    out = []
    for r in rows:
        base = single.get((r["model"], r["backend"], r["device"], r["tiny"]))
        if r["wrapper"] != "ddp" or "ranks" not in r or base is None:
            continue
        one = base["ranks"][0]["median_ms"]
        many = statistics.mean(x["median_ms"] for x in r["ranks"])
        out.append(f"| {r['model']} | {r['backend']} | {one:.1f} | {r['world']} | {many:.1f} | "
                   f"{r['world'] * one / many:.2f}× |")
    if not out:
        return []
    return ["| model | backend | 1 device: step ms | ranks | DDP: step ms | throughput vs 1 device |",
            "|" + " --- |" * 6] + out


# ----------------------------------------------------------------------------- processes

def start(ns) -> torch.device:
    """Join the process group torchrun (or ``--launch``) described; the device of this rank."""
    local = int(os.environ.get("LOCAL_RANK", 0))
    cuda = ns.device == "cuda" or ns.device is None and torch.cuda.is_available()
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("WORLD_SIZE", 1))))
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(minutes=30))
    return device


def main_rank(ns) -> None:
    importlib.import_module("braze")  # registers the backend
    device = start(ns)
    try:
        sweep(ns, device)
    finally:
        dist.destroy_process_group()


def _launched(rank: int, world: int, port: int, ns) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    main_rank(ns)


def launch(ns) -> None:
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_launched, args=(ns.launch, port, ns), nprocs=ns.launch)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=MODELS)
    p.add_argument("--wrapper", help="ddp, compiled_ddp, fsdp2 or single (comma-separated with --all)")
    p.add_argument("--backend", help="eager, inductor or braze (comma-separated with --all)")
    p.add_argument("--all", action="store_true", help="every combination not pinned by the options above")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", choices=("cuda", "cpu"))
    p.add_argument("--tiny", action="store_true", help="the tiny models (a CPU smoke test)")
    p.add_argument("--out", help="JSON file (rows are added); markdown next to it")
    p.add_argument("--budget-s", type=float, default=520.0, help="start no combination after this many seconds")
    p.add_argument("--scratch", default=None, help="where the fresh caches go (default: the temporary folder)")
    p.add_argument("--launch", type=int, default=0, help="start this many local processes (no torchrun)")
    p.add_argument("--table", nargs="+", help="print the markdown of these JSON files and exit")
    ns = p.parse_args(argv)
    if ns.steps <= WARMUP:
        p.error(f"--steps must be more than the {WARMUP} warm-up steps")
    return ns


def main(argv=None) -> None:
    ns = parse(argv)
    if ns.table:
        rows = [r for path in ns.table for r in json.load(open(path))]
        print(markdown(sorted(rows, key=lambda r: (r["model"], r["world"], _order(r)))))
    elif ns.launch:
        launch(ns)
    else:
        main_rank(ns)


if __name__ == "__main__":
    main()
