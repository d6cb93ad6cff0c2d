"""Errors eager raises, braze raises: out-of-range indices and integer division by zero.

Each case runs eagerly and through braze (C++ and Triton through the interpreter) on the same
inputs: the exception type must match eager's and the message name the index and the bound;
valid indices (negative ones included where eager wraps them) give eager's values. The knob
``runtime_checks`` turns the checks off (unsafe): then nothing is raised.
"""
import pytest
import torch
import torch.nn.functional as F

import braze
from helpers import Compiled

SIX = torch.randn(6)


def _gather(x, i):
    return torch.gather(x, 1, i)


def _index(x, i):
    return x[i] * 2


def _index_select(x, i):
    return torch.index_select(x, 0, i) + 1


def _embedding(x, i):
    return F.embedding(i, x)


def _scatter_add(x, i):
    return x.scatter_add(0, i, torch.ones(i.shape, device=x.device))


def _scatter_one_hot(x, i):
    return x.scatter(1, i, 1.0)


def _index_put_accumulate(x, i):
    return x.index_put((i,), torch.ones(i.shape[0], *x.shape[1:], device=x.device), accumulate=True)


def _index_put(x, i):
    return x.index_put((i,), torch.ones(i.shape[0], *x.shape[1:], device=x.device))


def _index_add(x, i):
    return x.index_add(0, i, torch.ones(i.shape[0], *x.shape[1:], device=x.device))


def _index_copy(x, i):
    return x.index_copy(0, i, torch.ones(i.shape[0], *x.shape[1:], device=x.device))


# (function, the tensor indexed, a bad index, the exception type eager raises, the index named)
OUT_OF_RANGE = [
    (_gather, (4, 5), [[7]] * 4, RuntimeError, 7),
    (_gather, (4, 5), [[-1]] * 4, RuntimeError, -1),  # gather takes no negative index
    (_index, (6,), [-7], IndexError, -7),
    (_index, (6,), [10 ** 9], IndexError, 10 ** 9),
    (_index, (6,), [2, 6], IndexError, 6),
    (_index_select, (4, 5), [9], IndexError, 9),
    (_index_select, (4, 5), [-1], IndexError, -1),
    (_embedding, (4, 5), [1, 9], IndexError, 9),
    (_scatter_add, (5,), [1, 7, 2], RuntimeError, 7),
    (_scatter_one_hot, (4, 5), [[1], [7], [2], [0]], RuntimeError, 7),
    (_index_put_accumulate, (5,), [7], IndexError, 7),
    (_index_put, (5, 3), [-6], IndexError, -6),
    (_index_add, (5, 2), [7], RuntimeError, 7),
    (_index_copy, (5, 2), [7], IndexError, 7),
]


def _ids(cases):
    return [f"{c[0].__name__[1:]}-{c[2]}"[:40] for c in cases]


def _raised(fn, *args):
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return exc
    return None


@pytest.fixture(autouse=True)
def _eager_raises_at_the_call(request):
    """Eager CUDA reports a bad index by a device assertion at a later synchronization (the
    ``test_on_cuda`` tests); the other tests compare with the exception eager raises at the
    call, as on the CPU: under ``-p cuda_default`` their tensors stay on the CPU."""
    if request.function.__name__.startswith("test_on_cuda"):
        yield
        return
    previous = torch.get_default_device()
    torch.set_default_device("cpu")
    yield
    torch.set_default_device(previous)


@pytest.mark.parametrize("fn, shape, bad, error, named", OUT_OF_RANGE, ids=_ids(OUT_OF_RANGE))
def test_an_index_out_of_range_raises_as_eager(backend, fn, shape, bad, error, named):
    x, index = torch.randn(shape), torch.tensor(bad)
    expected = _raised(fn, x.clone(), index)
    assert isinstance(expected, error), f"eager raised {expected!r}"
    with Compiled() as compiled:
        with pytest.raises(error) as caught:
            torch.compile(fn, backend="braze")(x.clone(), index)
    assert compiled.graphs, "braze compiled nothing"
    text = str(caught.value)
    assert f"index {named} is out of bounds" in text, text
    assert fn.__name__[1:].split("_")[0] in text and str(list(shape)) in text, text


VALID = [
    (_gather, (4, 5), [[0, 4], [3, 1], [2, 2], [4, 0]]),
    (_index, (6,), [-6, -1, 0, 5]),
    (_index_select, (4, 5), [3, 0, 3]),
    (_embedding, (4, 5), [[0, 3], [2, 1]]),
    (_scatter_add, (5,), [4, 0, 4, 2]),
    (_scatter_one_hot, (4, 5), [[1], [4], [2], [0]]),
    (_index_put_accumulate, (5, 3), [-1, 0, -1]),
    (_index_add, (5, 2), [4, 0, 4]),
    (_index_copy, (5, 2), [4, 0]),
]


