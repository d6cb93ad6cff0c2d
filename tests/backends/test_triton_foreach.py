"""Triton foreach kernels: an optimizer step over many tensors in one launch.

Runs the Triton backend on CPU tensors through Triton's interpreter
(``TRITON_INTERPRET=1``). Updates of tensors of many sizes (one element, sizes
that are not a multiple of the block, more than one block, none at all), in
float32 and bfloat16, made in place through ``copy_`` as torch.optim's
single-tensor steps do, are checked against eager on fresh random inputs and
against separate kernels (bit for bit: each part is the same code). Also: long
runs are split at ``config.foreach_max_parts``, a transposing part gets its own
kernel, int64 index math only in the parts that need it, and equal foreach
kernels are one module.
"""

import pytest
import torch
import torch.utils._pytree as pytree

import braze
from braze.codegen.triton import shapes as triton_shapes
from helpers import TRITON_ONLY

pytest.importorskip("triton")
pytestmark = TRITON_ONLY

SIZES = [(33, 7), (1,), (1000,), (16, 16), (16387,), (5,)]  # 16387: two interpreter blocks



def adam(params, grads, exp_avgs, exp_avg_sqs, step, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8):
    """Adam without weight decay, in place; ``step`` a 0-d tensor, counted already (braze
    reads a scalar that an earlier kernel updated in place, and its update again: a bug
    of its own, outside foreach kernels)."""
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = (1 - beta2 ** step).sqrt()
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        p.sub_(lr * (m / bias_correction1) / (v.sqrt() / bias_correction2_sqrt + eps))


def sgd(params, grads, momenta):
    for p, g, m in zip(params, grads, momenta):
        m.mul_(0.9).add_(g, alpha=0.1)
        p.sub_(m * 0.01)


def adam_args(sizes, dtype=torch.float32):
    lists = [[torch.randn(s, dtype=dtype) for s in sizes] for _ in range(4)]
    return (*lists[:3], [v.abs() for v in lists[3]], torch.tensor(11.0))


def sgd_args(sizes, dtypes=(torch.float32,)):
    return tuple([torch.randn(s, dtype=dtypes[k % len(dtypes)]) for k, s in enumerate(sizes)] for _ in range(3))


def report_of(fn, args):
    report = braze.explain(fn, *pytree.tree_map(torch.clone, args))
    assert not report.failures, report.failures
    assert all(k.backend == "triton" for k in report.kernels)
    torch._dynamo.reset()
    return report


def run(fn, args, **knobs):
    """The tensors of ``args`` after ``fn`` ran through braze on a copy of them."""
    args = pytree.tree_map(torch.clone, args)
    with braze.config.patch(**knobs):
        torch.compile(fn, backend="braze")(*args)
    torch._dynamo.reset()
    return pytree.tree_leaves(args)


def check(fn, make, rtol=None, atol=None):
    """Compile ``fn``, then on fresh inputs: braze matches eager (at low precision: its
    error against float64 is at most twice eager's, as ``helpers.check_low_precision``),
    and matches braze without foreach kernels bit for bit."""
    report = report_of(fn, make())
    args = make()
    eager, exact = pytree.tree_map(torch.clone, args), pytree.tree_map(torch.Tensor.double, args)
    fn(*eager)
    fn(*exact)
    expected = zip(pytree.tree_leaves(eager), pytree.tree_leaves(exact), run(fn, args, foreach=False))
    for a, (e, x, separate) in zip(run(fn, args), expected):
        assert a.dtype == e.dtype and a.shape == e.shape and torch.equal(a, separate)
        if a.dtype in (torch.bfloat16, torch.float16) and a.numel():
            error = lambda t: (t.double() - x).abs().max().item()  # noqa: E731
            assert error(a) <= max(2 * error(e), 1e-3 * x.abs().max().item())
        else:
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol)
    return report


def foreach_modules(report) -> list:
    source = report.graphs[0].source
    return [m for m in source.split("# ---- module ")[1:] if m.startswith("triton_foreach")]


def test_adam_step_is_one_foreach_kernel():
    report = check(adam, lambda: adam_args(SIZES), rtol=1e-5, atol=1e-5)
    assert [k.shape for k in report.kernels] == ["foreach"], str(report)
    (module,) = foreach_modules(report)
    assert module.count("tl.program_id(0)") == 1
    assert all(f"# part {k}: " in module for k in range(len(SIZES)))
    assert module.count("libdevice.pow(") == 2  # the bias corrections: once, not once per tensor
    assert "tl.int64" not in module


