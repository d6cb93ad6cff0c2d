"""Tier 1: buffers and graphs of the loop IR (``braze/ir/graph.py``), built by hand.

Layouts (contiguous strides, storage extent, positions, the index stored at a position,
density), the node kinds and what each reads (a scatter also reads its target), the
buffers of ATen calls, output and reduction variables, and the graph's text form."""
import torch

from braze.ir import simplify as S
from braze.ir.expr import Op, binary, const, index, load, scan, scatter_store, unary
from braze.ir.graph import (BufferArg, ComputeNode, ExternNode, Graph, InputNode, Layout, OutputSpec, ReduceOp,
                            Reduction, is_load_of, node_text, out_vars, reduce_vars, var)

F32 = torch.float32


def test_layouts():
    lay = Layout.contiguous((2, 3, 4))
    assert lay.strides == (12, 4, 1) and lay.is_dense() and lay.storage_numel() == 24
    assert not Layout((2, 3), (4, 1)).is_dense()
    assert Layout((3, 2), (1, 3)).is_dense()
    i, j = var("i", 3), var("j", 2)
    assert lay.position([i, j, 0]) is S.add(S.mul(i, 12), S.mul(j, 4))


def test_storage_extent_counts_offset_gaps_and_empty_tensors():
    assert Layout((2, 3), (4, 1), 5).storage_numel() == 5 + 1 + 4 + 2
    assert Layout((3, 0), (1, 1)).storage_numel() == 0 and Layout((3, 0), (1, 1)).numel == 0
    assert Layout((), ()).storage_numel() == 1 and Layout((), ()).numel == 1
    assert Layout((4, 5), (0, 1)).storage_numel() == 5  # broadcast: stride 0
    assert Layout.contiguous((2, 0, 3)).strides == (3, 3, 1)


def test_density_ignores_dimensions_of_one_and_refuses_overlap():
    assert Layout((4, 1, 5), (5, 99, 1)).is_dense()
    assert Layout((2, 3, 4), (1, 8, 2)).is_dense()  # a permutation of contiguous
    assert not Layout((4, 5), (0, 1)).is_dense()  # broadcast
    assert not Layout((4, 5), (5, 2)).is_dense()  # every other element
    assert not Layout((4, 5), (4, 1)).is_dense()  # rows overlap


def test_indices_at_a_position_of_a_dense_layout():
    lay = Layout((3, 4), (1, 3))  # column-major
    p = var("p", 12)
    rows, cols = lay.indices_at(p)
    assert rows is S.mod(p, 3) and cols is S.floordiv(p, 3)
    i, j = var("i", 3), var("j", 4)
    assert lay.indices_at(lay.position([i, j])) == [i, j]
    assert Layout((3, 1), (1, 1)).indices_at(p)[1] is index(0)


def test_output_and_reduction_variables_are_named_and_shared():
    assert [str(v) for v in out_vars((4, 8))] == ["x0", "x1"]
    assert [str(v) for v in reduce_vars((16,))] == ["r0"]
    assert out_vars((4, 1, 8))[1] is index(0)  # extent 1: the constant 0
    assert out_vars((4, 8)) is out_vars([4, 8])  # cached: one tuple per sizes
    assert out_vars((4, 8))[0] is var("x0", 4)


def _graph():
    """An input, a row sum, a scatter-add into the sum, a cumulative sum and a matrix product."""
    g = Graph()
    g.add(InputNode("arg0", F32, (4, 8), position=0, layout=Layout.contiguous((4, 8))))
    x0, x1 = out_vars((4, 8))
    (r0,) = reduce_vars((8,))
    g.add(ComputeNode("buf0", F32, (4,), body=load("arg0", [x0, r0], F32), reduction=Reduction(ReduceOp.SUM, (8,)),
                      layout=Layout.contiguous((4,))))
    value = binary(Op.ADD, load("arg0", [x0, x1], F32), load("arg0", [x0, x1], F32))
    g.add(ComputeNode("buf1", F32, (4, 8), body=scatter_store(value, [x0, S.mod(S.add(x1, 1), 8)], True),
                      mutates="buf0"))
    g.add(ComputeNode("buf2", F32, (4, 8), body=scan(unary(Op.EXP, load("buf1", [x0, x1], F32)), "sum", 1)))
    g.add(ExternNode("buf3", F32, (4, 4), target=torch.ops.aten.mm.default,
                     args=(BufferArg("buf2", (4, 8), (8, 1), 0, F32), BufferArg("arg0", (8, 4), (1, 8), 3, F32)),
                     outputs=[("buf3", F32, Layout.contiguous((4, 4)))]))
    g.outputs = [OutputSpec("buffer", "buf3"), OutputSpec("view", "buf2", (8,), (1,), 8), OutputSpec("value", value=3)]
    return g


