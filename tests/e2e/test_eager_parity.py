"""Differences from eager the differential fuzzer finds, on both code generators:

- strides: an in-place op on an intermediate keeps the intermediate's strides in eager,
  while AOTAutograd's functional graph has the out-of-place op with its own strides
  (``v = x * 2; v.cumsum_(1); return v``: eager permuted, the graph's ``cumsum``
  contiguous); braze gives the user's outputs the strides of Dynamo's fake run
  (``backend._keep_eager_strides``). Scans, reductions with keepdim and pointwise ops over
  permuted inputs, forward outputs and gradients, keep eager's strides too;
- a scalar exponent is rounded to a bf16/fp16 base's dtype, as eager's pow kernels take
  it: in bf16 ``x ** -0.999`` is ``x ** -1`` (the gradient of ``asin(x) ** 1e-3``, NaN
  where eager's is finite);
- a comparison for equality sees what eager compares: bf16/fp16 values rounded, a value
  computed once (``amax``'s and ``amin``'s backward: an ``input == result`` that matches
  nothing gives a gradient of 0 / 0);
- layer, group and batch norm backwards round a bf16/fp16 input recomputed in the same
  kernel where the saved statistics are rounded (eager's CPU kernels save them in the
  input's dtype): ``layer_norm(x, (1,))``'s input gradient is 0, as eager's, not the
  unrounded input's rounding error times ``1 / sqrt(eps)``;
- a float converted to an integer and back is +0.0 where the integer is 0 (GCC folds the
  round trip into a truncation, whose -0.0 eager never gives).

Inputs are fresh random values (never zeros); strides are compared along the dims of more
than one element."""
import pytest
import torch
import torch.nn.functional as F

from helpers import Compiled, check, check_low_precision, clone_inputs


def permuted(*shape, dtype=torch.float32, perm=None, grad=False):
    """A random tensor of ``shape`` whose storage order is ``perm`` (default: reversed)."""
    perm = perm or tuple(reversed(range(len(shape))))
    stored = torch.randn([shape[p] for p in perm]).to(dtype)
    inverse = [perm.index(d) for d in range(len(shape))]
    return stored.permute(*inverse).requires_grad_(grad)


def assert_strides(actual, expected, what="output"):
    dims = [d for d in range(expected.dim()) if expected.shape[d] > 1]
    assert [actual.stride(d) for d in dims] == [expected.stride(d) for d in dims], \
        f"{what}: strides {actual.stride()} != eager's {expected.stride()} (shape {tuple(expected.shape)})"


def compare(fn, *args, grad=False, atol=None, rtol=None):
    """Values (``helpers.check``) and the strides of every output and, with ``grad``, of
    every input gradient (cotangents laid out as their outputs, so AOTAutograd keeps them)."""
    check(fn, *args, grad=grad, atol=atol, rtol=rtol)
    torch._dynamo.reset()
    eager_args, braze_args = clone_inputs(args), clone_inputs(args)
    expected = fn(*eager_args)
    with Compiled() as compiled:
        actual = torch.compile(fn, backend="braze")(*braze_args)
    assert compiled.graphs and not compiled.failures, compiled.failures
    for k, (a, e) in enumerate(zip(actual, expected)):
        assert_strides(a, e, f"output {k}")
    if grad:
        leaves = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
        outs = [k for k, e in enumerate(expected) if e.requires_grad]
        cotangents = [torch.randn_like(expected[k]) for k in outs]
        want = torch.autograd.grad([expected[k] for k in outs], [eager_args[k] for k in leaves], cotangents)
        got = torch.autograd.grad([actual[k] for k in outs], [braze_args[k] for k in leaves], cotangents)
        for k, (a, e) in zip(leaves, zip(got, want)):
            torch.testing.assert_close(a, e, atol=atol, rtol=rtol)
            assert_strides(a, e, f"gradient of input {k}")


# ----------------------------------------------------------------------------- strides

def test_in_place_scan_of_a_permuted_intermediate(backend):
    """The fuzzer's case: eager's ``cumsum_`` keeps the permuted strides of ``x * 2``."""
    def fn(x):
        v = x * 2
        v.cumsum_(2)
        return (v,)
    compare(fn, permuted(2, 3, 5, 4, perm=(0, 1, 3, 2)))
    compare(fn, permuted(2, 3, 5, 4, perm=(0, 1, 3, 2), grad=True), grad=True)


def test_in_place_ops_then_reads_of_the_changed_value(backend):
    """Outputs computed from an intermediate changed in place (a pointwise op over it has
    its strides in eager), and an output that is both returned and read again."""
    def fn(x):
        v = x.sin()
        v.cumsum_(1)
        v.mul_(2)
        return v * 3, v, v.amax(2, keepdim=True)
    compare(fn, permuted(3, 4, 5))
    compare(fn, permuted(3, 4, 5, grad=True), grad=True)


