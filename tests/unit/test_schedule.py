"""Tier 1: the scheduler (``braze/fuse/schedule.py``) on graphs built by hand or lowered from
``make_fx`` traces, without code generation.

Groups come in an order that respects every dependency: producers first, a read of an
input's old value before the kernel that overwrites it, readers of a scatter's target
after the scatter; a cycle among such reads is an error. Candidate pairs (producer and
consumer, siblings reading one buffer) are tried best first by the bytes fusion saves and
each verdict is logged; ATen calls are never fused, a fusion that would close a cycle is
refused, and the ``fuse`` and ``fuse_horizontal`` knobs turn fusion off."""
import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from braze import config
from braze.codegen.cpp.policy import CppTarget
from braze.decompositions import table
from braze.fuse.inline import inline
from braze.fuse.schedule import FusionRecord, Reason, schedule
from braze.ir import dtypes
from braze.ir.expr import Op, binary, cast, const, load, scatter_store
from braze.ir.graph import BufferArg, ComputeNode, ExternNode, Graph, InputNode, Layout, out_vars
from braze.codegen import target_for
from braze.lower import graph_device, lower

F32 = torch.float32


def graph_of(*inputs):
    g = Graph(target=CppTarget())
    for k, (name, sizes) in enumerate(inputs):
        g.add(InputNode(name, F32, sizes, position=k, layout=Layout.contiguous(sizes)))
    return g


def stored(g, name, sizes, body, **kw):
    """A realized pointwise node whose body is a function of its output variables."""
    return g.add(ComputeNode(name, F32, tuple(sizes), body=body(*out_vars(sizes)), layout=Layout.contiguous(sizes),
                             **kw))


def ld(name, *indices):
    return load(name, list(indices), F32)


def plus(e, k):
    return binary(Op.ADD, e, const(float(k), F32))


def names(sched):
    return [[n.name for n in g.nodes] for g in sched.groups]


def assert_dependencies_respected(graph, sched):
    """Every buffer a group reads is produced by an earlier group or the same one."""
    produced_by = {}
    for k, group in enumerate(sched.groups):
        for node in group.nodes:
            produced_by[node.name] = k
            for out in getattr(node, "outputs", []) or []:
                if out is not None:
                    produced_by[out[0]] = k
    for k, group in enumerate(sched.groups):
        for node in group.nodes:
            for name in node.reads():
                assert produced_by.get(name, -1) <= k, (node.name, name)
    assert sorted(n for g in names(sched) for n in g) == \
        sorted(n.name for n in graph.nodes if isinstance(n, (ComputeNode, ExternNode)))


# ----------------------------------------------------------------------------- fusing

def test_a_chain_of_stored_elementwise_nodes_is_one_group():
    g = graph_of(("arg0", (8, 8)))
    stored(g, "buf0", (8, 8), lambda x0, x1: plus(ld("arg0", x0, x1), 1))
    stored(g, "buf1", (8, 8), lambda x0, x1: plus(ld("buf0", x0, x1), 2))
    stored(g, "buf2", (8, 8), lambda x0, x1: plus(ld("buf1", x0, x1), 3))
    sched = schedule(g)
    assert names(sched) == [["buf0", "buf1", "buf2"]]
    assert [(r.first, r.second, r.kind, r.fused, r.score) for r in sched.log] == [
        ("buf0", "buf1", "producer-consumer", True, 256), ("buf1", "buf2", "producer-consumer", True, 256)]


def test_candidates_are_tried_best_first():
    """A float64 edge saves more bytes than a float32 one and is logged first."""
    g = graph_of(("arg0", (8,)))
    stored(g, "buf0", (8,), lambda x0: plus(ld("arg0", x0), 1))
    g.add(ComputeNode("buf1", torch.float64, (8,), body=cast(ld("buf0", x0 := out_vars((8,))[0]), torch.float64),
                      layout=Layout.contiguous((8,))))
    g.add(ComputeNode("buf2", torch.float64, (8,), body=binary(Op.MUL, load("buf1", [x0], torch.float64),
                                                                const(2.0, torch.float64)),
                      layout=Layout.contiguous((8,))))
    sched = schedule(g)
    assert [r.score for r in sched.log] == [64, 32]
    assert [(r.first, r.second) for r in sched.log] == [("buf1", "buf2"), ("buf0", "buf1")]
    assert names(sched) == [["buf0", "buf1", "buf2"]]


