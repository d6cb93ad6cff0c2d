"""Outputs that are views, and the storage they share: a compiled graph must not return a
buffer whose element lies elsewhere than its view says (the backward of ``torch.complex``
for one element is a view at storage offset 1 in eager: a one-element buffer returned with
that offset reads past its end, a different garbage value on every run), nor reuse, in
the same call or a later one, the storage of a view it returned (runtime/wrapper.py's
aliasing rule).

Every test calls its compiled function several times on fresh random inputs, keeps what
each call returned, and compares all of it with eager only after the last call."""
import pytest
import torch

import braze
from braze.runtime import wrapper
from helpers import Compiled

aten = torch.ops.aten
CALLS = 4


def run_kept(fn, make_inputs, calls=CALLS):
    """Call the compiled ``fn`` ``calls`` times on fresh inputs, keeping every result, then
    compare each with eager on a copy of its inputs."""
    compiled = torch.compile(fn, backend="braze")
    kept = []
    with Compiled() as record:
        for _ in range(calls):
            args = make_inputs()
            kept.append((args, [a.clone() for a in args], compiled(*args)))
    assert record.graphs and not record.failures, record.failures
    for k, (args, copies, results) in enumerate(kept):
        expected = fn(*copies)
        for j, (got, want) in enumerate(zip(results, expected)):
            assert got.shape == want.shape and got.dtype == want.dtype, (k, j)
            torch.testing.assert_close(got, want, msg=lambda m: f"call {k}, output {j}: {m}")
        for got, want in zip(args, copies):
            assert torch.equal(got, want), f"call {k} changed an input"
    return record


# ----------------------------------------------------------------------------- views at an offset

