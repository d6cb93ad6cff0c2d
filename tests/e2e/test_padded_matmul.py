"""Matrix products whose rows are not a multiple of 16 bytes (``pad_matmul_rows``,
forced on for CPU tensors): stored with padded rows, values and gradients as eager's,
user-visible products returned padded (as Inductor's are), gradients with eager's
strides, and a padded product saved for the backward read through its real strides."""
import pytest
import torch
import torch.nn.functional as F

import braze
from braze.backend import Recording
from helpers import check_low_precision


def _loss_and_logits(x, w, b, target):
    logits = F.linear(torch.tanh(x), w, b)
    return F.cross_entropy(logits, target), logits


def _inputs(seed: int, vocab: int = 1001, rows: int = 12):
    gen = torch.Generator(device=torch.get_default_device()).manual_seed(seed)  # CUDA under the GPU plugin
    x = torch.randn(rows, 64, generator=gen).requires_grad_()
    w = torch.randn(vocab, 64, generator=gen).requires_grad_()
    b = torch.randn(vocab, generator=gen).requires_grad_()
    target = torch.randint(0, vocab, (rows,), generator=gen)
    return x, w, b, target


@pytest.mark.parametrize("setting", ["on", "off"])
def test_training_step_matches_eager(setting):
    with braze.config.patch(pad_matmul_rows=setting), Recording() as rec:
        fn = torch.compile(_loss_and_logits, backend="braze")
        x, w, b, target = _inputs(1)
        loss, logits = fn(x, w, b, target)
        grads = torch.autograd.grad(loss + logits.square().mean(), (x, w, b))
    xe, we, be, _ = _inputs(1)
    loss_e, logits_e = _loss_and_logits(xe, we, be, target)
    grads_e = torch.autograd.grad(loss_e + logits_e.square().mean(), (xe, we, be))
    assert not rec.failures
    torch.testing.assert_close(loss, loss_e)
    torch.testing.assert_close(logits, logits_e)
    assert logits.stride() == ((1004, 1) if setting == "on" else (1001, 1))
    for got, want in zip(grads, grads_e):
        torch.testing.assert_close(got, want)
        assert got.stride() == want.stride()


@pytest.mark.parametrize("forward_pads", [False, True])
def test_a_symbolic_training_step_saves_its_product_unpadded(forward_pads, monkeypatch):
    """With symbolic sizes the backward is compiled for the strides AOTAutograd traced for
    what the forward saves: the forward stores the saved product unpadded (kept padded, the
    backward read it as 1001 wide). Should a forward still store it padded (``forward_pads``,
    as one compiled per shape may), the backward sees the other strides at its call and
    compiles for them."""
    import braze.compiler
    if forward_pads:
        monkeypatch.setattr(braze.compiler, "_outputs_keep_padding", lambda kind: kind != "backward")

    def loss_of(x, w, b, target):
        return F.cross_entropy(F.linear(torch.tanh(x), w, b), target)
    with braze.config.patch(pad_matmul_rows="on"), Recording() as rec:
        fn = torch.compile(loss_of, backend="braze", dynamic=True)
        for rows in (12, 20):
            x, w, b, target = _inputs(rows, rows=rows)
            grads = torch.autograd.grad(fn(x, w, b, target), (x, w, b))
            xe, we, be, _ = _inputs(rows, rows=rows)
            for got, want in zip(grads, torch.autograd.grad(loss_of(xe, we, be, target), (xe, we, be))):
                torch.testing.assert_close(got, want)
    assert not rec.failures and {g.kind for g in rec.graphs} == {"forward", "backward"}
    forward = [g for g in rec.graphs if g.kind == "forward"]
    assert all(g.sizes is not None for g in forward)  # (a GPU's shapes may split the two sizes' classes)
    backward = [g for g in rec.graphs if g.kind == "backward"]
    assert any(g.sizes is None for g in backward) == forward_pads  # (per shape: for the strides given)


def test_a_symbolic_backward_reads_a_padded_parameter_product_through_its_strides(monkeypatch):
    """A product with a parameter (static vocabulary, symbolic batch): the backward's traced
    strides for it hold no symbol. Should the forward store it padded, the backward sees
    strides other than traced at its call (the variants check them) and compiles per
    shape for them, for each batch."""
    import braze.compiler
    monkeypatch.setattr(braze.compiler, "_outputs_keep_padding", lambda kind: kind != "backward")
    layer = torch.nn.Linear(64, 1001)

    def loss_of(x, target):
        return F.cross_entropy(layer(torch.tanh(x)), target)
    with braze.config.patch(pad_matmul_rows="on"), Recording() as rec:
        fn = torch.compile(loss_of, backend="braze", dynamic=True)
        for rows in (12, 20):
            x, _, _, target = _inputs(rows, rows=rows)
            got = torch.autograd.grad(fn(x, target), (x, layer.weight, layer.bias))
            want = torch.autograd.grad(loss_of(x, target), (x, layer.weight, layer.bias))
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b)
    assert not rec.failures
    assert any(g.kind == "backward" and g.sizes is None for g in rec.graphs)