def test_siblings_reading_one_buffer_fuse_unless_horizontal_fusion_is_off():
    g = graph_of(("arg0", (16,)))
    stored(g, "buf0", (16,), lambda x0: plus(ld("arg0", x0), 1))
    stored(g, "buf1", (16,), lambda x0: plus(ld("arg0", x0), 2))
    sched = schedule(g)
    assert names(sched) == [["buf0", "buf1"]]
    assert [(r.kind, r.fused) for r in sched.log] == [("siblings", True)]
    with config.patch(fuse_horizontal=False):
        sched = schedule(g)
    assert names(sched) == [["buf0"], ["buf1"]] and sched.log == []


def test_fusion_off_keeps_one_group_per_node_in_graph_order():
    g = graph_of(("arg0", (8,)))
    stored(g, "buf0", (8,), lambda x0: plus(ld("arg0", x0), 1))
    stored(g, "buf1", (8,), lambda x0: plus(ld("buf0", x0), 2))
    with config.patch(fuse=False):
        sched = schedule(g)
    assert names(sched) == [["buf0"], ["buf1"]] and sched.log == []


def test_an_aten_call_is_never_fused_and_a_fusion_around_it_would_close_a_cycle():
    """a -> mm -> b and a -> b: a and b fit one loop nest, but mm needs a before it and
    gives b its input, so a and b stay apart."""
    g = graph_of(("arg0", (8, 8)), ("arg1", (8, 8)))
    stored(g, "buf0", (8, 8), lambda x0, x1: plus(ld("arg0", x0, x1), 1))
    g.add(ExternNode("buf1", F32, (8, 8), target=torch.ops.aten.mm.default,
                     args=(BufferArg("buf0", (8, 8), (8, 1), 0, F32), BufferArg("arg1", (8, 8), (8, 1), 0, F32)),
                     outputs=[("buf1", F32, Layout.contiguous((8, 8)))]))
    stored(g, "buf2", (8, 8), lambda x0, x1: binary(Op.ADD, ld("buf0", x0, x1), ld("buf1", x0, x1)))
    sched = schedule(g)
    assert names(sched) == [["buf0"], ["buf1"], ["buf2"]]
    verdicts = {(r.first, r.second): r.reason for r in sched.log}
    assert verdicts[("buf0", "buf1")] is verdicts[("buf1", "buf2")] is Reason.EXTERN
    assert verdicts[("buf0", "buf2")] is Reason.CYCLE
    assert sched.groups[1].extern and not sched.groups[0].extern


def test_fusion_log_text():
    fused = FusionRecord("buf0", "buf1", 256, "producer-consumer", True, Reason.FUSED)
    refused = FusionRecord("buf0", "buf2", 128, "siblings", False, Reason.INDEX, "buf2 reads buf0")
    assert str(fused) == "buf0 + buf1 [producer-consumer, saves 256 bytes]: fused"
    assert str(refused) == ("buf0 + buf2 [siblings, saves 128 bytes]: not fused: "
                            "read at another index than it is written (buf2 reads buf0)")


# ----------------------------------------------------------------------------- order

def test_a_read_of_an_inputs_old_value_runs_before_its_overwrite():
    """``step.add_(1)`` then ``x *= 0.5 ** (step + 1)`` computed from the old ``step``: the
    reader is later in the graph, but its kernel runs first."""
    g = graph_of(("arg0", ()), ("arg1", (37,)))
    stored(g, "buf0", (), lambda: plus(ld("arg0"), 1), mutates="arg0")
    factor = binary(Op.POW, const(0.5, F32), plus(ld("arg0"), 1))
    stored(g, "buf1", (37,), lambda x0: binary(Op.MUL, ld("arg1", x0), factor), mutates="arg1")
    sched = schedule(g)
    assert names(sched) == [["buf1"], ["buf0"]]
    assert {r.reason for r in sched.log} == {Reason.DOMAIN}