def test_graph_text_shows_every_kind_of_node_and_output():
    assert _graph().to_text().splitlines() == [
        "arg0: f32[4, 8] = input 0 strides [8, 1]",
        "buf0: f32[4] stored strides [1] (written in place by buf1) = sum over r[8] of arg0[x0, r0]",
        "buf1: f32[4, 8] scatter, writes buf0 in place: buf0[x0, ((x1 + 1) % 8)] += (arg0[x0, x1] + arg0[x0, x1])",
        "buf2: f32[4, 8] = cumulative sum along dim 1 of exp(buf1[x0, x1])",
        "buf3 = extern aten.mm.default(buf2, arg0@3)",
        "return (buf3, view(buf2, [8], [1], 8), 3)",
    ]


def test_a_body_with_shared_parts_prints_on_several_lines():
    x0 = out_vars((4,))[0]
    e = unary(Op.EXP, load("arg0", [x0], F32))
    node = ComputeNode("buf0", F32, (4,), body=binary(Op.MUL, e, e), mutates="arg0")
    assert node_text(node).splitlines() == ["buf0: f32[4] writes arg0 in place: arg0[x0] =", "    t0 = exp(arg0[x0])",
                                            "    value = (t0 * t0)"]


def test_writes_in_place_name_their_buffer_and_the_input_it_is():
    """A node writing into an existing buffer says which, and whether it is a graph input
    (an update of ``arg1``, a row sum into it); the buffer's own line names its writers."""
    g = _graph()
    g.add(InputNode("arg1", F32, (4,), position=1, layout=Layout.contiguous((4,))))
    x0, x1 = out_vars((4, 8))
    (r0,) = reduce_vars((8,))
    g.add(ComputeNode("buf4", F32, (4,), body=unary(Op.EXP, load("arg1", [x0], F32)), mutates="arg1",
                      layout=Layout.contiguous((4,))))
    g.add(ComputeNode("buf5", F32, (4,), body=load("arg0", [x0, r0], F32), reduction=Reduction(ReduceOp.SUM, (8,)),
                      mutates="arg1"))
    lines = g.to_text().splitlines()
    assert "arg1: f32[4] = input 1 strides [1] (written in place by buf4, buf5)" in lines
    assert "buf4: f32[4] writes arg1 (input 1) in place: arg1[x0] = exp(arg1[x0])" in lines
    assert "buf5: f32[4] writes arg1 (input 1) in place: arg1[x0] = sum over r[8] of arg0[x0, r0]" in lines
    assert "arg0: f32[4, 8] = input 0 strides [8, 1]" in lines  # read only
    assert [(n.name, target, position) for n, target, position in g.in_place_writes()] == [
        ("buf1", "buf0", None), ("buf4", "arg1", 1), ("buf5", "arg1", 1)]


def test_what_each_node_reads():
    g = _graph()
    sum_, scatter, cumsum, mm = (g.producer(name) for name in ("buf0", "buf1", "buf2", "buf3"))
    assert sum_.reads() == ["arg0"] and sum_.is_reduction and not sum_.is_scatter
    assert scatter.reads() == ["arg0", "buf0"]  # each buffer once; the target it adds into
    assert scatter.is_scatter and scatter.accumulates and scatter.target == "buf0"
    assert cumsum.is_scan and cumsum.reads() == ["buf1"] and cumsum.target == "buf2"
    assert mm.reads() == ["buf2", "arg0"]
    assert g.producer("arg0").reads() == []


def test_graph_finds_buffers_of_aten_calls():
    g = _graph()
    assert g.producer("buf3").target is torch.ops.aten.mm.default
    assert g.dtype_of("buf3") is F32 and g.dtype_of("buf0") is F32
    assert g.layout_of("buf3") == Layout.contiguous((4, 4)) and g.layout_of("buf2") is None
    two = ExternNode("buf9", F32, (2,), target=torch.ops.aten.var_mean.correction, single=False,
                     outputs=[("buf9", F32, Layout.contiguous((2,))), None, ("buf10", torch.int64, Layout((), ()))])
    g.add(two)
    assert g.producer("buf10") is two and g.dtype_of("buf10") is torch.int64 and g.layout_of("buf10").numel == 1


def test_reduction_and_node_sizes():
    node = ComputeNode("buf0", F32, (4, 3), body=const(1.0, F32), reduction=Reduction(ReduceOp.MAX, (5, 2)))
    assert node.numel == 12 and node.reduction.numel == 10 and node.is_reduction
    assert not ComputeNode("buf1", F32, (2,), body=const(1.0, F32)).is_reduction


def test_is_load_of():
    x0 = var("x0", 4)
    assert is_load_of(load("buf0", [x0], F32), "buf0")
    assert not is_load_of(load("buf0", [x0], F32), "buf1")
    assert not is_load_of(unary(Op.EXP, load("buf0", [x0], F32)), "buf0")
