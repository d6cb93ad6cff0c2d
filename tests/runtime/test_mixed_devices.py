"""Graphs that read or return tensors of two devices: a CUDA graph with CPU index tensors
(arguments, or constants such as ``torch.tensor([1, 3])``, which Dynamo keeps on the CPU),
CPU results beside CUDA ones, and 0-d CPU scalars written in place.

Eager accepts these: indexing a CUDA tensor with CPU indices, a 0-d CPU tensor in CUDA
arithmetic, and CPU-only work in the same function. braze computes the whole graph on its
device: the wrapper copies such inputs there (``InputNode.elsewhere``; 0-d scalars by a fill,
``host_scalar``), returns each output on eager's device, and copies a written input back.
The lowering is checked here with fake CUDA tensors; the GPU tests run on the GPU machine."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from braze.compiler import _host_traffic
from braze.ir.graph import InputNode
from braze.codegen import target_for
from braze.lower import graph_device, lower
from braze.runtime.wrapper import generate
from helpers import check

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def _lowered(fn, *specs):
    """``fn`` traced and lowered, on fake tensors of the given (sizes, dtype, device)."""
    with FakeTensorMode():
        args = [torch.zeros(sizes, dtype=dtype, device=device) for sizes, dtype, device in specs]
        gm = make_fx(fn)(*args)
    graph, _ = lower(gm, target_for(graph_device(gm)))
    return graph


_BUMP_ARGS = (((6,), torch.float32, "cuda"), ((), torch.float32, "cpu"), ((3,), torch.int64, "cpu"))


def _bump(x, s, idx):
    s.add_(1)
    return x[idx] * s, idx * 2


def _bump_functional(x, s, idx):
    """``_bump`` as AOTAutograd gives it to braze: the write to ``s`` a ``copy_`` at the end."""
    s1 = s + 1
    s.copy_(s1)
    return x * s1, idx * 2  # (fake CUDA tensors cannot be indexed or sliced without a GPU)


def test_cuda_graph_marks_inputs_and_outputs_of_the_cpu():
    graph = _lowered(_bump_functional, *_BUMP_ARGS)
    assert graph.device.type == "cuda"
    flags = [(n.name, n.host_scalar, n.elsewhere) for n in graph.nodes if isinstance(n, InputNode)]
    assert flags == [("arg0", False, False), ("arg1", True, False), ("arg2", False, True)]
    assert [spec.device for spec in graph.outputs[-2:]] == [None, torch.device("cpu")]


def test_wrapper_moves_inputs_in_and_results_back():
    graph = _lowered(_bump_functional, *_BUMP_ARGS)
    text = generate(graph, [])
    assert "arg1_given = arg1\n    arg1 = _host_scalar(arg1, torch.device('cuda:0'))" in text
    assert "arg2_given = arg2\n    arg2 = arg2.to(torch.device('cuda:0'))" in text
    assert "arg1_given.copy_(arg1)" in text  # the counter the graph wrote
    assert ".to(torch.device('cpu'))" in text  # idx * 2 stays a CPU tensor, as in eager


def test_cpu_graph_moves_nothing():
    graph = _lowered(lambda x, i: x[i] + 1, ((6,), torch.float32, "cpu"), ((3,), torch.int64, "cpu"))
    assert not any(getattr(n, "elsewhere", False) or getattr(n, "host_scalar", False) for n in graph.nodes)
    assert all(spec.device is None for spec in graph.outputs)
    assert _host_traffic(graph) == ""


def test_cuda_graph_names_its_host_traffic():
    """What keeps a graph out of CUDA graphs is known when it is compiled, before any capture."""
    assert _host_traffic(_lowered(_bump_functional, *_BUMP_ARGS)) == "a result is returned on the CPU"
    scalar_in = _lowered(lambda x, s: x * s, ((6,), torch.float32, "cuda"), ((), torch.float32, "cpu"))
    assert _host_traffic(scalar_in) == "an input is a CPU tensor"
    assert _host_traffic(_lowered(lambda x: x * 2, ((6,), torch.float32, "cuda"))) == ""


@needs_gpu
@pytest.mark.parametrize("name", ["constant index", "constant index_put", "cpu index argument",
                                  "cpu result", "cpu scalar result"])
def test_mixed_devices_on_gpu(name):
    x, v = torch.randn(6, 4, device="cuda"), torch.randn(6, 2, device="cuda")
    fn, args = {
        "constant index": (lambda x: x[:, torch.tensor([1, 3])] * 2, (x,)),
        "constant index_put": (lambda x, v: torch.ops.aten.index_put(x, [None, torch.tensor([1, 3])], v), (x, v)),
        "cpu index argument": (lambda x, i: x[i].sin(), (x, torch.tensor([0, 5, 2]))),
        "cpu result": (lambda x, c: (x.sin(), c * 2), (x, torch.randn(3))),
        "cpu scalar result": (lambda x, s: (x * s, s + 1), (x, torch.tensor(2.5))),
    }[name]
    check(fn, *args)


@needs_gpu
def test_cpu_scalar_written_in_place_on_gpu():
    x, s, idx = torch.randn(6, device="cuda"), torch.tensor(3.0), torch.tensor([4, 0, 2])
    s_eager = s.clone()
    check(lambda x, s, idx: _bump(x, s, idx), x, s, idx)  # check works on copies: run once more
    expected = _bump(x, s_eager, idx)
    torch._dynamo.reset()
    actual = torch.compile(_bump, backend="braze")(x, s, idx)
    assert s.device.type == "cpu" and s.item() == s_eager.item() == 4.0
    torch.testing.assert_close(actual[0], expected[0])


@needs_gpu
def test_constant_index_from_the_graph_cache_on_gpu(tmp_path):
    """A graph cache hit reads the constant from the new FX graph: copied to the GPU again."""
    import braze
    from braze.backend import Recording

    def fn(x):
        return x[:, torch.tensor([3, 0])].cos()
    x = torch.randn(5, 4, device="cuda")
    with braze.config.patch(graph_cache=True, cache_dir=str(tmp_path)):
        for hit in (False, True):
            torch._dynamo.reset()
            with Recording() as rec:
                out = torch.compile(fn, backend="braze")(x)
            assert [g.from_graph_cache for g in rec.graphs] == [hit]
            torch.testing.assert_close(out, fn(x))


@needs_gpu
def test_cudagraphs_refuse_a_graph_with_a_cpu_result_up_front():
    import warnings
    x, c = torch.randn(6, device="cuda"), torch.randn(3)
    f = torch.compile(lambda x, c: (x.sin(), c * 2), backend="braze", options={"cudagraphs": True})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = f(x, c)
    assert any("returned on the CPU" in str(w.message) for w in caught)
    assert out[1].device.type == "cpu"
    torch.testing.assert_close(out[0], x.sin())
    torch.testing.assert_close(out[1], c * 2)


# ----------------------------------------------------------------------------- 0-d CPU scalars

def test_cuda_graph_reads_a_cpu_scalar_as_eager_does():
    """A 0-d CPU tensor read by a CUDA graph: copied to the GPU by the wrapper (``host_scalar``),
    and a divisor of that kind multiplies by its reciprocal, as eager's CPU-scalar path does
    (checked against eager on the GPU machine by ``test_cuda_graph_with_a_cpu_scalar_runs_compiled``)."""
    with FakeTensorMode():
        gm = make_fx(lambda s, x: (x / s, x * s))(torch.empty((), device="cpu"), torch.empty(8, device="cuda"))
    graph, _ = lower(gm, target_for(graph_device(gm)))
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


@needs_gpu
def test_cuda_graph_with_a_cpu_scalar_runs_compiled():
    x, s = torch.randn(5000, device="cuda") * 100, torch.tensor(3.0)
    for fn in (lambda x, s: x / s, lambda x, s: x * s, lambda x, s: x + s,
               lambda x, s: torch.div(x, s, rounding_mode="trunc"), lambda x, s: torch.where(x > 0, x, s)):
        torch._dynamo.reset()
        check(fn, x, s, atol=0, rtol=0)
