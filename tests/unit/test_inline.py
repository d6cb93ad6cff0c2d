"""Tier 1: the inliner's decisions (``braze/fuse/inline.py``), without code generation.

On graphs built by hand or lowered from ``make_fx`` traces: reductions, graph outputs and
inputs of ATen calls are stored; a value read once is substituted into its reader (its
ATen ops merged into the reader's origins, a rounding that only storing would do
dropped); unused and dead nodes go; a value read by several readers is stored when
recomputing it costs more than ``inline_max_ops`` cheap ops on the graph's device, when
it is compared for equality, when it loads more than ``inline_max_loads`` buffers of its
size, or when its body passes ``inline_max_body``; and ``op_cost`` weighs each op by the target's costs.
(``e2e/test_inline_cost.py`` checks the same choices through ``braze.explain``.)"""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from braze import config
from braze.decompositions import table
from braze.codegen.cpp.policy import CppTarget
from braze.codegen.triton.policy import TritonTarget
from braze.fuse.inline import inline, op_cost
from braze.ir.expr import Op, binary, cast, const, load, unary, var, walk
from braze.ir.graph import (ComputeNode, Graph, InputNode, Layout, OutputSpec, ReduceOp, Reduction, out_vars,
                            reduce_vars)
from braze.codegen import target_for
from braze.lower import graph_device, lower

F32 = torch.float32
ROWS, COLS = 64, 48


def lowered(fn, *args):
    gm = make_fx(fn, decomposition_table=table())(*args)
    graph, _ = lower(gm, target_for(graph_device(gm)))
    return graph


def decided(graph) -> dict:
    return {d.node: (d.stored, d.reason) for d in inline(graph)}


def target_of(device: str):
    """The C++ target for "cpu"; for "cuda" the Triton target of an H100 (132 SMs)."""
    return CppTarget() if device == "cpu" else TritonTarget(device=torch.device(device), fill=2 * 132)


def hand_graph(body_of, device="cpu", readers=("row", "column"), **node):
    """arg0 [64, 48] -> buf0 = body_of(x) [64, 48] -> one reduction per reader ("row": sums
    along the rows, "column": along the columns, "pointwise": an output of the same size)."""
    g = Graph(device=torch.device(device), target=target_of(device))
    g.add(InputNode("arg0", F32, (ROWS, COLS), position=0, layout=Layout.contiguous((ROWS, COLS))))
    x0, x1 = out_vars((ROWS, COLS))
    g.add(ComputeNode("buf0", F32, (ROWS, COLS), body=body_of(load("arg0", [x0, x1], F32)), **node))
    for k, kind in enumerate(readers, 1):
        if kind == "pointwise":
            g.add(ComputeNode(f"buf{k}", F32, (ROWS, COLS), pinned="graph output",
                              body=binary(Op.ADD, load("buf0", [x0, x1], F32), const(float(k), F32))))
            continue
        sizes, reduced = ((ROWS,), (COLS,)) if kind == "row" else ((COLS,), (ROWS,))
        (o,), (r,) = out_vars(sizes), reduce_vars(reduced)
        index = [o, r] if kind == "row" else [r, o]
        g.add(ComputeNode(f"buf{k}", F32, sizes, body=load("buf0", index, F32),
                          reduction=Reduction(ReduceOp.SUM, reduced)))
    g.outputs = [OutputSpec("buffer", f"buf{k}") for k in range(1, len(readers) + 1)]
    return g


def costly(v):
    return binary(Op.MUL, unary(Op.ERF, v), const(0.5, F32))


def cheap(v):
    return binary(Op.ADD, binary(Op.MUL, v, const(2.0, F32)), const(1.0, F32))


# ----------------------------------------------------------------------------- op costs

def test_op_cost_depends_on_the_target_and_the_size():
    x = load("buf0", [var("x0", 64)], torch.float32)
    erf = binary(Op.MUL, unary(Op.ERF, x), const(0.5, torch.float32))
    cheap = binary(Op.ADD, binary(Op.MUL, x, const(2.0, torch.float32)), const(1.0, torch.float32))
    cpu, cuda = CppTarget(), TritonTarget()
    assert op_cost(erf, cpu, 64) > config.inline_max_ops >= op_cost(erf, cuda, 64) == 5
    assert op_cost(erf, cpu, 1) == 5  # one element: computed once per kernel, not per element
    assert op_cost(cheap, cpu, 64) == op_cost(cheap, cuda, 64) == 2
    costs = [op_cost(unary(op, x), cpu, 64) for op in (Op.LGAMMA, Op.TANH, Op.EXP, Op.SQRT, Op.NEG)]
    assert costs == sorted(costs, reverse=True) and costs[-1] == 1, costs