def test_a_view_of_an_intermediate_changed_in_place(backend):
    """Views of such an intermediate: in training AOTAutograd remakes them from their base
    by their view functions (the base gets eager's strides, the views follow); in
    inference the graph returns them, a row of the base (not dense) as a view of the base
    stored in eager's layout."""
    def fn(x):
        v = x.cos()
        v.cumsum_(0)
        return v.transpose(0, 1), v[1]
    compare(fn, permuted(3, 4, 5))
    compare(fn, permuted(3, 4, 5, grad=True), grad=True)


def test_scans_reductions_and_pointwise_over_permuted_inputs(backend):
    """No in-place op: the traced strides are eager's (scans contiguous, reductions with
    keepdim and pointwise ops as their input), forward and backward."""
    def fn(x):
        return (x.cumsum(1), x.cumsum(3, dtype=torch.float64), (x * 0.5 + 1).cumprod(2), x.sum(1, keepdim=True),
                x.amax((0, 2), keepdim=True), torch.sigmoid(x), x.logcumsumexp(0))
    compare(fn, permuted(2, 3, 5, 4, perm=(0, 1, 3, 2)))
    compare(fn, permuted(2, 3, 5, 4, perm=(3, 2, 1, 0), grad=True), grad=True)


# ----------------------------------------------------------------------------- low-precision pow

def _gradients_as_eager(fn, *args, atol, rtol):
    """Forward and backward of ``fn`` against eager: NaN at the same places, values close."""
    eager_args, braze_args = clone_inputs(args), clone_inputs(args)
    expected = fn(*eager_args)
    with Compiled() as compiled:
        actual = torch.compile(fn, backend="braze")(*braze_args)
        cotangent = torch.randn(expected.shape).to(expected.dtype)
        actual.backward(cotangent)
    expected.backward(cotangent)
    assert compiled.graphs and not compiled.failures, compiled.failures
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)
    for a, e in zip(braze_args, eager_args):
        if isinstance(e, torch.Tensor) and e.requires_grad:
            assert torch.equal(a.grad.isnan(), e.grad.isnan()), \
                f"{int(a.grad.isnan().sum())} NaN in braze's gradient, {int(e.grad.isnan().sum())} in eager's"
            torch.testing.assert_close(a.grad, e.grad, atol=atol, rtol=rtol, equal_nan=True)
    return expected, eager_args


def test_bf16_pow_gradient_of_a_negative_base_is_finite(backend):
    """bf16 ``asin(x) ** 1e-3``: the forward is NaN for x < 0 in both; the gradient's
    ``asin(x) ** -0.999`` is ``asin(x) ** -1`` in eager (the exponent in bf16), finite."""
    x = (torch.rand(272) * 2 - 1).bfloat16().requires_grad_()
    out, (leaf,) = _gradients_as_eager(lambda x: torch.asin(x) ** 1e-3, x, atol=1e-2, rtol=2e-2)
    assert out.isnan().any() and not leaf.grad.isnan().any()


def test_low_precision_pow_exponent_rounding(backend):
    """Scalar and 0-d tensor exponents take the base's dtype: -0.999 is -1 in bf16 (finite
    for a negative base) and -0.99902 in fp16 (NaN, as eager); 2.5001 is 2.5 in bf16."""
    neg = -(torch.rand(64) + 0.25)
    args = (neg.bfloat16(), neg.half(), torch.tensor(-0.999))
    fn = lambda b, h, e: (b ** -0.999, h ** -0.999, b ** e, (-b) ** 2.5001, h ** e)  # noqa: E731
    expected = fn(*args)
    with Compiled() as compiled:
        actual = torch.compile(fn, backend="braze")(*args)
    assert compiled.graphs and not compiled.failures, compiled.failures
    for k, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, equal_nan=True, msg=lambda m: f"output {k}: {m}")
    assert not expected[0].isnan().any() and expected[1].isnan().all()


def test_fp16_sqrt_of_floor_beside_a_gather_of_an_expanded_input(backend):
    """floor's zero gradient is returned, never multiplied by sqrt's infinite one."""
    x = (torch.randn(17) * 2).half().requires_grad_()
    table = torch.randn(1, 5).half().expand(17, 5).requires_grad_()
    index = torch.randint(0, 5, (17, 3))

    def fn(x, table, index):
        return torch.sqrt(torch.floor(torch.sin(x))) + torch.gather(table, 1, index).sum(1)
    _gradients_as_eager(fn, x, table, index, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16], ids=str)