def test_bfloat16_and_float32_tensors_in_one_kernel():
    report = check(sgd, lambda: sgd_args(SIZES, (torch.bfloat16, torch.float32)))
    assert [k.shape for k in report.kernels] == ["foreach"], str(report)


def test_bfloat16_adam():
    report = check(adam, lambda: adam_args(SIZES[:4], torch.bfloat16))
    assert [k.shape for k in report.kernels] == ["foreach"], str(report)


def test_torch_optim_step_updates_parameters_and_state_in_place():
    """torch.optim's single-tensor SGD: the graph updates parameters and momentum buffers
    through ``copy_`` into its inputs, all in one foreach kernel."""
    def make():
        params = [torch.randn(s) for s in SIZES]
        for p in params:
            p.grad = torch.randn_like(p)
        optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=False)
        optimizer.step()  # creates the momentum buffers
        return params, optimizer
    params, optimizer = make()
    report = braze.explain(optimizer.step)
    assert not report.failures and [k.shape for k in report.kernels] == ["foreach"], str(report)
    torch._dynamo.reset()
    params, optimizer = make()
    eager_params = [p.detach().clone() for p in params]
    eager = torch.optim.SGD(eager_params, lr=0.1, momentum=0.9, foreach=False)
    for p, q in zip(eager_params, params):
        p.grad = q.grad.clone()
        eager.state[p] = {"momentum_buffer": optimizer.state[q]["momentum_buffer"].clone()}
    for _ in range(2):
        torch.compile(optimizer.step, backend="braze")()
        eager.step()
    for p, q in zip(eager_params, params):
        torch.testing.assert_close(q, p)
        torch.testing.assert_close(optimizer.state[q]["momentum_buffer"], eager.state[p]["momentum_buffer"])


def test_empty_tensors_are_left_out():
    """A tensor of no elements gets no kernel (nothing to compute): the others still run,
    in foreach kernels (one ends the run of kernels that ``compiler._bundle`` joins)."""
    report = check(sgd, lambda: sgd_args([(0,)] + SIZES[:3] + [(0, 4)] + SIZES[3:5]))
    assert {k.shape for k in report.kernels} == {"foreach"}, str(report)


def test_long_runs_are_split_into_kernels_of_at_most_the_cap():
    """Seven updates at three parts a kernel: one launcher runs three kernels; the two
    foreach kernels have the same text (same sizes, same math), so they are one module."""
    sizes = [(100,), (7,), (1000,)] * 2 + [(3,)]
    with braze.config.patch(foreach_max_parts=3):
        report = check(sgd, lambda: sgd_args(sizes))
    assert [k.shape for k in report.kernels] == ["foreach+pointwise"], str(report)
    launcher = report.graphs[0].source.split("# ---- launchers")[1]
    assert launcher.count("](") == 3
    assert len(foreach_modules(report)) == 1


def test_transposing_part_gets_its_own_kernel():
    def step(params, grads, momenta, w, w_grad):
        sgd(params, grads, momenta)
        w.sub_(w_grad.t() * 0.01)
    report = check(step, lambda: (*sgd_args(SIZES[:3]), torch.randn(48, 80), torch.randn(80, 48)))
    assert [k.shape for k in report.kernels] == ["foreach+tiled"], str(report)


def test_int64_indexing_only_in_parts_that_need_it(monkeypatch):
    monkeypatch.setattr(triton_shapes, "WIDE", 1000)  # pretend 1000 elements overflow int32
    report = check(sgd, lambda: sgd_args([(100,), (1500,)]))
    (module,) = foreach_modules(report)
    small, wide = module.split("    if ")[1:]
    assert "int64" not in small and "(pid - end0).to(tl.int64) * XBLOCK" in wide


def test_equal_foreach_kernels_are_one_cached_module():
    first = report_of(sgd, sgd_args(SIZES[:4]))
    second = report_of(sgd, sgd_args(SIZES[:4]))
    assert foreach_modules(first) == foreach_modules(second)
    assert second.graphs[0].cache_hit
