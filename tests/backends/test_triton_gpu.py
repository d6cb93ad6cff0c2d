"""Tier 4: the Triton backend on a CUDA GPU (skipped where there is none).

Every kernel shape on CUDA tensors against eager CUDA, the unaligned-view launch
path, autotuning, and a warm cache that runs no compiler. The numerics files of
``tests/e2e`` also run on a GPU when their tensors are made there
(``torch.set_default_device("cuda")`` in a pytest plugin).
"""
import pytest
import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree

import braze
from helpers import check_low_precision

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
CUDA = "cuda"


def randn(*shape, **kwargs):
    return torch.randn(*shape, device=CUDA, **kwargs)


def check_gpu(expected_shapes, fn, *args, rtol=1e-5, atol=1e-5):
    report = braze.explain(fn, *args)
    assert not report.failures, report.failures
    assert [k.shape for k in report.kernels] == expected_shapes, str(report)
    torch._dynamo.reset()
    actual, expected = torch.compile(fn, backend="braze")(*args), fn(*args)
    for a, e in zip(pytree.tree_leaves(actual), pytree.tree_leaves(expected)):
        assert a.device == e.device and a.dtype == e.dtype and a.shape == e.shape
        if e.dtype.is_floating_point:
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            assert torch.equal(a, e)
    return report