def test_amax_and_amin_gradients_of_computed_values(dtype, backend):
    """Their backward compares the input with the result (``input == result``): a
    recomputed input must equal the one the forward reduced, bit for bit: in fp16 rounded
    as eager's (a bf16 scalar times an fp16 tensor: every element NaN), and in float32 and
    float64 computed once for both (computed in two loops, the C++ backend's ``sin`` can
    round differently: 120 of 384 elements NaN)."""
    x = (torch.randn(8, 3, 16) * 3).to(dtype).requires_grad_()
    _gradients_as_eager(lambda x: torch.sin(x).amax([0, 1]), x, atol=1e-3, rtol=1e-3)
    torch._dynamo.reset()
    scale = torch.tensor(1.7, dtype=torch.bfloat16 if dtype is torch.float16 else dtype).requires_grad_()
    y = torch.randn(33).to(dtype).requires_grad_()
    _gradients_as_eager(lambda s, y: (s * torch.exp(y)).amin(0), scale, y, atol=1e-2, rtol=1e-2)


# ----------------------------------------------------------------------------- norms in low precision

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_layer_norm_over_one_element(dtype, backend):
    """The output is constant (0), so the input gradient is 0, as eager's; the input is
    computed in the graph, so braze keeps it in float32 unless the backward rounds it."""
    x = (torch.randn(6, 1) * 3).to(dtype).requires_grad_()
    _gradients_as_eager(lambda x: F.layer_norm(x * 3 + 1, (1,)), x, atol=1e-3, rtol=1e-3)
    torch._dynamo.reset()
    _gradients_as_eager(lambda x: F.layer_norm(torch.sin(x), (1,)), x, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_group_norm_of_one_element_per_group(dtype, backend):
    x = (torch.randn(4, 6, 1, 1) * 3).to(dtype).requires_grad_()
    _gradients_as_eager(lambda x: F.group_norm(x * 3 + 1, 6), x, atol=1e-3, rtol=1e-3)


def _errors(fn, x, cotangent):
    """Largest errors of braze's and eager's input gradient against float64."""
    ref = x.detach().double().requires_grad_()
    fn(ref).backward(cotangent.double())
    errors = []
    for compiled in (True, False):
        leaf = x.detach().clone().requires_grad_()
        (torch.compile(fn, backend="braze") if compiled else fn)(leaf).backward(cotangent)
        errors.append((leaf.grad.double() - ref.grad).abs().max().item())
    return errors


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_low_precision_norms_stay_as_accurate_as_eager(dtype, backend):
    """Rounding the recomputed input costs no accuracy: forward and input gradient of
    layer, group and batch norm of a computed bf16/fp16 value within twice eager's error."""
    cases = [(lambda x: F.layer_norm(torch.sin(x), (16,)), (8, 16)),
             (lambda x: F.group_norm(torch.sin(x), 2), (2, 4, 3, 3)),
             (lambda x: F.batch_norm(torch.sin(x), None, None, training=True), (4, 3, 3, 3))]
    for fn, shape in cases:
        x = torch.randn(shape).to(dtype)
        torch._dynamo.reset()
        check_low_precision(fn, x)
        torch._dynamo.reset()
        braze_error, eager_error = _errors(fn, x, torch.randn(shape).to(dtype))
        assert braze_error <= 2 * eager_error + 1e-3, (braze_error, eager_error)


@pytest.mark.parametrize("src, mid, dst", [(torch.float16, torch.int8, torch.float32),
                                           (torch.float32, torch.int32, torch.float32),
                                           (torch.float64, torch.int64, torch.float64),
                                           (torch.float32, torch.int16, torch.bfloat16)])
def test_a_float_through_an_integer_is_positive_zero_as_eager(src, mid, dst, backend):
    """``x.to(int8).float()`` of -0.3 is +0.0: GCC folds float -> int -> float into a
    truncation, whose -0.0 showed in ``atan2`` (-pi) and ``1 / x`` (-inf)."""
    def fn(x):
        v = x.to(mid).to(dst)
        return v, torch.atan2(v, v), 1 / v

    x = (torch.rand(64, dtype=torch.float64) * 4 - 2).to(src)  # about half in (-1, 1)
    expected = fn(x)
    actual = torch.compile(fn, backend="braze")(x)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
        assert torch.equal(torch.signbit(a), torch.signbit(e))


def test_clamp_keeps_a_zero_equal_to_its_bound(backend):
    """``clamp(+0.0, min=-0.0)`` is +0.0 in eager (the value is kept where it equals the
    bound), and ``atan2`` of the result tells the zeros apart: 0 against -pi (found by
    ``fuzz_run --dynamic``, seed 501, program 408)."""
    def fn(x):
        r = x.relu()
        low = r.clamp(-0.0, 3.25)
        return torch.atan2(low, low), (-r).clamp(max=0.0), x.clamp(-0.0, 3.25)
    x = torch.cat([-torch.rand(6, dtype=torch.float64), torch.rand(6, dtype=torch.float64) * 4])
    actual, expected = torch.compile(fn, backend="braze")(x), fn(x)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=0, atol=0)
        assert torch.equal(torch.signbit(a), torch.signbit(e)), (a, e)