@pytest.mark.parametrize("fn, shape, good", VALID, ids=_ids(VALID))
def test_valid_indices_give_eager_values(backend, fn, shape, good):
    x, index = torch.randn(shape), torch.tensor(good)
    expected = fn(x.clone(), index)
    with Compiled() as compiled:
        actual = torch.compile(fn, backend="braze")(x.clone(), index)
    assert compiled.kernels, "braze ran no kernel"
    torch.testing.assert_close(actual, expected)


def test_the_error_is_raised_on_every_call_and_a_good_call_after_it_works(backend):
    fn = torch.compile(_index, backend="braze")
    for _ in range(2):
        with pytest.raises(IndexError, match="index 6 is out of bounds"):
            fn(SIX, torch.tensor([1, 6]))
    torch.testing.assert_close(fn(SIX, torch.tensor([1, -6])), SIX[[1, -6]] * 2)


def test_the_first_bad_index_of_many_threads_is_reported(backend):
    """A large gather over many rows (parallel on the C++ backend): one bad index reported."""
    x = torch.randn(4096, 64)
    index = torch.randint(0, 64, (4096, 64))
    index[3000, 17] = 64
    with pytest.raises(RuntimeError, match="index 64 is out of bounds for dimension 1 with size 64"):
        torch.compile(_gather, backend="braze")(x, index)


def test_an_int32_index_out_of_range_raises(backend):
    with pytest.raises(IndexError, match="index 6 is out of bounds"):
        torch.compile(_index, backend="braze")(SIX, torch.tensor([6], dtype=torch.int32))


def test_a_huge_int64_index_does_not_wrap_into_range(backend):
    """2^32 + 1 would be 1 in 32-bit index arithmetic."""
    with pytest.raises(IndexError, match=f"index {2 ** 32 + 1} is out of bounds"):
        torch.compile(_index, backend="braze")(SIX, torch.tensor([2 ** 32 + 1]))


def _rows_by_position(m):
    return m[torch.arange(m.shape[0], device=m.device)].float() * 2  # an index computed from the position


OPERAND_ONLY_WHERE_TAKEN = {
    # CUDA's attention pads its mask so (GPT-2's generation): the padded lanes index past 17
    "pad": lambda m, a: F.pad(_rows_by_position(m), (0, 7)),
    "cat": lambda m, a: torch.cat([a, _rows_by_position(m)]),  # lanes before it index at -20..-1
    "slice_scatter": lambda m, a: torch.slice_scatter(a, _rows_by_position(m), 0, 2, 19),
    # rows past the diagonal's 3 elements index past m[:3]
    "diagonal_scatter": lambda m, a: torch.diagonal_scatter(a[:16].view(4, 4), _rows_by_position(m[:3]), 1),
    # the window's padding: positions past the input's rows
    "max_pool2d": lambda m, a: F.max_pool2d(_rows_by_position(m)[:16].view(1, 1, 4, 4), 3, stride=1, padding=1),
}


@pytest.mark.parametrize("name", OPERAND_ONLY_WHERE_TAKEN)
def test_an_operand_computed_only_where_eager_computes_it_raises_nothing(backend, name):
    """A pad's input, a cat's operand, a slice_scatter's or diagonal_scatter's source, a
    pooling window's inside: eager indexes them over their own elements; the checks of the
    lanes that take another branch must not fire."""
    fn, m, a = OPERAND_ONLY_WHERE_TAKEN[name], torch.randn(17), torch.randn(20)
    with Compiled() as compiled:
        actual = torch.compile(fn, backend="braze")(m, a)
    assert compiled.graphs and not compiled.failures
    assert torch.equal(actual, fn(m, a))


def test_a_bad_index_inside_a_pad_still_raises(backend):
    fn = lambda m: F.pad(m[torch.arange(m.shape[0], device=m.device) + 1] * 2, (0, 7))
    with pytest.raises(IndexError, match="index 17 is out of bounds"):
        fn(torch.randn(17))
    with pytest.raises(IndexError, match="index 17 is out of bounds"):
        torch.compile(fn, backend="braze")(torch.randn(17))


def test_a_bad_index_under_torch_where_raises_where_eager_does(backend):
    """``torch.where`` computes both branches everywhere in eager: its checks are not masked."""
    fn = lambda m: torch.where(torch.arange(18) < 17, m[torch.arange(18) % 18], 0.0)
    with pytest.raises(IndexError, match="index 17 is out of bounds"):
        fn(torch.randn(17))
    with pytest.raises(IndexError, match="index 17 is out of bounds"):
        torch.compile(fn, backend="braze")(torch.randn(17))


def test_the_backward_of_a_gather_with_bad_indices_raises_in_the_forward(backend):
    x = torch.randn(4, 5, requires_grad=True)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds"):
        torch.compile(_gather, backend="braze")(x, torch.tensor([[5]] * 4))