def test_reads_of_a_scatter_target_keep_program_order():
    """A scatter writes its target in place (an input, once ``lower/in_place.py`` has removed
    the copy): a read after the scatter in the graph sees the scattered values, a read before
    it the old ones."""
    g = graph_of(("arg0", (16,)), ("arg1", (16,)))
    g.add(InputNode("idx", torch.int64, (16,), position=2, layout=Layout.contiguous((16,))))
    (x0,) = out_vars((16,))
    where_to = cast(load("idx", [x0], torch.int64), dtypes.INDEX)
    before = stored(g, "buf0", (16,), lambda x0: plus(ld("arg0", x0), 1))
    g.add(ComputeNode("buf1", F32, (16,), body=scatter_store(ld("arg1", x0), [where_to], True), mutates="arg0",
                      layout=Layout.contiguous((16,))))
    after = stored(g, "buf2", (16,), lambda x0: plus(ld("arg0", x0), 2))
    sched = schedule(g)
    order = {n: k for k, group in enumerate(names(sched)) for n in group}
    assert order["buf0"] < order["buf1"] < order["buf2"]
    assert before.reads() == after.reads() == ["arg0"]
    assert any(r.reason is Reason.SCATTER for r in sched.log)


def test_a_fusion_across_a_write_in_place_says_so():
    """A base computed, scattered into in place, then read: producer and reader would fuse
    but for the scatter, which must run between them. The log gives that its own reason and
    names the writer; the same pair kept apart by an ordinary kernel is a plain cycle."""
    g = graph_of(("arg0", (16,)), ("arg1", (4,)))
    g.add(InputNode("idx", torch.int64, (4,), position=2, layout=Layout.contiguous((4,))))
    (i0,) = out_vars((4,))
    stored(g, "buf0", (16,), lambda x0: plus(ld("arg0", x0), 1))
    where_to = cast(load("idx", [i0], torch.int64), dtypes.INDEX)
    g.add(ComputeNode("buf1", F32, (4,), body=scatter_store(ld("arg1", i0), [where_to], True), mutates="buf0",
                      layout=Layout.contiguous((4,))))
    stored(g, "buf2", (16,), lambda x0: plus(ld("buf0", x0), 2))
    (record,) = [r for r in schedule(g).log if {r.first, r.second} == {"buf0", "buf2"}]
    assert str(record) == ("buf0 + buf2 [producer-consumer, saves 64 bytes]: not fused: a write in place into "
                           "a buffer they share must run between them (buf1 writes buf0 in place)")
    assert record.reason is Reason.MUTATION


def test_a_cycle_of_reads_and_overwrites_is_an_error():
    """Each node overwrites the input the other reads: neither can run first."""
    g = graph_of(("arg0", (8,)), ("arg1", (8,)))
    stored(g, "buf0", (8,), lambda x0: ld("arg1", x0), mutates="arg0")
    stored(g, "buf1", (8,), lambda x0: ld("arg0", x0), mutates="arg1")
    with pytest.raises(RuntimeError, match="a cycle between reads of an input and its overwrite"):
        schedule(g)


@pytest.mark.parametrize("fn, shapes", [
    (lambda x: x.softmax(-1), [(8, 32)]),
    (lambda x, w, b: F.layer_norm(x, (64,), w, b).relu(), [(16, 64), (64,), (64,)]),
    (lambda x, w: (torch.mm(x.exp() * 2, w) + x.sum(1, keepdim=True)).sin(), [(8, 8), (8, 8)]),
    (lambda x: (x.sum(0), x.sum(1), x.t() + x), [(16, 16)]),
    (lambda x, i: (x[i].exp(), x.cumsum(0), x.index_add(0, i, x[:3])), [(4, 8), None]),
], ids=["softmax", "layer_norm", "mm_between", "transposes", "gather_scan_scatter"])
def test_every_schedule_respects_every_dependency(fn, shapes):
    args = [torch.randn(s) if s is not None else torch.tensor([2, 0, 3]) for s in shapes]
    gm = make_fx(fn, decomposition_table=table())(*args)
    graph, _ = lower(gm, target_for(graph_device(gm)))
    inline(graph)
    sched = schedule(graph)
    assert_dependencies_respected(graph, sched)
    for record in sched.log:
        assert record.fused == (record.reason is Reason.FUSED) or record.reason is Reason.SAME_KERNEL