def test_large_libdevice_functions_are_costly_on_a_gpu():
    x = load("buf0", [var("x0", 64)], torch.float32)
    cuda = TritonTarget()
    for op in (Op.SIN, Op.COS, Op.TAN):
        assert op_cost(binary(Op.MUL, unary(op, x), const(1.0, torch.float32)), cuda, 64) > config.inline_max_ops
    assert op_cost(unary(Op.EXP, x), cuda, 64) == op_cost(unary(Op.ERF, x), cuda, 64) == 4


def test_op_cost_of_one_element_is_the_flat_count():
    x = load("buf0", [var("x0", 64)], F32)
    e = unary(Op.LGAMMA, binary(Op.ADD, x, const(1.0, F32)))
    assert op_cost(e, CppTarget(), 1) == 5 and op_cost(e, CppTarget(), 64) == 101


# ----------------------------------------------------------------------------- what is always stored

def test_reductions_outputs_and_inputs_of_aten_calls_are_stored():
    graph = lowered(lambda x, w: ((x.exp() @ w).sin(), x.sum(1)), torch.randn(4, 8), torch.randn(8, 8))
    decisions = decided(graph)
    assert decisions["buf0"] == (True, "read by an ATen call")
    assert sorted(reason for stored, reason in decisions.values() if stored) == \
        ["graph output", "read by an ATen call", "reduction"]
    stored = [n for n in graph.nodes if isinstance(n, ComputeNode)]
    assert all(n.layout is not None for n in stored)


def test_a_pinned_node_is_stored_for_its_reason():
    g = hand_graph(cheap, readers=("pointwise",), pinned="writes a graph input")
    assert decided(g)["buf0"] == (True, "writes a graph input")


# ----------------------------------------------------------------------------- read once

def test_a_value_read_once_is_substituted_with_its_origins():
    graph = lowered(lambda x: (x.sin() * 2).sum(1), torch.randn(4, 8))
    decisions = decided(graph)
    assert decisions == {"buf0": (False, "read once"), "buf1": (False, "read once"), "buf2": (True, "reduction")}
    (node,) = [n for n in graph.nodes if isinstance(n, ComputeNode)]
    assert str(node.body) == "(sin(arg0[x0, r0]) * 2.0)"
    assert node.origins == ["aten.sin.default", "aten.mul.Tensor", "aten.sum.dim_IntList"]
    assert graph.by_name.keys() == {"arg0", "buf2"}


def test_inlining_drops_a_rounding_only_storing_would_do():
    """A bf16 intermediate recomputed in its reader is not rounded to bf16 (braze rounds
    once, on store); the user's own cast to bf16 stays."""
    graph = lowered(lambda x: x.to(torch.bfloat16).sin().float() * 2, torch.randn(4, 8))
    inline(graph)
    (node,) = [n for n in graph.nodes if isinstance(n, ComputeNode)]
    assert str(node.body) == "(sin(f32(bf16(arg0[x0, x1]))) * 2.0)"
    assert [n.dtype for n in walk(node.body) if n.op is Op.CAST] == [torch.bfloat16, F32]


def test_reads_that_end_in_one_expression_compute_the_value_once_there():
    """``t`` read twice, both reads inside ``y``'s expression: inlined into ``y``, which two
    reductions read and which is stored."""
    def fn(x):
        t = torch.tanh(x * 0.5)
        y = (t + 1.0) * (1.0 - t * t)
        return y.sum(1), y.sum(0)
    graph = lowered(fn, torch.randn(ROWS, COLS, device="cpu"))
    decisions = decided(graph)
    tanh = next(n for n, (stored, _) in decisions.items() if not stored and n == "buf1")
    assert decisions[tanh] == (False, "read once")
    stored = [n for n, (s, reason) in decisions.items() if s and "costly" in reason]
    assert len(stored) == 1
    body = graph.producer(stored[0]).body
    assert sum(n.op is Op.TANH for n in walk(body)) == 1


# ----------------------------------------------------------------------------- read by several readers

def test_a_costly_value_read_by_two_kernels_is_stored_on_a_cpu():
    g = hand_graph(costly)
    stored, reason = decided(g)["buf0"]
    assert stored and reason.startswith("read 2 times, costly to recompute")
    assert [n.name for n in g.nodes] == ["arg0", "buf0", "buf1", "buf2"]


def test_the_same_value_is_recomputed_on_a_gpu():
    g = hand_graph(costly, device="cuda")
    assert decided(g)["buf0"] == (False, "read 2 times, cheap to recompute (5 ops)")
    assert [n.name for n in g.nodes] == ["arg0", "buf1", "buf2"]
    assert all(any(e.op is Op.ERF for e in walk(g.producer(name).body)) for name in ("buf1", "buf2"))


def test_a_cheap_value_read_by_two_kernels_is_recomputed():
    g = hand_graph(cheap)
    assert decided(g)["buf0"] == (False, "read 2 times, cheap to recompute (2 ops)")


def test_the_cost_limit_is_a_knob():
    with config.patch(inline_max_ops=1):
        assert decided(hand_graph(cheap))["buf0"] == (True, "read 2 times, costly to recompute (2 ops)")


