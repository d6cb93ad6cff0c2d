"""Mismatches the differential fuzzer (tests/fuzz) can produce, as minimal repros.

Each test is the smallest program hypothesis shrinks such a failure to, written out by
hand. A case braze (or torch) gets wrong is marked ``xfail(strict=True)`` with the
cause, so it turns into a failure (and must be unmarked) when the bug goes away; the
fuzzer's ``KNOWN_BUGS`` (or a named exclusion in the generator) keeps the op out of the
CI fuzz run while it is there, and names this file.
"""
import pytest
import torch
import torch.nn.functional as F

from helpers import check, check_low_precision

TORCH_2_13 = torch.__version__ < "2.14"


@pytest.mark.xfail(TORCH_2_13, strict=True, raises=AssertionError,
                   reason="torch 2.13 AOTAutograd drops an in-place op on a 0-d float64 graph input: "
                          "the captured graph is empty, the input keeps its value (backend='aot_eager' "
                          "too; float32/int64/bf16 0-d and float64 1-d are fine; fixed in torch 2.14)")
def test_in_place_mul_of_zero_dim_float64_input():
    def fn(a0):
        a0.mul_(2)
        return a0 + 0
    x = torch.tensor(1.5, dtype=torch.float64)
    expected = fn(x.clone())
    actual_input = x.clone()
    actual = torch.compile(fn, backend="braze")(actual_input)
    assert actual.item() == expected.item() == 3.0
    assert actual_input.item() == 3.0


def test_in_place_mul_of_zero_dim_float32_input():
    """The float32 twin of the case above works on every torch version."""
    def fn(a0):
        a0.mul_(2)
        return a0 + 0
    check(fn, torch.tensor(1.5))


def test_sum_over_size_one_dim_of_negative_zero():
    """A sum over one element adds 0.0, as eager's does (-0.0 becomes +0.0)."""
    def fn(x):
        return 1 / x.sum(1), torch.atan2(x.mean(1), torch.tensor(-1.0))
    # eager: 1/x [inf, 0.5], atan2 [pi, 2.03]; a sum that kept -0.0 gives [-inf, 0.5], [-pi, 2.03]
    check(fn, torch.tensor([[-0.0], [2.0]]))


def test_vector_call_reading_a_value_of_its_own_loop():
    """A row kernel must not move ``cos``'s argument, ``where(v > 0, x, v)``, into the
    arguments loop at the head of each block of lanes (``codegen/cpp/calls.py``): ``v``
    (the LayerNorm output, stored as an output) is computed by the block's main loop,
    after that head (moved, it is a KeyError at code generation and an eager run)."""
    def fn(x):
        v = F.layer_norm(x, (33,))
        w = torch.where(v > 0, x, v)
        return torch.cos(w) != w, v
    check(fn, torch.randn(4, 33))


def test_vector_call_reading_a_value_of_its_own_loop_shared():
    """The same rule for any call and any shared part of its argument: ``exp(v * x)``
    where ``v * x`` is also an output and ``v`` a stored LayerNorm output."""
    def fn(x):
        v = F.layer_norm(x, (64,))
        p = v * x
        return torch.exp(p) + torch.sin(x), p, v
    check(fn, torch.randn(3, 64))


def test_gradient_of_overlapping_view_output():
    """An output that is an overlapping view (unfold) of an intermediate: the shared
    element's gradient sums both windows. torch 2.13's AOTAutograd gives it the gradient of
    ``as_strided``'s backward instead (``backend='aot_eager'`` too; torch 2.11 is right):
    there the test is an expected failure, decided by running ``aot_eager``. The fuzzer
    makes no unfold in gradient programs (``fuzz_ops_shape.small_views``)."""
    def fn(x):
        return (x * 2).unfold(0, 2, 1)
    x = torch.tensor([0.5, -1.0, 2.0])
    cotangent = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    grads = []
    for f in (fn, torch.compile(fn, backend="aot_eager"), torch.compile(fn, backend="braze")):
        torch._dynamo.reset()
        leaf = x.clone().requires_grad_()
        f(leaf).backward(cotangent)
        grads.append(leaf.grad)
    assert grads[0].tolist() == [2.0, 10.0, 8.0]
    if not torch.equal(grads[1], grads[0]):
        pytest.xfail(f"torch's AOTAutograd gives {grads[1].tolist()} (aot_eager), braze {grads[2].tolist()}")
    assert torch.equal(grads[2], grads[0]), f"braze {grads[2].tolist()}"


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="torch 2.13 functionalization drops an in-place write through an expanded "
                          "(overlapping) view of a graph input: the input and the view keep their values "
                          "(backend='aot_eager' too). The fuzzer writes through no view with stride 0 "
                          "(fuzz_ops_more.in_place)")
