"""Tier 2: every lowering family against eager PyTorch, forward and backward, on
fresh random inputs, through each code generator (``backend`` fixture)."""
import math

import pytest
import torch
import torch.nn.functional as F

from helpers import check, check_low_precision

FLOAT = torch.float32
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]


def rand(*shape, dtype=FLOAT, low=None, high=None, grad=False):
    if dtype is torch.bool:
        return torch.rand(shape) > 0.5
    if not dtype.is_floating_point:
        lo = max(0, low or 0) if dtype is torch.uint8 else (-50 if low is None else low)
        return torch.randint(lo, 100 if high is None else high, shape, dtype=dtype)
    t = torch.rand(shape, dtype=torch.float64) * ((high or 3) - (low if low is not None else -3)) + \
        (low if low is not None else -3)
    return t.to(dtype).requires_grad_(grad)


UNARY = {
    "exp": (torch.exp, None), "expm1": (torch.expm1, None), "exp2": (torch.exp2, None),
    "log": (torch.log, (0.1, 5)), "log2": (torch.log2, (0.1, 5)), "log10": (torch.log10, (0.1, 5)),
    "log1p": (torch.log1p, (-0.5, 5)), "sqrt": (torch.sqrt, (0, 5)), "rsqrt": (torch.rsqrt, (0.1, 5)),
    "sin": (torch.sin, None), "cos": (torch.cos, None), "tan": (torch.tan, (-1, 1)),
    "asin": (torch.asin, (-0.9, 0.9)), "acos": (torch.acos, (-0.9, 0.9)), "atan": (torch.atan, None),
    "sinh": (torch.sinh, None), "cosh": (torch.cosh, None), "tanh": (torch.tanh, None),
    "asinh": (torch.asinh, None), "acosh": (torch.acosh, (1.1, 5)), "atanh": (torch.atanh, (-0.9, 0.9)),
    "erf": (torch.erf, None), "erfc": (torch.erfc, None), "erfinv": (torch.erfinv, (-0.95, 0.95)),
    "lgamma": (torch.lgamma, (0.1, 5)), "digamma": (torch.digamma, (0.1, 5)),
    "sigmoid": (torch.sigmoid, None), "reciprocal": (torch.reciprocal, (0.5, 3)),
    "floor": (torch.floor, None), "ceil": (torch.ceil, None), "round": (torch.round, None),
    "trunc": (torch.trunc, None), "frac": (torch.frac, None), "abs": (torch.abs, None),
    "neg": (torch.neg, None), "sign": (torch.sign, None), "relu": (torch.relu, None),
    "gelu": (F.gelu, None), "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), None),
    "silu": (F.silu, None), "square": (torch.square, None), "cube": (lambda x: x ** 3, None),
    "pow_frac": (lambda x: x ** 1.7, (0.1, 3)), "isnan": (torch.isnan, None), "isinf": (torch.isinf, None),
    "isfinite": (torch.isfinite, None), "signbit": (torch.signbit, None),
    "logical_not": (torch.logical_not, None), "nan_to_num": (torch.nan_to_num, None),
    "softplus": (F.softplus, None), "hardtanh": (F.hardtanh, None), "leaky_relu": (F.leaky_relu, None),
    "elu": (F.elu, None), "hardswish": (F.hardswish, None), "hardsigmoid": (F.hardsigmoid, None),
    "mish": (F.mish, None), "logsigmoid": (F.logsigmoid, None),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float(name, backend):
    fn, domain = UNARY[name]
    low, high = domain or (-3, 3)
    x = rand(33, 17, low=low, high=high, grad=True)
    differentiable = name not in ("isnan", "isinf", "isfinite", "signbit", "logical_not", "floor", "ceil",
                                  "round", "trunc", "sign", "erfinv", "lgamma", "digamma")
    check(fn, x, grad=differentiable)


def test_float_remainders_are_exact(backend):
    """fmod, remainder and floor_divide of float32 bit for bit as eager (the C++ fmod takes a
    float quotient and a fused multiply-add 8 lanes at a time below 2^23, a double quotient below
    2^28 and libm's fmodf beyond), signs of zeros included.
    Quotients stay within float range: beyond it eager's own vectorized fmod gives NaN
    (3e38 fmod 1e-38 in a 16-element tensor) where its scalar tail is exact."""
    gen = torch.Generator().manual_seed(5)

    def wide(high):
        return torch.randn(4000, generator=gen, device="cpu") * 10.0 ** torch.randint(
            -6, high, (4000,), generator=gen, device="cpu")
    a = torch.cat([wide(30), torch.tensor([0.0, -0.0, 6.0, -6.0, 1e-45, 3e38, float("inf"), float("nan"), 7.5,
                                           -7.5, 5.0, -5.0, 0.0, 5.0, 1e-45], device="cpu")])
    b = torch.cat([wide(6), torch.tensor([3.0, -3.0, 3.0, 3.0, 3.0, 7.0, 2.0, 2.0, float("inf"), -float("inf"),
                                          0.0, 0.0, 0.0, -0.0, 3.0], device="cpu")])
    a, b = a.to(torch.get_default_device()), b.to(torch.get_default_device())  # (-p cuda_default)
    for fn in (torch.fmod, torch.remainder, lambda x, y: torch.div(x, y, rounding_mode="floor")):
        check(fn, a, b, atol=0, rtol=0)
        got, expected = torch.compile(fn, backend="braze")(a, b), fn(a, b)
        numbers = ~expected.isnan()
        assert torch.equal(got[numbers].signbit(), expected[numbers].signbit())


DIVISORS = (3.0, 7, -3.0, 0.1, 1e-30, 3e38, 0.0, -0.0, float("inf"))
DIVISIONS = {"true": lambda x, b: x / b, "trunc": lambda x, b: torch.div(x, b, rounding_mode="trunc"),
             "floor": lambda x, b: torch.div(x, b, rounding_mode="floor"), "//": lambda x, b: x // b}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32])
def test_division_by_a_number_is_eager_bit_for_bit(backend, dtype):
    """``x / b``, trunc and floor division by a Python number, signs of zeros included. On
    CUDA eager multiplies by ``1 / b`` rounded once (its CPU-scalar path), on the CPU it
    divides; braze does as the device's eager does (the CUDA case runs on the GPU machine:
    ``-p cuda_default``). Quotients stay within float range: beyond it eager's vectorized CPU
    ``fmod``, which the Triton interpreter calls, gives NaN."""
    gen = torch.Generator().manual_seed(11)
    if dtype.is_floating_point:
        x = torch.cat([torch.randn(3000, generator=gen, dtype=torch.float64, device="cpu")
                       * 10.0 ** torch.randint(-30, 7, (3000,), generator=gen, device="cpu"),
                       torch.tensor([0.0, -0.0, 1e-45, -1e-45, 3e6, -3e6, float("inf"), float("nan"),
                                     6.0, -6.0, 7.0, 21.0, -21.0], device="cpu")]).to(dtype)
    else:
        x = torch.randint(-1000, 1000, (3000,), generator=gen, dtype=dtype, device="cpu")
    x = x.to(torch.get_default_device())
    for b in DIVISORS:
        for name, op in DIVISIONS.items():
            if not dtype.is_floating_point and (name != "true" and isinstance(b, int) or b == 0):
                continue  # integer floor/trunc division: exact already; integer division by zero raises
            torch._dynamo.reset()
            fn = _bound(op, b)
            check(fn, x, atol=0, rtol=0)
            got, expected = torch.compile(fn, backend="braze")(x), fn(x)
            numbers = ~expected.isnan()
            assert torch.equal(got[numbers].signbit(), expected[numbers].signbit()), (name, b)


def _bound(op, b):
    return lambda x: op(x, b)


def test_cuda_division_by_a_number_multiplies_by_its_reciprocal():
    """The lowering's choice, checked without a GPU (fake CUDA tensors): ``x / 3`` on CUDA is
    ``x * float32(1 / 3)``, as eager's kernel computes it, a product kept out of fused
    multiply-adds (``mul_rn``); on the CPU a division."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from braze.lower import lower
    bodies = {}
    for device in ("cuda", "cpu"):
        with FakeTensorMode():
            gm = make_fx(lambda x: (x / 3, torch.div(x, 3.0, rounding_mode="trunc")))(torch.empty(8, device=device))
        graph, _ = lower(gm)
        bodies[device] = [str(node.body) for node in graph.nodes if hasattr(node, "body")]
    third = (torch.tensor(1.0) / torch.tensor(3.0)).item()
    assert bodies["cuda"] == [f"mul_rn(arg0[x0], {third!r})", f"trunc(mul_rn(arg0[x0], {third!r}))"]
    assert bodies["cpu"] == ["(arg0[x0] / 3.0)", "truncdiv(arg0[x0], 3.0)"]


def test_cuda_graph_reads_a_cpu_scalar_as_eager_does():
    """A 0-d CPU tensor read by a CUDA graph: copied to the GPU by the wrapper (``host_scalar``),
    and a divisor of that kind multiplies by its reciprocal, as eager's CPU-scalar path does
    (checked against eager on the GPU machine by ``test_cuda_graph_with_a_cpu_scalar_runs_compiled``)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from braze.lower import lower
    with FakeTensorMode():
        gm = make_fx(lambda s, x: (x / s, x * s))(torch.empty((), device="cpu"), torch.empty(8, device="cuda"))
    graph, _ = lower(gm)
    assert graph.device.type == "cuda"
    inputs = [(n.name, n.host_scalar) for n in graph.nodes if hasattr(n, "host_scalar")]
    assert inputs == [("arg0", True), ("arg1", False)]
    assert [str(n.body) for n in graph.nodes if hasattr(n, "body")] == ["mul_rn(arg1[x0], (1.0 / arg0[]))",
                                                                         "(arg1[x0] * arg0[])"]


@pytest.mark.parametrize("value, dtype", [(1 / 3, torch.float64), (0.1, torch.float32), (2.5, torch.bfloat16),
                                          (2 ** 62 + 1, torch.int64), (-7, torch.int8), (True, torch.bool)])
def test_host_scalars_keep_their_value_and_dtype(value, dtype):
    """The wrapper moves a 0-d CPU tensor to the graph's device by a fill from its value (no
    copy from pageable memory, which waits for the stream): every bit and the dtype kept."""
    from braze.runtime.wrapper import _host_scalar
    x = torch.tensor(value, dtype=dtype, device="cpu")
    moved = _host_scalar(x, torch.get_default_device())
    assert moved.dtype == dtype and moved.dim() == 0 and torch.equal(moved.cpu(), x)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_graph_with_a_cpu_scalar_runs_compiled():
    x, s = torch.randn(5000, device="cuda") * 100, torch.tensor(3.0)
    for fn in (lambda x, s: x / s, lambda x, s: x * s, lambda x, s: x + s,
               lambda x, s: torch.div(x, s, rounding_mode="trunc"), lambda x, s: torch.where(x > 0, x, s)):
        torch._dynamo.reset()
        check(fn, x, s, atol=0, rtol=0)


def test_cuda_rsqrt_is_cudas_own():
    """``rsqrt`` and ``x ** -0.5`` on CUDA: CUDA's ``rsqrt`` function (libdevice's, what eager's
    kernels call; on the H100 equal to eager for every float32, ``.device/divexhaust.py``);
    on the CPU ``1 / sqrt``, as eager computes it there. Lowering checked with fake tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from braze.lower import lower
    for device, name in (("cuda", "cuda_rsqrt"), ("cpu", "rsqrt")):
        with FakeTensorMode():
            gm = make_fx(lambda x: (torch.rsqrt(x), x ** -0.5))(torch.empty(8, device=device))
        graph, _ = lower(gm)
        assert [str(node.body) for node in graph.nodes if hasattr(node, "body")] == [f"{name}(arg0[x0])"] * 2


def test_rsqrt_is_eager_bit_for_bit():
    """On the default device (CUDA with ``-p cuda_default``: compiled Triton, not the interpreter
    the ``backend`` fixture would switch on), over magnitudes from subnormal to huge."""
    gen = torch.Generator().manual_seed(3)
    x = torch.rand(20000, generator=gen, device="cpu") * 10.0 ** torch.randint(-44, 38, (20000,), generator=gen,
                                                                               device="cpu")
    specials = torch.tensor([0.0, -0.0, -1.0, float("inf"), float("nan"), 1e-45], device="cpu")
    x = torch.cat([x, specials]).to(torch.get_default_device())
    check(lambda x: (torch.rsqrt(x), x ** -0.5), x, atol=0, rtol=0)


def test_unary_special_values(backend):
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 2.5, -2.5, 0.5, 1.5])
    check(lambda x: (torch.sign(x), torch.round(x), torch.relu(x), torch.abs(x), torch.floor(x),
                     torch.isnan(x), torch.signbit(x), x.clamp(-1, 1), torch.sigmoid(x)), x)


BINARY = {
    "add": lambda a, b: a + b, "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
    "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "floor_div": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "trunc_div": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "remainder": torch.remainder, "fmod": torch.fmod, "maximum": torch.maximum, "minimum": torch.minimum,
    "fmax": torch.fmax, "fmin": torch.fmin, "pow": lambda a, b: a.abs() ** b, "atan2": torch.atan2,
    "hypot": torch.hypot, "copysign": torch.copysign, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt,
    "le": torch.le, "gt": torch.gt, "ge": torch.ge, "where": lambda a, b: torch.where(a > b, a, b),
    "clamp_tensor": lambda a, b: torch.clamp(a, min=b, max=b + 1),
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
    "lerp": lambda a, b: torch.lerp(a, b, 0.3), "xlogy": torch.xlogy,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float_broadcast(name, backend):
    a = rand(8, 1, 16, grad=True)
    b = rand(5, 1, low=0.5, high=3, grad=True)
    nondiff = name in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
                       "floor_div", "trunc_div")
    check(BINARY[name], a, b, grad=not nondiff)


INT_BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "true_div": lambda a, b: a / b, "floor_div": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "trunc_div": lambda a, b: torch.div(a, b, rounding_mode="trunc"), "remainder": torch.remainder,
    "fmod": torch.fmod, "maximum": torch.maximum, "minimum": torch.minimum,
    "and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor,
    "lt": torch.lt, "eq": torch.eq, "shl": lambda a, b: a << (b % 7), "shr": lambda a, b: a >> (b % 7),
    "pow": lambda a, b: a ** (b % 4), "where": lambda a, b: torch.where(a > b, a, b),
    "clamp": lambda a, b: a.clamp(-10, 20), "abs_neg": lambda a, b: (-a).abs() + b,
    "not": lambda a, b: ~a ^ b,
}


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("name", sorted(INT_BINARY))
def test_binary_int(name, dtype, backend):
    a = rand(7, 9, dtype=dtype)
    b = rand(9, dtype=dtype, low=1, high=20)
    if name == "abs_neg" and dtype is torch.uint8:
        pytest.skip("neg of uint8 is rejected by eager")
    check(INT_BINARY[name], a, b)


def test_int_scalars_and_promotion(backend):
    a = rand(6, 5, dtype=torch.int32)
    b = rand(6, 5, dtype=torch.int64)
    c = rand(5, dtype=torch.int8)
    check(lambda a, b, c: (a + b, a * 3, a + 2.5, c + b, a // 3, a % -4, (a > 0) & (c < 5), a.sum(1)), a, b, c)


def test_bool_ops(backend):
    a, b = rand(10, 10, dtype=torch.bool), rand(10, dtype=torch.bool)
    check(lambda a, b: (a & b, a | b, a ^ b, ~a, a + b, a * b, torch.maximum(a, b), a.any(1), a.all(0),
                        a.sum(0), torch.where(a, 1.5, -2.0)), a, b)


CAST_DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool,
               torch.bfloat16, torch.float16]


@pytest.mark.parametrize("src", CAST_DTYPES)
@pytest.mark.parametrize("dst", CAST_DTYPES)
def test_casts(src, dst, backend):
    x = rand(4, 33, dtype=src, low=0 if dst is torch.uint8 else -100, high=100) if src.is_floating_point \
        else rand(4, 33, dtype=src)
    if src.is_floating_point and dst is torch.uint8:
        x = x.abs()
    check(lambda x: x.to(dst) if dst is not torch.bool else (x.to(dst), x.to(dst).float()), x)


def test_int_chain_exact(backend):
    a = rand(100, 130, dtype=torch.int64, low=-10 ** 6, high=10 ** 6)
    b = rand(100, 130, dtype=torch.int64, low=-10 ** 6, high=10 ** 6)
    c = rand(100, 130, dtype=torch.int32, low=-1000, high=1000)
    check(lambda a, b, c: ((a.to(torch.int32) + b) * c).to(torch.int64), a, b, c)


VIEWS = {
    "permute": lambda x: x.permute(2, 0, 1) * 2,
    "transpose_add": lambda x: x.transpose(0, 2) + 1,
    "expand": lambda x: x[:, :1].expand(4, 6, 5) + x,
    "reshape_merge": lambda x: x.reshape(24, 5).sin(),
    "reshape_split": lambda x: x.reshape(4, 3, 2, 5).cos(),
    "reshape_mixed": lambda x: x.reshape(2, 60).exp().reshape(8, 15),
    "view_of_transpose": lambda x: x.transpose(1, 2).reshape(4, 30) + 1,
    "slice": lambda x: x[1:3, ::2, 1:] * 3,
    "negative_slice": lambda x: x[-2:, 1:-1] + 1,
    "select": lambda x: x[2] + x[:, 3, :].sum(),
    "squeeze_unsqueeze": lambda x: x[:, :1].squeeze(1).unsqueeze(0) + 1,
    "t": lambda x: x[0].t() * x[1].t(),
    "unbind": lambda x: sum(x.unbind(1)),
    "split": lambda x: x.split(2, dim=1)[1] * x.split([1, 4], dim=2)[1].sum(),
    "diagonal": lambda x: torch.diagonal(x, 0, 1, 2) + 1,
    "flip": lambda x: x.flip(1) + 1,
    "roll": lambda x: x.roll(2, 1) + 1,
    "repeat": lambda x: x.repeat(2, 1, 1) + 1,
    "narrow": lambda x: x.narrow(1, 1, 3) * 2,
    "unfold": lambda x: x.unfold(2, 2, 1) + 1,
    "as_strided": lambda x: torch.as_strided(x.exp(), (3, 3), (5, 1), 2) + 1,
    "contiguous": lambda x: x.transpose(0, 1).contiguous(),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views(name, backend):
    x = rand(4, 6, 5, grad=True)
    check(VIEWS[name], x, grad=True)


def test_non_contiguous_and_broadcast_inputs(backend):
    base = rand(8, 12, 6)
    x = base.transpose(0, 2)[::2]  # strided, non-contiguous view as a graph input
    y = rand(1, 12, 1)
    z = rand(12, 1).expand(12, 8)  # stride 0
    check(lambda x, y, z: (x * y + 1, (x.sum(0) + z[:, :1]).relu(), x + z[None]), x, y, z)


def test_channels_last(backend):
    x = rand(2, 3, 5, 7).to(memory_format=torch.channels_last)
    w = rand(3, 1, 1)
    check(lambda x, w: (x * w).relu() + 1, x, w)


def test_transposes_in_tiles(backend):
    """Large enough to be tiled: ragged tile edges, two strided loads of different
    dtypes, integers, a third loop outside the tile, channels-last to contiguous."""
    x, y = rand(200, 130), rand(130, 200)
    d = rand(130, 200, dtype=torch.float64)
    i = torch.randint(-1000, 1000, (130, 200))
    check(lambda x, y, d, i: (x.t() + y, x.t() * d + i, i.t() * 3), x, y, d, i)
    p = rand(3, 70, 90)
    check(lambda p: p.permute(0, 2, 1).contiguous().exp() + p.sum(), p)
    c = rand(2, 70, 9, 10).to(memory_format=torch.channels_last)
    check(lambda c: (c * 2).contiguous(memory_format=torch.contiguous_format), c)


SHAPES = [(0,), (1,), (5, 0), (1, 1), (1, 7), (7, 1), (3, 1, 4), ()]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_edge_shapes(shape, backend):
    x = rand(*shape, grad=True)
    check(lambda x: (x.sin() * 2 + 1, x.sum(), (x * x).mean() if x.numel() else x.sum()), x, grad=True)


def test_scalars(backend):
    x, s = rand(5, 3), torch.tensor(2.5)
    check(lambda x, s: (x * s + s, s.exp(), x.sum() * s), x, s)


REDUCTIONS = {
    "sum": lambda x, d, k: x.sum(d, keepdim=k), "mean": lambda x, d, k: x.mean(d, keepdim=k),
    "prod": lambda x, d, k: x.prod(d[0], keepdim=k) if len(d) == 1 else x.prod(),
    "amax": lambda x, d, k: x.amax(d, keepdim=k), "amin": lambda x, d, k: x.amin(d, keepdim=k),
    "var": lambda x, d, k: x.var(d, keepdim=k), "std": lambda x, d, k: x.std(d, keepdim=k, correction=0),
    "var_mean": lambda x, d, k: torch.var_mean(x, d, keepdim=k),
    "argmax": lambda x, d, k: x.argmax(d[0], keepdim=k) if len(d) == 1 else x.argmax(),
    "argmin": lambda x, d, k: x.argmin(d[0], keepdim=k) if len(d) == 1 else x.argmin(),
    "max_dim": lambda x, d, k: x.max(d[0], keepdim=k) if len(d) == 1 else x.max(),
    "logsumexp": lambda x, d, k: torch.logsumexp(x, d, keepdim=k),
    "norm": lambda x, d, k: torch.linalg.vector_norm(x, 2, d, keepdim=k),
}
DIMS = [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dims", DIMS, ids=str)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions(name, dims, keepdim, backend):
    x = rand(6, 33, 10, grad=name not in ("argmax", "argmin"))
    if name == "prod":
        # |x| in [0.9, 1.1] with random signs: products of up to 1980 elements and all their
        # partial products stay inside float32. With wider inputs the partial products of the
        # traced backward (cumprod of prefixes and suffixes, prod_backward's branch-free form)
        # overflowed for some draws where eager's (result / x) did not.
        magnitude = rand(6, 33, 10, low=0.9, high=1.1)
        x = (magnitude * torch.where(rand(6, 33, 10) > 0, 1.0, -1.0)).requires_grad_()
    check(lambda x: REDUCTIONS[name](x, list(dims), keepdim), x, grad=name not in ("argmax", "argmin"))


def test_argmax_ties_and_nan(backend):
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [float("nan"), 1.0, float("nan"), 5.0], [2.0, 2.0, 2.0, 2.0]])
    check(lambda x: (x.argmax(1), x.argmin(1), x.amax(1), x.amin(0), x.argmax(0)), x)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8, torch.bool])
def test_integer_reductions(dtype, backend):
    x = rand(9, 40, dtype=dtype)
    if dtype is torch.bool:
        check(lambda x: (x.sum(1), x.sum(), x.amax(0), x.amin(1), x.any(1), x.all(0)), x)
    else:
        check(lambda x: (x.sum(1), x.sum(), x.amax(0), x.amin(1), x.argmax(1), x.any(1), x.all(0), x.prod(1)), x)


@pytest.mark.parametrize("shape", [(3, 200000), (200000, 3), (1, 300001), (70000,), (512, 4096)], ids=str)
def test_large_reductions(shape, backend):
    x = rand(*shape)
    check(lambda x: (x.sum(-1), x.sum(0), x.amax(-1), x.var(-1), x.argmax(-1), x.softmax(-1)), x, rtol=1e-4, atol=1e-4)


def test_column_reduction_with_epilogue(backend):
    x, w = rand(4096, 100), rand(100)
    check(lambda x, w: ((x.sum(0) * w).sigmoid(), (x - x.mean(0)).abs().amax(0)), x, w)


def test_indexing_family(backend):
    x = rand(10, 12, grad=True)
    i = torch.randint(-10, 10, (7,))
    j = torch.randint(0, 12, (10, 3))
    check(lambda x, i, j: (x[i], x[:, j[:, 0] % 12], x.gather(1, j), x.index_select(0, i % 10),
                           x[i, j[:7, 0]], x[i][:, None, :] * 2), x, i, j, grad=True)


def test_scatter_one_per_slice_fuses(backend):
    """One-hot scatters (cross-entropy's backward) are a ``where`` that fuses into its
    reader: one kernel, no scatter (the general forms: tests/test_scatter.py)."""
    x, s, i = rand(6, 7), rand(6, 3), torch.randint(0, 7, (6, 1))
    compiled = check(lambda x, s, i: x.scatter(1, i, 2.5) + x.scatter(1, i, s) * 2, x, s, i)
    assert [k.shape for k in compiled.kernels] == ["pointwise"]


def test_cat_pad_scatter(backend):
    a, b = rand(4, 3, grad=True), rand(4, 5, grad=True)
    check(lambda a, b: (torch.cat([a, b.sin(), a], 1), F.pad(a, (2, 1, 0, 3), value=0.5),
                        F.pad(b, (-1, 2)), torch.stack([a, a * 2]), b[:, 1:4].sum()), a, b, grad=True)


def test_creation_ops(backend):
    x = rand(5, 4)
    check(lambda x: (x + torch.arange(4), torch.full((3, 2), 7), torch.zeros_like(x) + 1,
                     torch.ones(2, dtype=torch.int64) * 3, torch.arange(1.0, 3.0, 0.25), torch.eye(3) * 2,
                     torch.linspace(0, 1, 7) + 1, torch.tensor(3.0) + x), x)


def test_where_masked_fill_clamp(backend):
    x, m = rand(6, 7), rand(6, 7) > 0
    check(lambda x, m: (torch.where(m, x, 0.0), x.masked_fill(m, -1.0), x.clamp(min=-0.5),
                        x.clamp(max=0.25), torch.clamp(x, -1, 1)), x, m)


def test_composites_with_gradients(backend):
    x, w, b = rand(16, 64, grad=True), rand(64, grad=True), rand(64, grad=True)
    y = rand(16, 64)
    check(lambda x, w, b, y: (F.layer_norm(x, (64,), w, b).softmax(-1), F.mse_loss(x.sin() * w, y),
                              F.log_softmax(x, 0), (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w),
                              F.cross_entropy(x, torch.arange(16) % 64), F.gelu(x + b)), x, w, b, y, grad=True)


def test_batch_norm_training_updates_running_stats(backend):
    bn = torch.nn.BatchNorm2d(3)
    bn2 = torch.nn.BatchNorm2d(3)
    x = rand(4, 3, 6, 6, grad=True)
    x2 = x.detach().clone().requires_grad_()
    out = bn(x)
    out.sum().backward()
    compiled = torch.compile(bn2, backend="braze")
    out2 = compiled(x2)
    out2.sum().backward()
    torch.testing.assert_close(out2, out)
    torch.testing.assert_close(x2.grad, x.grad)
    torch.testing.assert_close(bn2.running_mean, bn.running_mean)
    torch.testing.assert_close(bn2.running_var, bn.running_var)
    assert bn2.num_batches_tracked.item() == bn.num_batches_tracked.item() == 1


def test_in_place_on_input(backend):
    def fn(x, y):
        x.mul_(2).add_(y)
        return x.sum()
    x, y = rand(5, 6), rand(6)
    x2 = x.clone()
    expected = fn(x, y)
    actual = torch.compile(fn, backend="braze")(x2, y)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(x2, x)


def test_outputs_that_alias_inputs_and_views(backend):
    x = rand(4, 6)
    check(lambda x: (x, x.t(), x[1:], (x * 2).view(24), (x + 1)[:, ::2]), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision(dtype, backend):
    x, y, w = rand(32, 128, dtype=dtype), rand(32, 128, dtype=dtype), rand(128, dtype=dtype)
    check_low_precision(lambda x, y, w: ((x * y).sum(-1), F.layer_norm(x, (128,), w), x.softmax(-1),
                                         F.gelu(x) * w, (x.float() + 1).to(dtype), x.amax(0)), x, y, w)


def test_mlp_training_step(backend):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                                torch.nn.Linear(64, 10))
    copy = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                               torch.nn.Linear(64, 10))
    copy.load_state_dict(model.state_dict())
    x, y = rand(16, 32), torch.randint(0, 10, (16,))
    compiled = torch.compile(copy, backend="braze")
    for m, run in ((model, model), (copy, compiled)):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            F.cross_entropy(run(x), y).backward()
            opt.step()
    for p, q in zip(model.parameters(), copy.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)


def test_reduction_precision_long_rows(backend):
    x = rand(2, 1 << 20) + 10  # large mean: a naive one-pass variance would lose digits
    check(lambda x: (x.var(1), x.mean(1), x.sum(1)), x, rtol=1e-4, atol=1e-3)
    assert math.isfinite(x.var().item())


@pytest.mark.parametrize("order", ["m_first", "p_first"])
def test_fused_input_mutations_read_old_values(order, backend):
    """One kernel overwrites m while another member still needs m's old value."""
    def update(m, p, g):
        p.add_(m * 2)
        m.mul_(0.9).add_(g)

    def fn(a, b, g):
        if order == "m_first":
            update(a, b, g)
        else:
            update(b, a, g)
    a, b, g = rand(1000), rand(1000), rand(1000)
    a2, b2 = a.clone(), b.clone()
    fn(a, b, g)
    torch.compile(fn, backend="braze")(a2, b2, g)
    torch.testing.assert_close(a2, a)
    torch.testing.assert_close(b2, b)


def test_read_of_an_input_before_its_overwrite_runs_first(backend):
    """``step.add_(1)`` then a use of ``step``: the use reads ``step + 1`` computed from the
    old value, so its kernel must run before the one that overwrites ``step`` (it ran
    after, and applied the increment twice: Adam's bias corrections at the wrong step)."""
    def fn(step, x):
        step.add_(1)
        x.mul_(0.5 ** step)
    step, x = torch.tensor(float(torch.randint(0, 5, ()))), rand(37)
    step2, x2 = step.clone(), x.clone()
    fn(step, x)
    torch.compile(fn, backend="braze")(step2, x2)
    torch.testing.assert_close(step2, step)
    torch.testing.assert_close(x2, x)


def test_multi_tensor_optimizer_step(backend):
    """An SGD-with-momentum step over tensors of several sizes (one foreach kernel on cpp)."""
    shapes = [(100,), (37, 3), (1,), (5, 4, 3)]
    params, grads, state = ([rand(*s) for s in shapes] for _ in range(3))

    def step(params, grads, state):
        for p, g, m in zip(params, grads, state):
            m.mul_(0.9).add_(g, alpha=0.1)
            p.sub_(m * 0.01)
    expected_p, expected_m = [p.clone() for p in params], [m.clone() for m in state]
    step(expected_p, grads, expected_m)
    torch.compile(step, backend="braze")(params, grads, state)
    for a, b in zip(params + state, expected_p + expected_m):
        torch.testing.assert_close(a, b)