SHAPES = [(), (1,), (3,), (2, 3)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_complex_forward_and_backward(shape, backend):
    """The backward is ``select(view_as_real(tangent), -1, k)`` for k = 0, 1: eager's
    imaginary part sits at storage offset 1; braze's copy of it is a buffer of its own."""
    def f(a, b):
        return torch.complex(a, b)
    compiled = torch.compile(f, backend="braze")
    kept = []
    with Compiled() as record:
        for _ in range(CALLS):
            a = torch.randn(shape, requires_grad=True)
            b = torch.randn(shape, requires_grad=True)
            out = compiled(a, b)
            grad = torch.randn(shape, dtype=torch.complex64)
            out.backward(grad)
            kept.append((a, b, out, grad))
    assert not record.failures, record.failures
    assert {g.kind for g in record.graphs} >= {"forward", "backward"}
    for k, (a, b, out, grad) in enumerate(kept):  # compared after every call has run
        torch.testing.assert_close(out, torch.complex(a.detach(), b.detach()), msg=lambda m: f"call {k}: {m}")
        torch.testing.assert_close(a.grad, grad.real, msg=lambda m: f"call {k}, real gradient: {m}")
        torch.testing.assert_close(b.grad, grad.imag, msg=lambda m: f"call {k}, imaginary gradient: {m}")
        for g in (a.grad, b.grad):
            assert g.shape == shape and g.dtype == torch.float32


@pytest.mark.parametrize("shape", [(), (1,), (2,)], ids=str)
def test_an_output_read_at_an_offset_gets_a_buffer_of_its_own(shape, backend):
    """Outputs eager gives as views at a storage offset of a reinterpreted base (``view_as_real``,
    ``view.dtype``) are copies in braze: a one-element copy must not keep eager's offset,
    which would put its element past its own end."""
    def f(c, x):
        return (torch.view_as_real(c * 2)[..., 1], torch.view_as_real(c)[..., 1] + 1,
                (x + 1).view(torch.int32)[..., 1:], (x * 3).view(torch.int32)[..., 1])
    run_kept(f, lambda: (torch.randn(shape, dtype=torch.complex64), torch.randn(*shape, 2)))


# ----------------------------------------------------------------------------- several views kept

def test_views_of_an_intermediate_kept_across_calls(backend):
    def f(x):
        y = x * 2 + 1
        return y[1], y[:, 1:3], y.t(), y.select(1, 2), y.unsqueeze(0).expand(2, 3, 4), y.permute(1, 0)
    run_kept(f, lambda: (torch.randn(3, 4),))


def test_views_of_an_input_kept_across_calls(backend):
    def f(x, c):
        r = torch.view_as_real(c)
        return x[1], x[:, 1:], x.t(), r, r[..., 1], r.transpose(0, 1), c.real, c.imag, x * 2
    run_kept(f, lambda: (torch.randn(5, 4)[1:, :3], torch.randn(3, 2, dtype=torch.complex64)))


def test_a_view_of_a_pooled_intermediate_is_not_overwritten(backend):
    """``view_as_complex`` of an intermediate returns its storage; the storage must not go back
    to the wrapper's pool, where the next intermediate of the same size would take it (the
    matrix product's operands here)."""
    def f(x):
        c = torch.view_as_complex(x + 1)
        return c, torch.mm(x.t().contiguous() * 2, x * 4)
    run_kept(f, lambda: (torch.randn(2, 2),))


@pytest.mark.parametrize("chain", ["select", "slice", "unsqueeze", "view_transpose", "view_as_real"])
def test_views_through_an_aliasing_chain_are_not_overwritten(chain, backend):
    """A view of a view (``view_as_complex``, then ATen's ``select``, ``slice``...) of an
    intermediate, returned beside later intermediates of the same size."""
    def f(x):
        c = torch.view_as_complex(x - 1)
        out = {"select": lambda: c[1], "slice": lambda: c[1:], "unsqueeze": lambda: c.unsqueeze(0),
               "view_transpose": lambda: c.view(2, 2).t(), "view_as_real": lambda: torch.view_as_real(c[1:])}[chain]()
        return out, torch.mm((x * 5).t().contiguous(), x * 7)
    run_kept(f, lambda: (torch.randn(4, 2),))


def test_views_from_the_host_cache_are_not_handed_out_again(backend):
    """Every buffer from braze's CPU buffer cache: a block whose storage a returned view holds
    stays leased until the view dies."""
    def f(x):
        c = torch.view_as_complex(x + 1)
        product = torch.mm((x * 5).t().contiguous(), x * 7)
        return c, product, product.t(), torch.mm((x * 2).reshape(8, 8), (x * 4).reshape(8, 8))
    with braze.config.patch(host_cache_min_kb=0):
        run_kept(f, lambda: (torch.randn(32, 2),))


def test_complex_gradients_held_across_calls_keep_their_values(backend):
    """Gradients of views (``select``, ``narrow``, ``view_as_real``) kept while later calls run."""
    def f(a, b):
        c = torch.complex(a, b)
        return torch.view_as_real(c * c).select(-1, 1).narrow(0, 1, 2).sum(), c
    compiled = torch.compile(f, backend="braze")
    kept = []
    for _ in range(CALLS):
        a, b = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
        loss, c = compiled(a, b)
        loss.backward()
        kept.append((a, b, loss, c))
    for a, b, loss, c in kept:
        ea, eb = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
        eloss, ec = f(ea, eb)
        eloss.backward()
        torch.testing.assert_close(loss, eloss)
        torch.testing.assert_close(c, ec)
        torch.testing.assert_close(a.grad, ea.grad)
        torch.testing.assert_close(b.grad, eb.grad)


# ----------------------------------------------------------------------------- the rule itself

VIEWS = [aten.view.default, aten.view.dtype, aten.select.int, aten.slice.Tensor, aten.as_strided.default,
         aten.view_as_real.default, aten.view_as_complex.default, aten.unsqueeze.default, aten.expand.default,
         aten.transpose.int, aten.permute.default, aten.reshape.default, aten._unsafe_view.default,
         aten.alias.default, aten.t.default, aten.diagonal.default, aten.unfold.default, aten.split.Tensor,
         aten.unbind.int, aten.unsafe_split.Tensor, aten.unsafe_split_with_sizes.default,
         aten.unsafe_chunk.default, aten.real.default, aten.imag.default, aten.squeeze.dim,
         aten._reshape_alias.default, aten.contiguous.default, aten.type_as.default, aten.dropout.default]


@pytest.mark.parametrize("op", VIEWS, ids=str)
def test_every_op_that_may_return_a_view_is_known(op):
    assert wrapper._may_alias(op)


@pytest.mark.parametrize("op", [aten.mm.default, aten.add.Tensor, aten.clone.default, aten._to_copy.default,
                                aten.complex.default, aten.mul.Tensor], ids=str)
def test_ops_with_fresh_results_release_their_arguments(op):
    assert not wrapper._may_alias(op)


def test_unannotated_views_do_share_storage():
    """The ops ``_may_alias`` names beside their schema really return views."""
    x = torch.randn(4, 6)
    base = x.untyped_storage().data_ptr()
    results = [aten._unsafe_view.default(x, [24]), *aten.unsafe_split.Tensor(x, 2),
               *aten.unsafe_split_with_sizes.default(x, [1, 3]), *aten.unsafe_chunk.default(x, 2),
               aten.type_as.default(x, x)]
    assert all(r.untyped_storage().data_ptr() == base for r in results)
