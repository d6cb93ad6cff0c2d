"""Scatters at loaded indices (``braze.lower.scatter``): ``scatter``, ``scatter_add``,
``scatter_reduce``, ``index_put`` (accumulating or not), and the gradients of
``gather``, ``index_select`` and advanced indexing, which are scatters; against
eager on both code generators."""
import torch
import torch.nn.functional as F

import braze
from helpers import check, check_low_precision

aten = torch.ops.aten


def rand(*shape, grad=False):
    return torch.randn(shape).requires_grad_(grad)


def fallbacks(compiled) -> list:
    return [f for g in compiled.graphs for f in g.fallbacks]


def scatter_kernels(compiled) -> list:
    return [k for k in compiled.kernels if any("scatter" in op or "index_put" in op for op in k.ops)]


def test_gradients_of_indexing_are_compiled_scatters(backend):
    """Indices repeat, so gradients add up at one element."""
    x = rand(10, 12, grad=True)
    i, j = torch.randint(-10, 10, (9,)), torch.randint(0, 12, (10, 5))
    compiled = check(lambda x, i, j: (x.gather(1, j), x.index_select(1, j[0]), x[i, j[:9, 0]], x[i][:, 3:] * 2,
                                      x[0].gather(0, j[:2, :0])),  # an empty index may have another rank
                     x, i, j, grad=True)
    assert not fallbacks(compiled)
    assert scatter_kernels(compiled)


def test_scatter_forms(backend):
    base, src = rand(4, 6), rand(3, 6)
    unique = torch.stack([torch.randperm(4)[:3] for _ in range(6)], 1)  # distinct rows per column
    repeated = torch.randint(0, 6, (4, 9))
    compiled = check(lambda b, s, u, r: (b.scatter(0, u, s), b.scatter(0, u, -1.5), b.scatter(-2, u[:2, :4], s),
                                         b.scatter_add(1, r, s.repeat(2, 2)[:4, :9] + 1),
                                         b.scatter_reduce(1, r, s.repeat(2, 2)[:4, :9], "sum", include_self=False)),
                     base, src, unique, repeated)
    assert not fallbacks(compiled)
    counts = torch.zeros(7, dtype=torch.int64)
    check(lambda c, i, w: (c.scatter_add(0, i, w), c.scatter_add(0, i[:0], w[:0])),
          counts, torch.randint(0, 7, (50,)), torch.randint(-9, 9, (50,)))
    check(lambda c, i, v: c.scatter(0, i, v), rand(), torch.tensor(0), rand())


def test_index_put_forms(backend):
    x = rand(5, 4, 6)
    i, j = torch.tensor([[-1], [2]]), torch.tensor([0, 5, 3])
    rows = torch.randint(0, 5, (8,))
    compiled = check(lambda x, i, j, v, rows, w: (
        aten.index_put(x, [i, None, j], v),  # broadcast indices apart: their dims come first
        aten.index_put(x, [None, torch.tensor([1, 3])], v[0, :, :2].T),  # adjacent: in place, values broadcast
        aten.index_put(x, [rows], w, True),  # rows repeat: they add up
        aten._unsafe_index_put(x, [rows[:3], None, j], v[0, 0], True)),
        x, i, j, rand(1, 1, 4), rows, rand(8, 4, 6))
    assert not fallbacks(compiled)
    ints = torch.randint(-20, 20, (6, 3), dtype=torch.int32)
    check(lambda a, r, w: aten.index_put(a, [r], w, True), ints, rows % 6,
          torch.randint(-20, 20, (8, 3), dtype=torch.int32))


def test_scatter_result_and_its_base_both_read(backend):
    """The scatter writes a copy: the base keeps its values for its other readers, and
    readers of the result run after the scatter, also a second scatter into it."""
    x, v = rand(6, 5, grad=True), rand(3, 5, grad=True)
    i, k = torch.tensor([4, 1, 4]), torch.tensor([0, 2])

    def f(x, v, i, k):
        y = aten.index_put(x * 2, [i], v, True)
        z = aten.index_put(y, [k], y[:2].sin())
        return z * x, y.sum(0), x + 1
    check(f, x, v, i, k, grad=True)


def test_embedding_backward_is_one_scatter(backend):
    emb, ids, target = rand(20, 5, grad=True), torch.randint(0, 20, (3, 4)), torch.randint(0, 5, (12,))
    compiled = check(lambda emb, ids, t: F.cross_entropy(F.embedding(ids, emb).reshape(12, 5), t),
                     emb, ids, target, grad=True)
    assert not fallbacks(compiled)
    assert len([k for k in compiled.kernels if "aten.index_put.default" in k.ops]) == 1


def test_bf16_accumulating_index_put(backend):
    """C++ adds in order, rounding each sum as eager does; Triton has no bf16 atomic add,
    so the graph calls ATen's ``index_add`` (an extern, not a fallback)."""
    x, w = rand(6, 8).bfloat16(), rand(10, 8).bfloat16()
    rows = torch.randint(0, 6, (10,))
    compiled = check_low_precision(lambda x, r, w: aten.index_put(x, [r], w * 3, True), x, rows, w)
    assert not fallbacks(compiled)
    externs = [e for g in compiled.graphs for e in g.externs]
    in_cpp = backend == "cpp" and x.device.type == "cpu"  # (CUDA tensors take Triton whatever the backend)
    assert externs == ([] if in_cpp else ["aten.index_add.default"])


def test_a_scatter_runs_alone_and_says_why():
    x, i, s = rand(8, 3), torch.randint(0, 8, (5, 3)), rand(5, 3)
    report = braze.explain(lambda x, i, s: x.exp().scatter_add(0, i, s.sin()) + 1, x, i, s)
    (graph,) = report.graphs
    scatter = graph.kernels[1]
    shape = "scatter" if scatter.backend == "cpp" else "pointwise"  # (Triton: 1-D blocks)
    assert [k.shape for k in graph.kernels] == ["pointwise", shape, "pointwise"]
    assert "aten.sin.default" in scatter.ops and "aten.scatter_add.default" in scatter.ops
    refused = [r for r in graph.fusion_log if not r.fused and "scatter" in r.reason.value]
    assert refused and all("runs alone" in r.reason.value for r in refused)
    assert " scatter, writes buf" in graph.graph.to_text() and "] +=" in graph.graph.to_text()


def test_as_strided_scatter_forms(backend):
    """Computed positions: a strided window, a diagonal, an offset, a permuted (dense) base,
    a dtype cast, and the gradient through it; nothing through ATen."""
    x, p = rand(6, 8, grad=True), rand(8, 6).t()
    src_grad = rand(3, 4, grad=True)
    compiled = check(lambda x, p, s: (aten.as_strided_scatter(x * 2, s, (3, 4), (16, 2), 1),
                                      aten.as_strided_scatter(x + 1, s[0, :3] * 3, (3,), (9,), 0),
                                      aten.as_strided_scatter(p + 1, s[:2, :2], (2, 2), (1, 6), 7),
                                      aten.as_strided_scatter(x.double(), s, (3, 4), (8, 1), 20)),
                     x, p, src_grad, grad=True)
    assert not fallbacks(compiled)
    assert scatter_kernels(compiled)


def test_as_strided_scatter_that_writes_an_element_twice_goes_to_aten(backend):
    """Eager writes overlapping positions in the order of its copy; ATen keeps that order."""
    compiled = check(lambda x, s: aten.as_strided_scatter(x + 1, s, (3, 3), (1, 1), 0), rand(4, 4), rand(3, 3))
    assert [f for f in fallbacks(compiled) if "as_strided_scatter" in str(f)]
