"""braze under torch.distributed on the CPU (gloo, two processes): DDP around a compiled
model, a compiled DDP, FSDP2 with each block compiled, and functional collectives inside a
compiled graph, each against the same run in eager mode; and one cache directory shared
by processes that compile the same graph at once."""
import json
import multiprocessing
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import braze
from braze.backend import Recording
from braze.runtime import cache

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="no gloo")]

WIDTH, BLOCKS, STEPS = 128, 3, 3
BUCKET_MB = 1  # DDP's smallest bucket Dynamo accepts: the model's 0.8 MB of weights make two buckets


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm, self.up, self.down = torch.nn.LayerNorm(d), torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Net(torch.nn.Module):
    def __init__(self, d=WIDTH, blocks=BLOCKS):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(d) for _ in range(blocks))
        self.head = torch.nn.Linear(d, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x).square().mean()


def _wrap(wrapper: str, model: Net):
    from torch.nn.parallel import DistributedDataParallel as DDP
    if wrapper == "eager ddp":
        return DDP(model, bucket_cap_mb=BUCKET_MB)
    if wrapper == "ddp(compiled)":
        return DDP(torch.compile(model, backend="braze"), bucket_cap_mb=BUCKET_MB)
    if wrapper == "compiled(ddp)":
        return torch.compile(DDP(model, bucket_cap_mb=BUCKET_MB), backend="braze")
    from torch.distributed.fsdp import fully_shard
    for block in model.blocks:
        if wrapper == "fsdp2 compiled blocks":
            block.compile(backend="braze")
        fully_shard(block)
    return fully_shard(model)