def test_in_place_write_through_expanded_view():
    def fn(a):
        v = a.expand(2, 3)
        v[:, 0:].fill_(0.25)
        return v + 0
    x = torch.tensor([[1.0, 2.0, 3.0]])
    actual_input = x.clone()
    actual = torch.compile(fn, backend="braze")(actual_input)
    assert torch.equal(actual, torch.full((2, 3), 0.25)), actual
    assert torch.equal(actual_input, torch.full((1, 3), 0.25)), actual_input


def test_float64_divisions_keep_their_operands_whole(backend):
    """A float64 division printed for Triton keeps its operands whole: sigmoid's
    ``1 / (1 + exp(-a))`` must not become ``1.0 / 1.0 + exp(-a)`` (silu, rsqrt and
    reciprocal alike)."""
    x = torch.randn(33, dtype=torch.float64)
    check(lambda x: (torch.sigmoid(x), F.silu(x), torch.rsqrt(x.abs() + 1), torch.reciprocal(x + 4)), x)


def _check_in_place(fn, *args, expect_kernels=None):
    """``check`` for a program that updates its inputs: the inputs are compared too. An
    input with a stride 0 (read only) is passed as it is: a clone would be contiguous."""
    from helpers import Compiled, assert_same

    def copies():
        return [a if 0 in a.stride() else a.clone() for a in args]
    eager_args, braze_args = copies(), copies()
    expected = fn(*eager_args)
    with Compiled() as compiled:
        actual = torch.compile(fn, backend="braze")(*braze_args)
    assert compiled.graphs and not compiled.failures, compiled.failures
    assert_same(actual, expected)
    for k, (a, e) in enumerate(zip(braze_args, eager_args)):
        assert_same(a, e, what=f"input {k} after the call")
    if expect_kernels is not None:
        assert len(compiled.kernels) == expect_kernels, [str(k) for k in compiled.kernels]


@pytest.mark.parametrize("shape", [(7, 5, 8), (3, 64, 67)])
def test_in_place_update_before_a_later_loop_of_its_row(backend, shape):
    """The kernel that overwrites ``a0`` (AOTAutograd's copy_) must not store it in the
    row's first loop: LayerNorm's normalizing loop, which recomputes ``atan(hypot(a0 + 1, ..))``
    rather than storing it, would load the new ``a0`` (off by ~2.5). The overwrite runs in
    the last loop that reads the old value, recomputations included, in the same one kernel."""
    def fn(a0, w):
        a0.add_(1)
        return F.layer_norm(torch.atan(torch.hypot(a0, a0)), shape[1:], w)
    a0 = torch.randn(shape, dtype=torch.float64)
    w = torch.rand(1, shape[2], dtype=torch.float64).expand(shape[1:])  # stride 0: two loops per row
    _check_in_place(fn, a0, w, expect_kernels=1)


def test_in_place_update_of_a_per_row_input_read_by_later_loops(backend):
    """The same for a per-row input, overwritten between loops (after the row's mean) and
    read by a softmax over two dims (of a transposed ``x``: two reduce loops) whose later
    loops recompute ``y`` from the old ``s``: the overwrite follows the last of them
    (a code generator that loads ``s`` once per row would hide the bug)."""
    def fn(x, s):
        y = torch.atan(torch.hypot(x * s, x))  # costly: stored, then recomputed by later loops
        s.add_(x.mean((1, 2), keepdim=True))
        return torch.softmax(y.flatten(1), -1)
    x = torch.randn(6, 11, 3, dtype=torch.float64).transpose(1, 2)
    _check_in_place(fn, x, torch.randn(6, 1, 1, dtype=torch.float64))


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")
def test_variance_over_one_element_of_nan_and_inf(backend):
    """A variance over a dimension of size 1 is not the constant 0: eager computes
    (x - mean)^2 with mean = x, NaN for a NaN or an infinite x (and 0 / 0 with correction 1)."""
    x = torch.tensor([[float("nan"), 1.0, -2.0, float("inf"), -float("inf"), -0.0]])

    def fn(x):
        return (torch.var(x, 0, correction=0), torch.std(x, 0, correction=0, keepdim=True),
                torch.var_mean(x, 0, correction=0), torch.var(x, 0), torch.std(x, 0),
                torch.var(x.unsqueeze(-1), [0, 2], correction=0))
    check(fn, x)
    check(lambda x: 1 / torch.var_mean(x, [0], correction=0)[1], x)  # the mean of -0.0 is +0.0