def test_inference_product_consumed_by_a_kernel():
    x, w = torch.randn(30, 16), torch.randn(77, 16)

    def f(x, w):
        return torch.softmax(x @ w.t(), -1), x @ w.t()

    with braze.config.patch(pad_matmul_rows="on"), torch.no_grad():
        soft, raw = torch.compile(f, backend="braze")(x, w)
    soft_e, raw_e = f(x, w)
    torch.testing.assert_close(soft, soft_e)
    torch.testing.assert_close(raw, raw_e)
    assert soft.stride() == soft_e.stride()  # a kernel's output keeps eager's strides
    assert raw.stride() == (80, 1)


def test_aligned_rows_are_not_padded():
    x, w = torch.randn(30, 16), torch.randn(64, 16)
    with braze.config.patch(pad_matmul_rows="on"), torch.no_grad():
        report = braze.explain(lambda x, w: x @ w.t(), x, w)
    assert "_aligned_matmul" not in report.graphs[0].wrapper


def _residual_block(x, w1, b1, w2, b2):
    h = torch.relu(F.linear(x, w1, b1))
    return F.layer_norm(x + F.linear(h, w2, b2).view(x.shape), x.shape[-1:])


def _block_inputs(seed: int):
    gen = torch.Generator(device=torch.get_default_device()).manual_seed(seed)  # CUDA under the GPU plugin
    shapes = [(2, 6, 24), (40, 24), (40,), (24, 40), (24,)]
    return [torch.randn(s, generator=gen).requires_grad_() for s in shapes]


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_addmm_bias_is_added_in_the_reading_kernels(backend):
    """The second product is read only by generated kernels (a view, then the residual
    add): it runs as mm, its bias added there; the first one's result is also saved for
    the backward (relu's input), so it keeps addmm. Values and gradients as eager's. With
    the knob off, both are addmm; without autograd, both are split."""
    expected_inputs = _block_inputs(2)
    expected = _residual_block(*expected_inputs)
    grads_e = torch.autograd.grad(expected.square().sum(), expected_inputs)
    for in_kernels in (True, False):
        with braze.config.patch(cpu_backend=backend, addmm_bias_in_kernels=in_kernels), Recording() as rec:
            inputs = _block_inputs(2)
            out = torch.compile(_residual_block, backend="braze")(*inputs)
            grads = torch.autograd.grad(out.square().sum(), inputs)
        torch._dynamo.reset()
        forward = rec.graphs[0]
        split = ["aten.mm.default", "aten.addmm.default"] if in_kernels else ["aten.addmm.default"] * 2
        assert [str(e) for e in forward.externs] == split
        assert not rec.failures and not forward.fallbacks
        torch.testing.assert_close(out, expected)
        for got, want in zip(grads, grads_e):
            torch.testing.assert_close(got, want)
    with braze.config.patch(cpu_backend=backend), torch.no_grad():
        inputs = _block_inputs(3)
        report = braze.explain(_residual_block, *inputs)
        torch.testing.assert_close(torch.compile(_residual_block, backend="braze")(*inputs), _residual_block(*inputs))
    assert [str(e) for e in report.externs] == ["aten.mm.default"] * 2


def test_addmm_read_by_aten_or_returned_keeps_its_bias():
    x, w, b = torch.randn(5, 12), torch.randn(7, 12), torch.randn(7)
    with torch.no_grad():
        returned = braze.explain(lambda x, w, b: F.linear(x, w, b), x, w, b)
        into_matmul = braze.explain(lambda x, w, b: F.linear(x, w, b) @ w, x, w, b)
    assert [str(e) for e in returned.externs] == ["aten.addmm.default"]
    assert "aten.addmm.default" in [str(e) for e in into_matmul.externs]


def test_bfloat16_addmm_keeps_its_bias():
    """In bf16 cuBLAS adds the bias as fast, rounding once, as eager does: no split."""
    inputs = [t.detach().to(torch.bfloat16) for t in _block_inputs(4)]
    with torch.no_grad():
        report = braze.explain(_residual_block, *inputs)
        check_low_precision(_residual_block, *inputs)
    assert [str(e) for e in report.externs] == ["aten.addmm.default"] * 2


def test_matmul_results_are_not_rechecked_for_their_strides():
    """mm, addmm and bmm return row-major results: the wrapper checks no strides after them."""
    x, w, b = torch.randn(6, 8), torch.randn(8, 5), torch.randn(5)
    batch = torch.randn(3, 6, 8)
    with torch.no_grad():
        report = braze.explain(lambda x, w, b, batch: (torch.addmm(b, x, w).relu(), x @ w, batch @ w.expand(3, 8, 5)),
                               x, w, b, batch)
    wrapper = report.graphs[0].wrapper
    assert {str(e) for e in report.externs} >= {"aten.mm.default", "aten.bmm.default"}
    assert "_ensure_layout" not in wrapper, wrapper


@pytest.mark.parametrize("fn, shapes", [
    (torch.matmul, [(5, 5, 10), (10, 5)]),  # the input's gradient: a view of a padded product
    (F.linear, [(3,), (4, 3), (4,)]),  # the weight's gradient: a padded product, transposed
])
def test_backward_views_of_padded_products_read_their_padding(fn, shapes):
    """A backward's output that is a view of a padded product (``view(mm, ...)``, ``t(mm)``)
    is read through the product's real row stride: a view with eager's strides over the
    padded storage read the padding instead (zeros in the gradients on CUDA)."""
    from helpers import check
    args = [torch.randn(*s, requires_grad=True) for s in shapes]
    with braze.config.patch(pad_matmul_rows="on"):
        check(fn, *args, grad=True)