def test_a_value_compared_for_equality_is_stored():
    """``amax``'s backward compares the input with the result: one value for every reader."""
    def fn(x):
        y = x.sin()
        return (y.amax(-1, keepdim=True) == y).float()
    graph = lowered(fn, torch.randn(ROWS, COLS))
    reasons = [reason for stored, reason in decided(graph).values() if stored]
    assert "read 2 times, compared for equality" in reasons


def test_a_reduction_compared_for_equality_leaves_its_input_inlined():
    """logsumexp compares its max with inf: the max is one stored value whatever its input's
    recomputation gives, so the input (an upcast, read by the max and the sum) is not
    stored: storing it cost a write and two reads of a float32 copy."""
    graph = lowered(lambda x: torch.logsumexp(x.float() * 2, -1), torch.randn(ROWS, COLS).bfloat16())
    stored = [reason for stored, reason in decided(graph).values() if stored]
    assert stored and all(reason in ("reduction", "graph output") for reason in stored), stored


def test_a_value_loading_many_buffers_of_its_size_is_stored():
    g = Graph(target=CppTarget())
    x0, x1 = out_vars((ROWS, COLS))
    for k in range(4):
        g.add(InputNode(f"arg{k}", F32, (ROWS, COLS), position=k, layout=Layout.contiguous((ROWS, COLS))))
    total = load("arg0", [x0, x1], F32)
    for k in range(1, 4):
        total = binary(Op.ADD, total, load(f"arg{k}", [x0, x1], F32))
    g.add(ComputeNode("buf0", F32, (ROWS, COLS), body=total))
    for k in (1, 2):
        g.add(ComputeNode(f"buf{k}", F32, (ROWS, COLS), pinned="graph output",
                          body=binary(Op.MUL, load("buf0", [x0, x1], F32), const(float(k), F32))))
    g.outputs = [OutputSpec("buffer", "buf1"), OutputSpec("buffer", "buf2")]
    assert decided(g)["buf0"] == (True, "read 2 times, loads 4 buffers of its size")


def test_an_expression_past_the_body_limit_is_stored_even_if_read_once():
    with config.patch(inline_max_body=1):
        assert decided(hand_graph(cheap, readers=("row",)))["buf0"] == \
            (True, "expression of 2 ops is too large to recompute")


# ----------------------------------------------------------------------------- dead nodes

def test_unused_and_dead_nodes_are_dropped():
    g = hand_graph(cheap, readers=("row", "column"))
    g.outputs = [OutputSpec("buffer", "buf1")]  # the column sums are computed for nobody
    decisions = decided(g)
    assert decisions["buf2"] == (False, "unused")
    assert decisions["buf0"][0] is False  # read by the row sums only: inlined there
    assert [n.name for n in g.nodes] == ["arg0", "buf1"]


def test_a_node_nobody_reads_is_unused():
    g = hand_graph(cheap, readers=())
    assert decided(g) == {"buf0": (False, "unused")}
    assert [n.name for n in g.nodes] == ["arg0"]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_one_element_buffer_is_recomputed_by_each_reader(device):
    """Adam's bias corrections: ``1 - 0.9 ** step``, costly per element but one element."""
    g = Graph(device=torch.device(device), target=target_of(device))
    g.add(InputNode("arg0", F32, (), position=0, layout=Layout((), ())))
    g.add(InputNode("arg1", F32, (64,), position=1, layout=Layout.contiguous((64,))))
    correction = binary(Op.SUB, const(1.0, F32), binary(Op.POW, const(0.9, F32), load("arg0", [], F32)))
    g.add(ComputeNode("buf0", F32, (), body=correction))
    (x0,) = out_vars((64,))
    for k in (1, 2):
        g.add(ComputeNode(f"buf{k}", F32, (64,), pinned="graph output",
                          body=binary(Op.TRUEDIV, load("arg1", [x0], F32), load("buf0", [], F32))))
    g.outputs = [OutputSpec("buffer", "buf1"), OutputSpec("buffer", "buf2")]
    assert decided(g)["buf0"] == (False, "read 2 times, cheap to recompute (5 ops)")  # a pow counts 4


def test_an_integer_cast_of_a_float_is_not_compared():
    """Only float values reaching ``==`` count as compared; integers are exact in any loop."""
    g = hand_graph(lambda v: cast(v, torch.int32), readers=())
    x0, x1 = out_vars((ROWS, COLS))
    same = binary(Op.EQ, load("buf0", [x0, x1], torch.int32), const(3, torch.int32))
    g.producer("buf0").dtype = torch.int32
    for k in (1, 2):
        g.add(ComputeNode(f"buf{k}", torch.bool, (ROWS, COLS), pinned="graph output", body=same))
    g.outputs = [OutputSpec("buffer", "buf1"), OutputSpec("buffer", "buf2")]
    assert decided(g)["buf0"] == (False, "read 2 times, cheap to recompute (1 ops)")
