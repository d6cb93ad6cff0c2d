"""The graph cache: a graph braze compiled once is loaded, not compiled again, when the
same ATen graph comes back (a new process, or after ``torch._dynamo.reset()``)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import braze
from braze.backend import Recording
from braze.runtime import graph_cache


@pytest.fixture
def cache_dir(tmp_path):
    path = tmp_path / "cache"
    with braze.config.patch(graph_cache=True, cache_dir=str(path)):
        yield path


def layer(x, w, b):
    y = torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
    return torch.nn.functional.gelu(y) * 2 + x


def train_step(fn, *args):
    """Outputs and gradients of one compiled forward and backward, and braze's graphs."""
    args = [a.detach().requires_grad_(a.is_floating_point()) for a in args]
    with Recording() as rec:
        out = fn(*args)
        out.square().sum().backward()
    return [out.detach()] + [a.grad for a in args if a.grad is not None], rec.graphs


def fresh_inputs(seed):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(6, 48, generator=gen), torch.randn(48, generator=gen) + 1, torch.randn(48, generator=gen))


def test_a_graph_compiled_again_comes_from_the_cache(cache_dir, backend):
    first, graphs = train_step(torch.compile(layer, backend="braze"), *fresh_inputs(0))
    assert [g.kind for g in graphs] == ["forward", "backward"]
    assert not any(g.from_graph_cache for g in graphs)
    torch._dynamo.reset()
    inputs = fresh_inputs(1)
    again, cached = train_step(torch.compile(layer, backend="braze"), *inputs)
    assert all(g.from_graph_cache and g.cache_hit for g in cached)
    assert all("lower" not in g.timings and "load" in g.timings for g in cached)
    expected, _ = train_step(layer, *inputs)
    for got, want in zip(again, expected):
        torch.testing.assert_close(got, want)
    for old, new in zip(graphs, cached):
        assert [(k.ops, k.shape) for k in old.kernels] == [(k.ops, k.shape) for k in new.kernels]
        assert new.fusion_log == old.fusion_log and new.decisions == old.decisions
        assert new.wrapper == old.wrapper and new.source == old.source
        assert new.ir is None and len(new.graph.nodes) == new.node_count == old.node_count  # rebuilt on demand


def compiled_graphs(fn, *args, **knobs):
    torch._dynamo.reset()
    with braze.config.patch(**knobs), Recording() as rec:
        torch.compile(fn, backend="braze")(*args)
    return rec.graphs


def test_what_changes_the_generated_code_changes_the_key(cache_dir):
    f = lambda x: (x.sin() * 2).sum(-1)  # noqa: E731
    x = torch.randn(8, 16)
    assert not compiled_graphs(f, x)[0].from_graph_cache
    assert compiled_graphs(f, torch.randn(8, 16))[0].from_graph_cache  # new values, same graph
    assert not compiled_graphs(f, torch.randn(8, 17))[0].from_graph_cache  # sizes
    assert not compiled_graphs(f, torch.randn(16, 8).t())[0].from_graph_cache  # strides
    assert not compiled_graphs(f, x.double())[0].from_graph_cache  # dtype
    assert not compiled_graphs(f, x, fuse=False)[0].from_graph_cache  # a knob
    assert compiled_graphs(f, x, strict=False)[0].from_graph_cache  # a knob that changes no code
    assert not compiled_graphs(f, x, debug_dir=str(cache_dir.parent / "debug"))[0].from_graph_cache


def with_constant(values, x):
    """An ATen graph holding ``values`` as a tensor constant (a get_attr node)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    c = torch.tensor(values)
    return make_fx(lambda x: x * 2 + c, tracing_mode="fake", _allow_non_fake_inputs=True)(x)


def test_a_cached_graph_reads_its_constants_when_it_runs(cache_dir):
    """Tensor constants are not baked into the code: one graph, whatever their values."""
    from braze.compiler import compile_graph
    x = torch.randn(5, 2)
    graphs = [with_constant(v, x) for v in ([1.0, 2.0], [-3.0, 5.0], [[1.0, 2.0]])]
    assert graphs[0].graph.find_nodes(op="get_attr")
    first, second = compile_graph(graphs[0], "inference"), compile_graph(graphs[1], "inference")
    assert not first.from_graph_cache and second.from_graph_cache
    torch.testing.assert_close(second([x])[0], x * 2 + torch.tensor([-3.0, 5.0]))
    torch.testing.assert_close(first([x])[0], x * 2 + torch.tensor([1.0, 2.0]))
    assert graph_cache.key_of(graphs[0], "inference", None, None) != graph_cache.key_of(graphs[2], "inference", None, None)


SCRIPT = textwrap.dedent("""
    import json, torch, braze
    from braze.backend import Recording
    f = lambda x, y: torch.softmax(x * y, -1).cumsum(0) + x.relu()
    x, y = torch.randn(32, 40), torch.randn(40)
    with Recording() as rec:
        out = torch.compile(f, backend="braze")(x, y)
    torch.testing.assert_close(out, f(x, y))
    print(json.dumps([g.from_graph_cache for g in rec.graphs]))
""")


def run_script(cache):
    env = dict(os.environ, BRAZE_CACHE_DIR=str(cache), BRAZE_STRICT="1", BRAZE_GRAPH_CACHE="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_new_process_loads_the_graph_and_a_damaged_entry_is_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    assert run_script(cache) == [False]
    assert run_script(cache) == [True]
    entries = [p for p in cache.iterdir() if p.suffix == ".graph"]
    assert len(entries) == 1
    entries[0].write_bytes(entries[0].read_bytes()[:50])  # truncated: its MAC no longer matches
    assert run_script(cache) == [False]
    assert run_script(cache) == [True]


def test_a_cache_that_cannot_be_written_only_loses_the_entry(cache_dir, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(graph_cache.cache, "_write_bytes", refuse)
    x = torch.randn(8, 16)
    graphs = compiled_graphs(lambda x: x.cos() + 1, x)
    assert graphs and not graphs[0].from_graph_cache
    torch.testing.assert_close(graphs[0]([x])[0], x.cos() + 1)
    assert not compiled_graphs(lambda x: x.cos() + 1, x)[0].from_graph_cache  # nothing was stored


def test_variants_of_a_graph_with_symbolic_sizes_come_from_the_cache(cache_dir, backend):
    """Each size class compiled once is stored with its guards: after a reset, the variant
    whose guards hold for a new size is loaded, not compiled; a size of no stored class
    compiles a new variant. Values and gradients match eager either way; the IR of a
    loaded variant can still be read."""
    def run(sizes):
        fn = torch.compile(layer, backend="braze", dynamic=True)
        graphs = []
        for n in sizes:
            inputs = fresh_inputs(n)
            outputs, found = train_step(fn, torch.randn(n, 48), *inputs[1:])
            graphs += found
        return graphs

    compiled = run([5, 9])
    assert compiled and all(g.sizes is not None and not g.from_graph_cache for g in compiled)
    torch._dynamo.reset()
    x, w, b = torch.randn(13, 48), *fresh_inputs(0)[1:]
    again = torch.compile(layer, backend="braze", dynamic=True)
    values, graphs = train_step(again, x, w, b)
    expected, _ = train_step(layer, x, w, b)
    for a, e in zip(values, expected):
        torch.testing.assert_close(a, e)
    assert graphs and all(g.from_graph_cache and g.sizes is not None for g in graphs)
    assert "buf" in graphs[0].graph.to_text()