INTEGER_DIVISIONS = [
    ("floor_divide", lambda a, b: a // b),
    ("remainder", torch.remainder),
    ("fmod", torch.fmod),
    ("div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc")),
    ("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor")),
]


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8])
@pytest.mark.parametrize("name, fn", INTEGER_DIVISIONS, ids=[n for n, _ in INTEGER_DIVISIONS])
def test_integer_division_by_zero_raises_as_eager(backend, name, fn, dtype):
    a = torch.randint(-50, 50, (64,), dtype=dtype)
    b = torch.randint(1, 9, (64,), dtype=dtype)
    b[37] = 0
    expected = _raised(fn, a, b)
    assert isinstance(expected, RuntimeError) and "ZeroDivisionError" in str(expected)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.compile(fn, backend="braze")(a, b)
    b[37] = -3
    torch.testing.assert_close(torch.compile(fn, backend="braze")(a, b), fn(a, b), rtol=0, atol=0)


def test_integer_division_by_a_zero_scalar_raises(backend):
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.compile(lambda a: (a + 1) // 0, backend="braze")(torch.arange(5))


def test_float_division_by_zero_gives_inf_as_eager(backend):
    a, b = torch.randn(16), torch.zeros(16)
    fn = lambda a, b: (a // b, torch.remainder(a, b), a / b)  # noqa: E731
    for x, y in zip(torch.compile(fn, backend="braze")(a, b), fn(a, b)):
        torch.testing.assert_close(x, y, equal_nan=True)


def test_checks_off_is_unsafe_and_raises_nothing(backend):
    with braze.config.patch(runtime_checks=False):
        result = torch.compile(_index, backend="braze")(SIX, torch.tensor([6]))
        assert result.shape == (1,)
        assert torch.compile(lambda a, b: a // b, backend="braze")(torch.arange(3), torch.zeros(3, dtype=torch.long)) \
            .tolist() == [0, 0, 0]


def test_explain_shows_the_checks(backend):
    fn = lambda x, i: x[i]  # noqa: E731
    report = braze.explain(fn, SIX, torch.tensor([1]))
    ir_text = "\n".join(str(g.graph.to_text()) for g in report.graphs)
    assert "check_index(" in ir_text
    assert "check 0: index: index into dim 0 of [6], size 6 (raises IndexError)" in str(report)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
_DEVICE_ASSERT = """
import sys, torch, braze
sys.path[:0] = [{here!r}, {tests!r}]  # this module, and helpers.py
import test_index_and_divisor_checks as t
braze.config.strict = True  # a kernel that fails to launch raises BrazeError, not eager's assertion
fn, shape, bad = t.{fn}, {shape!r}, {bad!r}
x = torch.randn(shape, device="cuda")
out = torch.compile(fn, backend="braze")(x, torch.tensor(bad, device="cuda"))
torch.cuda.synchronize()
print("no error")
"""


@CUDA
@pytest.mark.parametrize("fn, shape, bad, error, named", OUT_OF_RANGE[::3], ids=_ids(OUT_OF_RANGE[::3]))
def test_on_cuda_an_index_out_of_range_fails_a_device_assertion(tmp_path, fn, shape, bad, error, named):
    """As eager's CUDA kernels do: the error surfaces at the next synchronization (a
    process of its own: a device assertion leaves the CUDA context unusable)."""
    import os
    import subprocess
    import sys
    script = tmp_path / "assert.py"
    here = os.path.dirname(os.path.abspath(__file__))
    script.write_text(_DEVICE_ASSERT.format(here=here, tests=os.path.dirname(here), fn=fn.__name__, shape=shape,
                                            bad=bad))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "no error" not in done.stdout
    assert "BrazeError" not in done.stderr, done.stderr[-2000:]
    assert "device-side assert" in done.stderr or "braze check" in done.stderr, done.stderr[-2000:]


@CUDA
@pytest.mark.parametrize("fn, shape, good", VALID, ids=_ids(VALID))
def test_on_cuda_valid_indices_give_eager_values(fn, shape, good):
    x, index = torch.randn(shape, device="cuda"), torch.tensor(good, device="cuda")
    expected = fn(x.clone(), index)
    with Compiled() as compiled:
        actual = torch.compile(fn, backend="braze")(x.clone(), index)
    assert compiled.kernels, "braze ran no kernel"
    torch.testing.assert_close(actual, expected)


@CUDA
def test_on_cuda_integer_division_by_zero_gives_eager_values_without_an_error():
    a = torch.randint(-50, 50, (64,), device="cuda")
    b = torch.randint(1, 9, (64,), device="cuda")
    fn = lambda a, b: (a // b, a % b)  # noqa: E731
    for x, y in zip(torch.compile(fn, backend="braze")(a, b), fn(a, b)):
        assert torch.equal(x, y)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_the_error_record_is_a_real_tensor_while_aot_autograd_traces(device):
    """The record is made while the graph compiles, under AOTAutograd's fake mode; a fake one
    has no data pointer and every checked kernel failed to launch on CUDA ("meta" stands in
    for a device here)."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    from braze.runtime.checks import Checks
    with FakeTensorMode():
        buffer = Checks([], torch.device(device)).buffer
    assert not isinstance(buffer, FakeTensor) and buffer.device.type == device