def test_gradient_of_an_empty_slice_reads_no_memory(backend):
    """The gradient of ``x[:, -1:0:2]`` (no element) scatters an empty slice into zeros: the
    kernel computed both sides of the never-true mask and loaded from the empty tensors' null
    pointers (a segmentation fault). A mask known false folds away, and loads from buffers of
    no element read 0."""
    def fn(a):
        return torch.softmax(a[:, -1:0:2], 0) * 2
    check(fn, torch.randn(8, 1, dtype=torch.float64, requires_grad=True), grad=True)


def test_concatenation_with_an_empty_tensor(backend):
    def fn(a, e):
        return torch.cat([a, e * 3], 1) + 1
    check(fn, torch.randn(8, 3, requires_grad=True), torch.randn(8, 0, requires_grad=True), grad=True)


def test_layer_norm_of_a_stored_half_value_reads_one_value(backend):
    """A fused LayerNorm over a float16 member that is also an output: its mean (taken in the
    reduce loop) and the elements it is subtracted from (recomputed in the normalizing loop)
    must be the same value. One read the rounded value and the other the unrounded one: over
    equal elements the difference of a rounding, times the large rstd of a near-zero
    variance, gave 5e-3 where eager gives 1e-6."""
    def fn(a, idx):
        rows = ((a.expand(3, 1).abs() + 0.5) ** 0.5)[idx]
        return F.layer_norm(rows, [2, 1], eps=1e-3), rows.transpose(2, -1)
    check_low_precision(fn, torch.tensor([0.7], dtype=torch.float16), torch.tensor([[0, 2]]))


def test_layer_norm_of_an_inlined_half_value_reads_one_value(backend):
    """The same over a member the kernel computes in float32 and stores rounded: rounding the
    recomputed elements but not the mean made the same error the other way round."""
    def fn(a):
        v = torch.hypot(a, a)
        return F.layer_norm(torch.stack([torch.stack([v, v], 0)] * 2, 2), [2], eps=1e-3)
    check_low_precision(fn, torch.tensor([0.7], dtype=torch.float16))


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_two_layer_norms_in_one_kernel(backend, layout):
    """Two LayerNorms fused into one kernel take two Welford reduce levels. Over a transposed
    input the kernel is a column kernel, whose per-level row counter was declared twice (a C++
    compile error)."""
    def fn(a):
        return F.layer_norm(F.layer_norm(a, [2, 33], eps=1e-5), [2, 33], eps=1e-3)
    a = torch.randn(7, 2, 33, dtype=torch.float64)
    check(fn, a if layout == "rows" else a.permute(2, 1, 0).contiguous().permute(2, 1, 0))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_amax_backward_compares_the_rounded_maximum_with_the_rounded_sum(backend, dtype):
    """``a.sum().amax()``: amax's backward compares its saved maximum with the sum. The sum,
    stored rounded, reached the comparison fused into its own kernel unrounded: nothing was
    equal, and the gradient was 0 / 0 everywhere."""
    def fn(a):
        return torch.sqrt(a.sum().amax().abs())
    a = torch.randn(16, 16).to(dtype).t().requires_grad_()
    b = a.detach().clone().requires_grad_()
    torch.compile(fn, backend="braze")(a).backward()
    fn(b).backward()
    assert not a.grad.isnan().any()
    torch.testing.assert_close(a.grad, b.grad)


