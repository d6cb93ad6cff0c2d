"""The trace cache: an inference graph Dynamo hands braze again (a new process, or after
``torch._dynamo.reset()``) runs its cached compiled graph without AOTAutograd tracing it,
with eager's results; graphs whose AOTAutograd runtime would do more are traced as before."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import braze
import braze.backend
from braze.backend import Recording


@pytest.fixture
def cache_dir(tmp_path):
    path = tmp_path / "cache"
    with braze.config.patch(graph_cache=True, trace_cache=True, cache_dir=str(path)):
        yield path


@pytest.fixture
def traces(monkeypatch):
    """How many graphs AOTAutograd traced (``traces[0]``)."""
    count = [0]
    real = braze.backend.aot_autograd

    def counting(**kwargs):
        inner = real(**kwargs)

        def call(gm, example_inputs):
            count[0] += 1
            return inner(gm, example_inputs)
        return call
    monkeypatch.setattr(braze.backend, "aot_autograd", counting)
    return count


def compile_and_run(fn, *args, **knobs):
    """(result, braze's graphs) of a fresh Dynamo compile of ``fn``."""
    torch._dynamo.reset()
    with braze.config.patch(**knobs), Recording() as rec:
        out = torch.compile(fn, backend="braze")(*args)
    return out, rec.graphs


def block(x, w, b):
    y = torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
    return torch.nn.functional.gelu(y @ w.unsqueeze(1) + b.sum()), y.softmax(-1)


def inputs(seed, n=24):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(6, n, generator=gen), torch.randn(n, generator=gen), torch.randn(n, generator=gen)


def assert_like_eager(got, fn, args):
    for g, e in zip(got, fn(*args)):
        torch.testing.assert_close(g, e)


def test_a_graph_seen_before_skips_aot_autograd(cache_dir, traces, backend):
    out, graphs = compile_and_run(block, *inputs(0))
    assert traces[0] == 1 and not graphs[0].from_graph_cache
    assert_like_eager(out, block, inputs(0))
    args = inputs(1)
    out, cached = compile_and_run(block, *args)
    assert traces[0] == 1, "the second compile traced again"
    assert cached[0].from_graph_cache and cached[0].kind == "inference" and cached[0].ir is None
    assert [k.ops for k in cached[0].kernels] == [k.ops for k in graphs[0].kernels]
    assert_like_eager(out, block, args)
    assert cached[0].graph.to_text() == graphs[0].graph.to_text()  # rebuilt when read (debug/retrace.py)
    assert traces[0] == 1  # (by a trace of its own, not the backend's)


def test_what_changes_the_trace_changes_the_key(cache_dir, traces):
    f = lambda x: (x.sin() * 2).sum(-1)  # noqa: E731
    x = torch.randn(8, 16)
    compile_and_run(f, x)
    compile_and_run(f, torch.randn(8, 16))  # new values
    assert traces[0] == 1
    for other in (torch.randn(8, 17), torch.randn(16, 8).t(), x.double()):  # sizes, strides, dtype
        out, _ = compile_and_run(f, other)
        torch.testing.assert_close(out, f(other))
    assert traces[0] == 4
    compile_and_run(f, x, fuse=False)  # a knob that changes code
    assert traces[0] == 5
    compile_and_run(lambda x: (x.cos() * 2).sum(-1), x)  # another op
    assert traces[0] == 6
    with torch.autocast("cpu", dtype=torch.bfloat16):
        compile_and_run(f, x)
    assert traces[0] == 7


def test_literal_tensors_in_the_graph_come_back_with_their_values(cache_dir, traces):
    f = lambda x: x * torch.tensor([1.5, -2.0, 3.0]) + torch.tensor(0.25)  # noqa: E731
    compile_and_run(f, torch.randn(4, 3))
    x = torch.randn(4, 3)
    out, graphs = compile_and_run(f, x)
    assert traces[0] == 1 and graphs[0].from_graph_cache
    torch.testing.assert_close(out, f(x))


def test_autocast_graphs_run_as_aot_autograd_runs_them(cache_dir, traces):
    def f(x, w):
        return torch.relu(x @ w).float().sum(-1), (x @ w).dtype
    with torch.autocast("cpu", dtype=torch.bfloat16):
        compile_and_run(lambda x, w: f(x, w)[0], torch.randn(8, 16), torch.randn(16, 4))
        x, w = torch.randn(8, 16), torch.randn(16, 4)
        out, graphs = compile_and_run(lambda x, w: f(x, w)[0], x, w)
        expected = f(x, w)[0]
    assert traces[0] == 1 and graphs[0].from_graph_cache
    torch.testing.assert_close(out, expected)


def mutates(x):
    x.mul_(2)
    return x.sum()


def returns_a_view(x):
    return x.t(), x.sum()


@torch._dynamo.allow_in_graph
def user_function(x):
    return x * 3


def calls_user_code(x):
    return user_function(x).sin()


@pytest.mark.parametrize("fn", [mutates, returns_a_view, calls_user_code],
                         ids=lambda f: f.__name__)
def test_graphs_aot_autograd_would_wrap_are_traced_again(cache_dir, traces, fn):
    compile_and_run(fn, torch.randn(5, 7))
    x = torch.randn(5, 7)
    expected_input, expected = x.clone(), fn(x.clone())
    out, _ = compile_and_run(fn, x)
    assert traces[0] == 2
    if fn is mutates:
        torch.testing.assert_close(x, expected_input * 2)
    for got, want in zip(out if isinstance(out, tuple) else (out,), expected if isinstance(expected, tuple) else (expected,)):
        torch.testing.assert_close(got, want)


def test_a_view_of_an_output_stays_a_view_on_a_hit(cache_dir, traces):
    def f(x):
        y = x.cos()
        return y, y.view(-1)  # Dynamo returns the view of the graph's output itself
    compile_and_run(f, torch.randn(5, 7))
    x = torch.randn(5, 7)
    (y, flat), graphs = compile_and_run(f, x)
    assert traces[0] == 1 and graphs[0].from_graph_cache
    assert flat._base is y
    torch.testing.assert_close(flat, x.cos().view(-1))


def test_graphs_with_dynamic_shapes_are_traced_again(cache_dir, traces):
    f = lambda x: torch.tanh(x).sum(0)  # noqa: E731
    for rows in (5, 5, 9):
        torch._dynamo.reset()
        x = torch.randn(rows, 3)
        with braze.config.patch(specialize_dynamic=True), Recording():
            out = torch.compile(f, backend="braze", dynamic=True)(x)
        torch.testing.assert_close(out, f(x))
    assert traces[0] == 3


def test_training_graphs_are_traced_again(cache_dir, traces):
    x, w, b = (t.requires_grad_() for t in inputs(2))
    compile_and_run(lambda *a: block(*a)[0].sum(), x, w, b)
    out, _ = compile_and_run(lambda *a: block(*a)[0].sum(), x, w, b)
    assert traces[0] == 2
    out.backward()
    assert x.grad is not None


def test_a_hit_whose_first_run_fails_runs_dynamos_graph_eagerly(cache_dir, traces, monkeypatch):
    f = lambda x: torch.tanh(x) * 2  # noqa: E731
    compile_and_run(f, torch.randn(9))
    real = braze.backend.load_cached

    def broken(*args):
        compiled = real(*args)
        compiled.run = lambda args: (_ for _ in ()).throw(RuntimeError("launch failed"))
        return compiled
    monkeypatch.setattr(braze.backend, "load_cached", broken)
    x = torch.randn(9)
    with pytest.warns(UserWarning, match="launch failed"):
        out, _ = compile_and_run(f, x, strict=False)
    assert traces[0] == 1
    torch.testing.assert_close(out, f(x))


SCRIPT = textwrap.dedent("""
    import json, sys, torch, braze
    from braze.backend import Recording
    device = sys.argv[1]
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(32, 64), torch.nn.Linear(64, 8)
            self.norm = torch.nn.LayerNorm(64)
        def forward(self, x):
            return self.b(torch.nn.functional.gelu(self.norm(self.a(x)))).softmax(-1)
    torch.manual_seed(0)
    net = Net().eval().to(device)
    x = torch.randn(16, 32, device=device)
    with torch.no_grad(), Recording() as rec:
        out = torch.compile(net, backend="braze")(x)
        torch.testing.assert_close(out, net(x))
    print(json.dumps([[g.from_graph_cache, "layouts" in g.timings] for g in rec.graphs]))
""")


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))])
def test_a_new_process_runs_a_module_without_tracing_it_again(tmp_path, device):
    env = dict(os.environ, BRAZE_CACHE_DIR=str(tmp_path / "cache"), BRAZE_STRICT="1", BRAZE_GRAPH_CACHE="1")
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", SCRIPT, device], env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert runs == [[[False, True]], [[True, False]]]  # the second: no ATen graph to choose layouts for
    assert len(list((tmp_path / "cache").glob("*.trace"))) == 1