def _train(rank: int, wrapper: str) -> dict:
    """Losses and every step's gradients (this rank's shard under FSDP2) of a few SGD steps,
    each rank on inputs of its own, and the graphs braze compiled."""
    torch._dynamo.reset()  # (Dynamo would reuse the code it compiled for the previous wrapper)
    torch.manual_seed(0)  # the same weights on every rank and for every wrapper
    model = _wrap(wrapper, Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, grads = [], []
    with Recording() as rec:
        for step in range(STEPS):
            x = torch.randn(8, WIDTH, generator=torch.Generator().manual_seed(100 * step + rank))
            loss = model(x)
            loss.backward()
            losses.append(loss.detach())
            grads.append([getattr(p.grad, "to_local", lambda g=p.grad: g)().clone() for p in model.parameters()])
            opt.step()
            opt.zero_grad()
    return {"losses": losses, "grads": grads, "graphs": [g.kind for g in rec.graphs],
            "failures": rec.failures}


def _collectives(x: torch.Tensor, w: torch.Tensor):
    """Functional collectives with work between each and the use of its result."""
    import torch.distributed._functional_collectives as fc
    group = dist.group.WORLD
    y = (x @ w).sin()
    summed = fc.all_reduce(y, "sum", group)
    gathered = fc.all_gather_tensor(y * 2 - x, 0, group)
    scattered = fc.reduce_scatter_tensor(y.t() * 3, "sum", 0, group)
    independent = (x * 3).exp().sum(0)
    return summed.cos() + 1, gathered.tanh(), scattered * 2, independent


def _run_collectives(rank: int) -> dict:
    x, w = torch.randn(8, 16), torch.randn(16, 16) / 4  # (each rank's own values: seeded by rank)
    with braze.config.patch(strict=True, strict_ops=True), Recording() as rec:
        got = torch.compile(_collectives, backend="braze")(x, w)
    return {"got": got, "want": _collectives(x, w), "graphs": rec.graphs, "failures": rec.failures}


def _worker(rank: int, world: int, init: str, out: str) -> None:
    torch.set_num_threads(1)  # two processes on two cores
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    try:
        results = {wrapper: _train(rank, wrapper) for wrapper in
                   ("eager ddp", "ddp(compiled)", "compiled(ddp)", "eager fsdp2", "fsdp2 compiled blocks")}
        collectives = _run_collectives(rank)
        graph = collectives.pop("graphs")[0]
        collectives.update(wrapper=graph.wrapper, externs=graph.externs, fallbacks=graph.fallbacks)
        torch.save({"train": results, "collectives": collectives}, os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """What each of two gloo ranks computed (one launch for every test of this file)."""
    folder = tmp_path_factory.mktemp("distributed")
    before = os.environ.get("BRAZE_CACHE_DIR")
    os.environ["BRAZE_CACHE_DIR"] = str(folder / "cache")  # the ranks' own cache, read at import
    try:
        mp.spawn(_worker, args=(2, str(folder / "init"), str(folder)), nprocs=2)
    finally:
        if before is None:
            del os.environ["BRAZE_CACHE_DIR"]
        else:
            os.environ["BRAZE_CACHE_DIR"] = before
    return [torch.load(folder / f"rank{r}.pt", weights_only=False) for r in range(2)]


@pytest.mark.parametrize("wrapper, eager", [("ddp(compiled)", "eager ddp"), ("compiled(ddp)", "eager ddp"),
                                             ("fsdp2 compiled blocks", "eager fsdp2")])
def test_training_matches_eager(ranks, wrapper, eager):
    for rank in ranks:
        got, want = rank["train"][wrapper], rank["train"][eager]
        assert not got["failures"]
        assert got["graphs"].count("forward") >= 1 and got["graphs"].count("backward") >= 1
        torch.testing.assert_close(torch.stack(got["losses"]), torch.stack(want["losses"]))
        for step, (g, w) in enumerate(zip(got["grads"], want["grads"])):
            for k, (a, b) in enumerate(zip(g, w)):
                torch.testing.assert_close(a, b, msg=lambda m: f"{wrapper}, step {step}, parameter {k}: {m}")
    # the ranks' losses differ (their inputs do), their gradients agree (DDP averaged them)
    assert not torch.equal(ranks[0]["train"][wrapper]["losses"][0], ranks[1]["train"][wrapper]["losses"][0])
    if "ddp" in wrapper:
        torch.testing.assert_close(ranks[0]["train"][wrapper]["grads"], ranks[1]["train"][wrapper]["grads"])


@pytest.mark.parametrize("wrapper", ["ddp(compiled)", "compiled(ddp)"])
def test_ddp_graphs_are_split_at_buckets(ranks, wrapper):
    graphs = ranks[0]["train"][wrapper]["graphs"]
    assert graphs.count("forward") == graphs.count("backward") == 2, graphs


def test_functional_collectives_run_through_aten_in_order(ranks):
    for rank in ranks:
        result = rank["collectives"]
        assert not result["failures"]
        for got, want in zip(result["got"], result["want"]):
            torch.testing.assert_close(got, want)
        assert not result["fallbacks"]
        lines = [line.strip() for line in result["wrapper"].splitlines()]
        starts = [k for k, line in enumerate(lines) if "_c10d_functional." in line and "wait_tensor" not in line]
        names = [lines[k].split("_c10d_functional.")[1].split(".")[0] for k in starts]
        assert names == ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"]  # program order
        for k in starts:
            result_name = lines[k].split(" = ")[0]
            wait = next(j for j, line in enumerate(lines) if f"wait_tensor.default({result_name})" in line)
            assert wait > k
            assert not any(result_name in line for line in lines[k + 1:wait])  # untouched until its wait
            argument = lines[k].split("(")[1].split(",")[0].removeprefix("_alias(")
            if argument.startswith("buf"):  # an intermediate: its storage is held until the wait
                released = next(j for j, line in enumerate(lines) if line.startswith("del ")
                                and argument in line[4:].split(", "))
                assert released > wait, result["wrapper"]
        first_wait = min(k for k, line in enumerate(lines) if "wait_tensor" in line)
        assert any(line.startswith("kernel") for line in lines[starts[0]:first_wait])  # overlapped work
        assert not any(s in result["wrapper"] for s in (".item()", ".cpu()", "synchronize", ".tolist()"))


# ----------------------------------------------------------------------------- one cache, many processes

def _shared(x, w):
    return (torch.nn.functional.layer_norm(x @ w, (w.shape[1],)).tanh() * 3 + x).sum(-1)


def _compile_at_once(barrier, folder: str, index: int) -> None:
    """Compile ``_shared`` (forward and backward) as soon as every process is ready (at
    once if ``barrier`` is None)."""
    torch.set_num_threads(1)
    x = torch.randn(6, 24, generator=torch.Generator().manual_seed(index))
    w = torch.randn(24, 24, generator=torch.Generator().manual_seed(99), requires_grad=True)
    with braze.config.patch(cache_dir=os.path.join(folder, "cache"), graph_cache=True), Recording() as rec:
        if barrier is not None:
            barrier.wait()
        out = torch.compile(_shared, backend="braze")(x, w)
        out.sum().backward()
    want_w = w.detach().clone().requires_grad_()
    want = _shared(x, want_w)
    want.sum().backward()
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(w.grad, want_w.grad)
    with open(os.path.join(folder, f"{index}.json"), "w") as f:
        json.dump({"counts": cache.counts, "graphs": [(g.kind, g.from_graph_cache) for g in rec.graphs]}, f)


def _in_processes(folder, count: int, barrier) -> list:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(count) if barrier else None
    workers = [context.Process(target=_compile_at_once, args=(barrier, str(folder), k)) for k in range(count)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(timeout=300)
    assert [p.exitcode for p in workers] == [0] * count
    return [json.loads((folder / f"{k}.json").read_text()) for k in range(count)]


def test_processes_compiling_one_graph_at_once_share_the_cache(tmp_path):
    processes = 4
    found = _in_processes(tmp_path, processes, barrier=True)
    entries = [p for p in (tmp_path / "cache").iterdir()
               if p.is_file() and p.suffix not in (cache.MAC, ".cpp") and p.name != cache.KEY_FILE]
    assert sorted(p.suffix for p in entries) == [".graph", ".graph", ".so", ".so"]
    # each entry built by one process only; every other process waited for it or found it
    assert sum(f["counts"]["built"] for f in found) == len(entries)
    assert sum(f["counts"]["waited"] + f["counts"]["hit"] for f in found) >= (processes - 1) * len(entries)
    # (a process may compile a graph or, if another published it first, load it: either is right)
    assert all([kind for kind, _ in f["graphs"]] == ["forward", "backward"] for f in found)
    # every entry is whole: a new process loads both graphs from the cache
    (again,) = _in_processes(tmp_path, 1, barrier=False)
    assert again["graphs"] == [["forward", True], ["backward", True]] and again["counts"]["built"] == 0