def test_the_gradient_of_std_over_equal_values_is_eager_s(backend):
    """std over rows of equal values is 0 and its gradient 0 (eager masks it there)."""
    def fn(a):
        v = torch.std(a, 2, correction=0)
        return torch.pow(v.abs() + 0.5, v.clamp(-2, 2))
    a = torch.tensor([0.1, 0.7, 1 / 3, 2.2], dtype=torch.float64).view(1, 4, 1).expand(4, 4, 3)
    a = a.detach().requires_grad_()
    b = a.detach().clone().requires_grad_()
    grad = torch.randn(4, 4, dtype=torch.float64)
    torch.compile(fn, backend="braze")(a).backward(grad)
    fn(b).backward(grad)
    torch.testing.assert_close(a.grad, b.grad)


@pytest.mark.parametrize("length", [3, 100, 1000, 5000])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_moments_of_rows_of_equal_values_are_exact(dtype, length, backend):
    """A row of equal values: std and var 0, mean the value itself, bit for bit as eager, in
    the two-pass rows and the looped Welford ones; std's gradient there is 0 (var's is the
    row's deviations from a mean of the backward's own, ulps either side)."""
    row = torch.tensor([0.1, 0.7, 1 / 3, 2.2, 1e5 / 3, -7.77], dtype=dtype).view(6, 1)
    x = row.expand(6, length).contiguous()
    check(lambda x: (torch.std(x, 1), torch.std_mean(x, 1, correction=0), torch.var(x, 1)), x, atol=0, rtol=0)
    check(lambda x: (torch.std(x, 1) + torch.std_mean(x, 1)[0]).exp(), x.requires_grad_(), grad=True)
    if dtype is torch.float64:
        check(lambda x: torch.var_mean(x, 1), x.detach(), atol=0, rtol=0)


@pytest.mark.parametrize("dim", [-1, 0], ids=["rows", "columns"])
@pytest.mark.parametrize("shape", [(8, 37), (8, 20000), (37, 8), (5000, 8)])
def test_float32_std_and_var_past_1e19_stay_finite_as_eager_s(shape, dim, backend):
    """Squares of float32 deviations near 1e20 pass float32's range: eager's CPU kernels
    accumulate float32 moments in double, and so does braze on the CPU (std finite, var
    inf where its float32 result is)."""
    x = torch.randn(shape)
    check(lambda x: (torch.std(x * 1e20, dim=dim), torch.var(x * 1e20, dim=dim),
                     torch.std(x * 1e19, dim=dim), torch.var(x * 1e18, dim=dim),
                     torch.std_mean(x * 1e20, dim=dim)), x)


def test_one_address_read_under_a_mask_that_varies(backend):
    """``v1[:, -3::3]`` of a symbolic row then ``cat``: the read's address is one element
    while its ``cat`` condition varies along the block. Triton refuses a scalar pointer under
    a block mask (an internal error, the graph ran eagerly); the address is now a block."""
    def fn(a0):
        v1 = torch.cat([a0.any(-3), a0.any(-3)], 1)[:, -3::3]
        return torch.cat([torch.erf(v1), v1], 0)
    g = torch.compile(fn, backend="braze", dynamic=True, options={"strict": True})  # (no eager fallback)
    for n in (3, 5):
        a = torch.rand(3, 1, n) > 0.5
        torch.testing.assert_close(g(a), fn(a))


def test_a_value_compared_with_its_minimum_is_not_recomputed_in_a_later_loop(backend):
    """amin's backward compares ``silu(x) == amin``. Fused into the column kernel of argmax
    and amin as an inner value, silu was recomputed in the eq's later loop (vectorized
    there, libmvec's exp) and rounded otherwise than in amin's: no element equalled the
    minimum and the gradient was 0 / 0 (fuzz --dynamic seed 504, program 798). Such a
    comparison now keeps the two apart (``legality.Reason.RECOMPUTED_COMPARED``)."""
    def fn(a):
        return a.argmax(0, keepdim=True), F.silu(a).amin([0], keepdim=True) * 2
    a = torch.tensor([[0.0374, -1.5550, 1.5879, -2.5855], [0.6233, -2.0794, -0.9384, -2.0418]],
                     dtype=torch.float64, requires_grad=True)
    b = a.detach().clone().requires_grad_()
    torch.compile(fn, backend="braze", dynamic=True)(a)[1].sum().backward()
    fn(b)[1].sum().backward()
    assert not a.grad.isnan().any()
    torch.testing.assert_close(a.grad, b.grad)
