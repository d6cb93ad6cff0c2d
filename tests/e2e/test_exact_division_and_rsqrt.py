"""Divisions, remainders and ``rsqrt`` bit for bit as eager computes them on each device.

On the CPU eager divides; on CUDA it multiplies by ``1 / b`` rounded once (its CPU-scalar
path) and calls CUDA's own ``rsqrt``. braze lowers each as the graph's device computes it:
the lowering is checked with fake CUDA tensors here, the values on the CPU through each
code generator and on the GPU machine with ``-p cuda_default``. Signs of zeros included."""
import pytest
import torch

from helpers import check


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


@pytest.mark.slow
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
    from braze.codegen import target_for
    from braze.lower import graph_device, lower
    bodies = {}
    for device in ("cuda", "cpu"):
        with FakeTensorMode():
            gm = make_fx(lambda x: (x / 3, torch.div(x, 3.0, rounding_mode="trunc")))(torch.empty(8, device=device))
        graph, _ = lower(gm, target_for(graph_device(gm)))
        bodies[device] = [str(node.body) for node in graph.nodes if hasattr(node, "body")]
    third = (torch.tensor(1.0) / torch.tensor(3.0)).item()
    assert bodies["cuda"] == [f"mul_rn(arg0[x0], {third!r})", f"trunc(mul_rn(arg0[x0], {third!r}))"]
    assert bodies["cpu"] == ["(arg0[x0] / 3.0)", "truncdiv(arg0[x0], 3.0)"]


def test_cuda_rsqrt_is_cudas_own():
    """``rsqrt`` and ``x ** -0.5`` on CUDA: CUDA's ``rsqrt`` function (libdevice's, what eager's
    kernels call; on the H100 equal to eager for every float32, ``.device/divexhaust.py``);
    on the CPU ``1 / sqrt``, as eager computes it there. Lowering checked with fake tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from braze.codegen import target_for
    from braze.lower import graph_device, lower
    for device, name in (("cuda", "cuda_rsqrt"), ("cpu", "rsqrt")):
        with FakeTensorMode():
            gm = make_fx(lambda x: (torch.rsqrt(x), x ** -0.5))(torch.empty(8, device=device))
        graph, _ = lower(gm, target_for(graph_device(gm)))
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