CASES = {
    "pointwise": (["pointwise"], lambda x: x.sin() * 2 + 1, (33, 17)),
    "tiled": (["tiled"], lambda x: x.t().contiguous() * 2, (480, 640)),
    "row": (["row"], lambda x: torch.softmax(x, -1), (256, 1000)),
    "row_8k": (["row"], lambda x: F.layer_norm(x, (8192,)), (64, 8192)),  # 32 KiB rows stay in registers
    "row_loop": (["row_loop"], lambda x: F.layer_norm(x, (16384,)), (512, 16384)),
    "row_loop_softmax": (["row_loop"], lambda x: torch.softmax(x, -1), (512, 16384)),
    "column": (["column"], lambda x: x.sum(0), (1024, 16384)),
    "split": (["split"], lambda x: (x.sum(), x.amax(), x.argmax(), torch.var_mean(x)), (1 << 22,)),
    "split_column": (["split"], lambda x: x.sum(0), (1 << 20, 3)),
    "scan": (["scan"], lambda x: x.exp().cumsum(1), (300, 2500)),  # rows of one chunk
    "scan_chunks": (["scan"], lambda x: x.exp().cumsum(1), (300, 5000)),  # rows of five chunks
    "scan_column": (["scan"], lambda x: x.cumsum(0), (600, 96)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_on_gpu(name):
    shapes, fn, size = CASES[name]
    loose = name in ("column", "split", "split_column", "row_loop", "row_8k", "scan", "scan_chunks",
                     "scan_column")
    check_gpu(shapes, fn, randn(*size), rtol=1e-4 if loose else 1e-5, atol=1e-3 if loose else 1e-5)


def test_scatters_add_atomically_on_gpu():
    """Many indices hit each row: the adds race, atomically; integers are exact."""
    idx = torch.randint(0, 64, (500, 33), device=CUDA)
    check_gpu(["pointwise", "pointwise"], lambda x, i, s: x.scatter_add(0, i, s), randn(64, 33), idx,
              randn(500, 33), rtol=1e-4, atol=1e-4)
    counts = torch.randint(-50, 50, (64, 33), device=CUDA)
    check_gpu(["pointwise", "pointwise"], lambda c, i: c.scatter_add(0, i, i * 3 - 7), counts, idx)


def test_cat_halves_are_one_pointwise_kernel_on_gpu():
    x = randn(4, 8, 256, 128, dtype=torch.bfloat16)
    cos, sin = randn(256, 128, dtype=torch.bfloat16), randn(256, 128, dtype=torch.bfloat16)
    rotary = lambda x, c, s: x * c + torch.cat([-x[..., 64:], x[..., :64]], -1) * s  # noqa: E731
    report = braze.explain(rotary, x, cos, sin)
    assert [k.shape for k in report.kernels] == ["pointwise"], str(report)
    assert "tl.minimum(tl.maximum" not in report.graphs[0].source
    torch._dynamo.reset()
    check_low_precision(rotary, x, cos, sin)  # bf16: eager rounds after each op, braze once


def test_channels_last_is_tiled_on_gpu():
    x = randn(8, 64, 14, 14).to(memory_format=torch.channels_last)
    check_gpu(["tiled"], lambda x: (x + 1).contiguous(), x)


def test_integer_and_nan_semantics_on_gpu():
    a = torch.randint(-100, 100, (1000, 37), device=CUDA, dtype=torch.int32)
    check_gpu(["row"], lambda a: (a // 7, a % -3, a << 3, a >> 2, a.sum(1), a.argmax(1), a ** 2), a)
    x = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 2.0, 1.0, 2.0]], device=CUDA)
    check_gpu(["row"], lambda x: (x.argmax(1), x.argmin(1), x.amax(1)), x)


def test_subnormals_survive_libdevice_on_gpu():
    """fmod and remainder of subnormal operands match eager bit for bit: libdevice is
    linked without flush-to-zero (``config.libdevice_ftz`` off); with it on, fmod of a
    subnormal gives 0."""
    tiny = torch.tensor([1e-40, -3e-42, 1e-45, 5e-39, -2e-39, 7e-41], device="cuda")
    a = torch.cat([tiny, tiny, tiny * 1e30])
    b = torch.cat([torch.full_like(tiny, float("inf")), torch.full_like(tiny, 3.0), tiny.flip(0)])
    fn = lambda a, b: (torch.fmod(a, b), torch.remainder(a, b))  # noqa: E731
    for ours, eager in zip(torch.compile(fn, backend="braze")(a, b), fn(a, b)):
        assert torch.equal(ours.view(torch.int32), eager.view(torch.int32)), (ours, eager)
    with braze.config.patch(libdevice_ftz=True, graph_cache=False):
        flushed = braze.compile(lambda a, b: torch.fmod(a, b))(a, b)
    assert bool((flushed[:6] == 0).all())


def test_bf16_rounds_once_to_nearest_even_on_gpu():
    x = randn(64, 512, dtype=torch.bfloat16)
    check_gpu(["pointwise"], lambda x: (x.float() + 1).to(torch.bfloat16), x, rtol=0, atol=0)


def test_unaligned_view_takes_the_jit_path():
    x = randn(1000)[1:]  # data pointer 4 bytes past an aligned one
    check_gpu(["pointwise"], lambda x: x * 2, x)


def test_autotuning_records_a_choice(tmp_path):
    x = randn(4096, 1000)
    with braze.config.patch(autotune=True, cache_dir=str(tmp_path)):
        check_gpu(["row"], lambda x: torch.softmax(x, -1), x)
        torch._dynamo.reset()
        torch.compile(lambda x: torch.softmax(x, -1), backend="braze")(x)
    assert any(p.suffix == ".json" for p in tmp_path.iterdir())


def test_warm_cache_runs_no_compiler(tmp_path, monkeypatch):
    """As a new process would (nothing in memory): every module and binary is read from
    the cache, and Triton's cache gains no file (a compile would write one)."""
    from braze.codegen.triton import build
    fn = lambda x: ((x * 2).sum(-1), x.t().contiguous())  # noqa: E731
    x = randn(64, 300)
    with braze.config.patch(cache_dir=str(tmp_path)):
        cold = braze.explain(fn, x)
        monkeypatch.setattr(build, "_modules", {})
        monkeypatch.setattr(build, "_compiled", {})
        files = set((tmp_path / "triton").rglob("*"))
        torch._dynamo.reset()
        warm = braze.explain(fn, x)
    assert not cold.graphs[0].cache_hit and warm.graphs[0].cache_hit
    assert files and set((tmp_path / "triton").rglob("*")) == files


def test_matmul_with_odd_rows_writes_aligned_rows():
    """A 50257-word vocabulary: the logits' rows are padded for cuBLAS and returned padded
    (as Inductor returns them); with ``pad_matmul_rows="off"``, eager's strides."""
    h, w = randn(64, 768, dtype=torch.bfloat16), randn(50257, 768, dtype=torch.bfloat16)
    report = braze.explain(lambda h, w: h @ w.t(), h, w)
    assert "_aligned_matmul" in report.graphs[0].wrapper
    exact = h.double() @ w.t().double()
    eager_error = ((h @ w.t()).double() - exact).abs().max()
    for setting, strides in (("auto", (50264, 1)), ("off", (50257, 1))):
        torch._dynamo.reset()
        with braze.config.patch(pad_matmul_rows=setting):
            out = torch.compile(lambda h, w: h @ w.t(), backend="braze")(h, w)
        assert out.stride() == strides
        # cuBLAS picks another algorithm for padded rows (an element near zero may differ
        # from eager's by more than bf16's atol): as accurate as eager against float64
        assert (out.double() - exact).abs().max() <= 1.25 * eager_error


def test_optimizer_step_is_foreach_kernels_on_gpu():
    """An SGD step over 20 tensors of many sizes: one launcher of three foreach kernels
    (at most ``foreach_max_parts`` each), the same values as separate kernels and eager."""
    sizes = [(1024, 256), (256,), (1,), (1000, 3), (77,)] * 4

    def step(params, grads, momenta):
        for p, g, m in zip(params, grads, momenta):
            m.mul_(0.9).add_(g, alpha=0.1)
            p.sub_(m * 0.01)
    args = tuple([randn(*s) for s in sizes] for _ in range(3))
    report = braze.explain(step, *pytree.tree_map(torch.clone, args))
    assert [k.shape for k in report.kernels] == ["foreach"], str(report)
    assert report.graphs[0].source.split("# ---- launchers")[1].count("_function, ") == 3
    results = []
    for knobs in ({}, {"foreach": False}):
        torch._dynamo.reset()
        ours = pytree.tree_map(torch.clone, args)
        with braze.config.patch(**knobs):
            torch.compile(step, backend="braze")(*ours)
        results.append(pytree.tree_leaves(ours))
    step(*args)
    for a, separate, e in zip(*results, pytree.tree_leaves(args)):
        assert torch.equal(a, separate)
        torch.testing.assert_close(a, e)
