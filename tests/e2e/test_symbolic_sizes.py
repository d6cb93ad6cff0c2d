"""Graphs with symbolic sizes compile once per size class, on both backends: kernels and
wrapper take the sizes as arguments, results match eager for every size (primes among
them), forward and backward, and a graph braze cannot compile symbolically is compiled
per shape instead."""
import pytest
import torch
import torch.nn.functional as F

import braze
from benchmarks.dynamic_sizes import Block  # LayerNorm, q/k/v, causal SDPA, GELU MLP, residuals
from braze.runtime import symbolic
from helpers import Compiled


def variants(compiled: Compiled) -> list:
    return [g for g in compiled.graphs if g.sizes is not None]


def test_one_compile_serves_every_size(backend):
    f = lambda x, y: (torch.relu(x * 2 + y).sum(-1), x.t() + 1)
    g = torch.compile(f, backend="braze", dynamic=True)
    with Compiled() as compiled:
        for n in (5, 7, 13, 31, 97, 5):
            x, y = torch.randn(n, 33), torch.randn(n, 33)
            for a, b in zip(g(x, y), f(x, y)):
                torch.testing.assert_close(a, b)
    # one size class in C++; Triton's blocks follow the row count's power of two
    assert len(compiled.graphs) == len(variants(compiled)) <= (1 if backend == "cpp" else 4)
    graph = compiled.graphs[0]
    for name in graph.sizes.symbols:  # the sizes are the kernels' arguments
        assert (f"int64_t {name}" if backend == "cpp" else f", {name}") in graph.source


def test_the_guards_name_what_decided_them(backend):
    f = lambda x: (x * 2).softmax(-1)
    g = torch.compile(f, backend="braze", dynamic=True)
    with Compiled() as compiled:
        x = torch.randn(6, 40)
        torch.testing.assert_close(g(x), f(x))
    sizes = variants(compiled)[0].sizes
    assert sizes.symbols and all(".py:" in where for where in sizes.guards.values())
    report = braze.explain(f, torch.randn(6, 40))
    assert "symbols:" not in str(report)  # a static graph has none


def _same_value_and_gradient(compiled, eager, x):
    """The compiled function's value and input gradient are eager's at ``x``."""
    x = x.requires_grad_()
    ex = x.detach().clone().requires_grad_()
    y, ey = compiled(x), eager(ex)
    torch.testing.assert_close(y, ey)
    grad = torch.randn_like(ey)
    y.backward(grad)
    ey.backward(grad)
    torch.testing.assert_close(x.grad, ex.grad)


@pytest.mark.parametrize("padded", ["off", "on"])
def test_a_transformer_block_forward_and_backward_over_sequence_lengths(backend, padded):
    """Also with the matrix products' rows padded (as on the GPU). No decision falls on
    Dynamo's own symbols (``SizeClass.dynamo_guards``): that would narrow the graph."""
    block = Block(d=32)
    g = torch.compile(block, backend="braze", options={"pad_matmul_rows": padded})
    with Compiled() as compiled:
        for t in (5, 7, 11, 13, 29):
            _same_value_and_gradient(g, block, torch.randn(2, t, 32))
    # Dynamo compiles the first length statically, then the graph with a symbolic length:
    # once in C++; in Triton, once per power of two of the rows (3 classes here)
    symbolic_graphs = variants(compiled)
    assert {g.kind for g in symbolic_graphs} == {"forward", "backward"}
    assert len(compiled.graphs) - len(symbolic_graphs) == 2
    assert len(symbolic_graphs) == 2 if backend == "cpp" else len(symbolic_graphs) <= 6
    assert all(not g.sizes.dynamo_guards for g in symbolic_graphs), [g.sizes.dynamo_guards for g in symbolic_graphs]


def _attend_with_cache(past_k, past_v, x, wq, wk, wv):
    """One decoding step: q/k/v projections of one new token (grouped into one product in
    inference), its key and value appended to the cache (a ``cat`` of extent ``s + 1``)."""
    q, k, v = x @ wq.t(), x @ wk.t(), x @ wv.t()
    keys, values = torch.cat([past_k, k[:, None]], 1), torch.cat([past_v, v[:, None]], 1)
    weights = torch.softmax((keys @ q[:, :, None]).squeeze(-1) / 4.0, -1)
    return (weights[:, :, None] * values).sum(1), keys, values


def test_an_open_ended_slice_is_not_guarded(backend):
    """``x[..., h:]`` is ATen's ``slice(x, -1, h, 2**63 - 1)``: that end is the size, with no
    guard comparing a size against it (checked at every call otherwise)."""
    f = lambda x: x[..., x.shape[-1] // 2:] * 2 + x[..., :x.shape[-1] // 2]
    g = torch.compile(f, backend="braze", dynamic=True)
    with Compiled() as compiled:
        for n in (40, 64):
            x = torch.randn(3, n)
            torch.testing.assert_close(g(x), f(x))
    guards = variants(compiled)[0].sizes.guards
    assert not any(str(2 ** 63 - 1) in guard for guard in guards), guards


def test_a_growing_key_cache_compiles_once(backend):
    """Each step's cache is one position longer: after Dynamo's first static graph, one
    variant serves every length (no size is taken as an integer; the C++ vector loops
    run their main part and their tail for any length, instead of a class per remainder)."""
    g = torch.compile(_attend_with_cache, backend="braze")
    ws = [torch.randn(16, 16) for _ in range(3)]
    past_k, past_v = torch.randn(2, 3, 16), torch.randn(2, 3, 16)
    with Compiled() as compiled, torch.no_grad():
        for _ in range(6):
            x = torch.randn(2, 16)
            out, keys, values = g(past_k, past_v, x, *ws)
            for a, b in zip((out, keys, values), _attend_with_cache(past_k, past_v, x, *ws)):
                torch.testing.assert_close(a, b)
            past_k, past_v = keys, values
    symbolic_graphs = variants(compiled)
    assert len(compiled.graphs) - len(symbolic_graphs) == 1
    # one class in C++; Triton's row blocks follow the power of two of the length (4..9: 2)
    assert len(symbolic_graphs) == 1 if backend == "cpp" else len(symbolic_graphs) <= 2
    assert not any(g.sizes.specialized for g in symbolic_graphs)


def test_grouped_projections_keep_their_rows_symbolic(backend):
    """q, k and v of one input run as one product with the weights concatenated; its row
    count stays a symbol (it was once taken as an integer: a compile per length)."""
    f = lambda x, wq, wk, wv: (x @ wq.t()) * (x @ wk.t()) + x @ wv.t()
    g = torch.compile(f, backend="braze", dynamic=True)
    ws = [torch.randn(16, 16) for _ in range(3)]
    with Compiled() as compiled, torch.no_grad():
        for n in (5, 9, 23):
            x = torch.randn(n, 16)
            torch.testing.assert_close(g(x, *ws), f(x, *ws))
    found = variants(compiled)
    # one class in C++; Triton's blocks follow the power of two of the rows (5, 9, 23: 3)
    assert len(found) == 1 if backend == "cpp" else len(found) <= 3
    assert not any(g.sizes.specialized for g in found)


def test_sizes_zero_and_one_are_correct(backend):
    f = lambda x: torch.nn.functional.gelu(x).mean(0) + x.sum()
    g = torch.compile(f, backend="braze", dynamic=True)
    for n in (3, 1, 0, 2, 17):
        x = torch.randn(n, 9)
        torch.testing.assert_close(g(x), f(x), equal_nan=True)


def test_too_many_size_classes_compile_per_shape(monkeypatch):
    made = []
    real = symbolic.Symbolic.__init__
    monkeypatch.setattr(symbolic.Symbolic, "__init__", lambda self, *a, **k: (real(self, *a, **k), made.append(self))[0])
    f = lambda x: (x * 3).sum(-1)
    g = torch.compile(f, backend="braze", dynamic=True)
    with braze.config.patch(max_size_variants=1, num_threads=2), Compiled() as compiled:
        for n in (5, 3, 5, 7):  # fewer rows than two per thread: another kernel shape
            x = torch.randn(n, 3)
            torch.testing.assert_close(g(x), f(x))
    assert made and "size classes" in made[0].fallback_reason
    assert len(compiled.graphs) >= 3  # the first variant, then one graph per new shape


@pytest.mark.parametrize("shape", [(6, 10), (11, 3)])
def test_views_reshapes_and_broadcasts(shape, backend):
    def f(x, b):
        y = x.reshape(-1) * 2
        z = y.view(x.shape[0], -1).t().contiguous() + b[: x.shape[1]].unsqueeze(1)
        return torch.cat([z, z * 2], 0).cumsum(1), x[:, 1:].amax(0)
    g = torch.compile(f, backend="braze", dynamic=True)
    for k in (0, 3):
        x = torch.randn(shape[0] + k, shape[1] + k)
        b = torch.randn(40)
        for a, e in zip(g(x, b), f(x, b)):
            torch.testing.assert_close(a, e)


SLICED = {  # extents that are sums (``s - 1``, ``(s + 1) // 2``) multiplied together
    "slice": lambda x: x[1:3, ::2, 1:] * 3,
    "negative_slice": lambda x: x[-2:, 1:-1] + 1,
    "unfold": lambda x: x.unfold(2, 2, 1) + 1,
    "two slices, a row softmax": lambda x: (x[1:, 1:] * 2).softmax(-1),
    "two slices, a column sum": lambda x: x[1:, :-1, 2:].sum(0),
}


@pytest.mark.parametrize("name", list(SLICED))
def test_one_node_over_products_of_sliced_extents_compiles_symbolically(name, backend):
    """Each of these kernels is one node, which the scheduler plans without asking legality
    (it asks only about merges): its own loop nest needs ``s1 - 1`` to divide
    ``(s0 - 1)*(s1 - 1)``, a quotient that is no monomial. Compiled per shape before
    ("the scheduler fused nodes with no common loop nest")."""
    f = SLICED[name]
    g = torch.compile(f, backend="braze", dynamic=True)
    with Compiled() as compiled:
        for shape in ((5, 6, 7), (7, 9, 11), (4, 13, 5)):
            _same_value_and_gradient(g, f, torch.randn(*shape))
    assert compiled.graphs and all(graph.sizes is not None for graph in compiled.graphs)


@pytest.mark.parametrize("dims", [(2, 0, 1), (1, 2, 0), (0, 2, 1)])
def test_permutes_index_with_products_of_sizes(dims, backend):
    """Indices split by products of symbolic sizes (``x // (s1*s2)``), in tiled copies."""
    f = lambda x: (x.permute(*dims).contiguous() * 2, x.sum(dims[0]))
    g = torch.compile(f, backend="braze", dynamic=True)
    for shape in ((3, 5, 7), (4, 9, 6), (5, 17, 3)):
        x = torch.randn(*shape)
        for a, e in zip(g(x), f(x)):
            torch.testing.assert_close(a, e)


def test_channels_last_copies(backend):
    """NCHW to NHWC: a tiled copy whose rows split by the product ``H*W`` of two sizes."""
    f = lambda x: x.contiguous(memory_format=torch.channels_last) * 2
    g = torch.compile(f, backend="braze", dynamic=True)
    for n, hw in ((3, 5), (4, 9), (2, 6)):
        x = torch.randn(n, 32, hw, hw)
        out = g(x)
        torch.testing.assert_close(out, f(x))
        assert out.stride() == f(x).stride()


def test_a_quotient_of_the_sizes_is_a_parameter_of_its_own(backend):
    """``chunk`` halves a symbolic row into ``(s + 1) // 2``: the wrapper computes that once
    per call and kernels take it as a size argument (``runtime/symbolic._derive``), which
    Triton can be told is a multiple of 16 (its loads along the half row then vectorize),
    where a quotient computed inside the kernel told it nothing. Odd halves too (125)."""
    def swiglu(x):
        a, b = x.chunk(2, -1)
        return F.silu(a) * b
    g = torch.compile(swiglu, backend="braze", dynamic=True)
    with Compiled() as compiled:
        for rows, width in ((6, 64), (5, 96), (7, 250)):
            x = torch.randn(rows, width)
            torch.testing.assert_close(g(x), swiglu(x))
    sizes = variants(compiled)[0].sizes
    quotients = {name: text for name, text in sizes.symbols.items() if name.startswith("q")}
    assert len(quotients) == 1 and "// 2)" in next(iter(quotients.values())), sizes.symbols
    name = next(iter(quotients))
    source = variants(compiled)[0].source
    assert (f"int64_t {name}" if backend == "cpp" else f", {name}") in source
    assert "// 2" not in source.split("def call", 1)[0] if backend == "triton" else True
    assert all(name not in guard for guard in sizes.guards)  # (guards name only Dynamo's symbols)


def test_no_decision_of_one_graph_is_reused_by_the_next(backend):
    """A result cached while one graph compiled must not serve another: here ``a[1:]`` at
    ``a.size(0) == 2`` decided that ``s - 1`` is the extent 1 (its loop variable the constant
    0, under a guard of that graph), and the next graph, naming its size with the same
    symbol (Dynamo names a symbol by its source), read the third part of its ``cat`` from
    row 1 only (the fuzzer's ``--dynamic`` run, seed 501, program 1131)."""
    def tail(a):
        return a[1:]

    def cat_with_tail(a):
        return torch.cat([a, a, a[1:]], 0)

    for f, a in ((tail, torch.randn(3, 2, 1).permute(1, 0, 2)),
                 (cat_with_tail, torch.randn(8, 33, 1).permute(1, 0, 2))):
        torch._dynamo.reset()  # (Dynamo's symbol names start again: both graphs name the rows alike)
        torch.testing.assert_close(torch.compile(f, backend="braze", dynamic=True)(a), f(a), rtol=0, atol=0)


def test_a_tiny_gpt2_over_batch_sizes_and_lengths(backend):
    """A whole model (transformers' GPT-2, 2 layers, random weights) at three batch sizes and
    sequence lengths: one symbolic graph serves them, each call as eager computes it."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=64)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    g = torch.compile(model, backend="braze", dynamic=True)
    with Compiled() as compiled, torch.no_grad():
        for batch, length in ((2, 8), (3, 13), (2, 21)):
            ids = torch.randint(0, config.vocab_size, (batch, length))
            torch.testing.assert_close(g(ids).logits, model(ids).logits)
    assert compiled.graphs and not compiled.failures
    assert len(compiled.graphs) == len(variants(compiled)) <= (1 if backend == "cpp" else 2), \
        [str(v.sizes) for v in variants(compiled)]
