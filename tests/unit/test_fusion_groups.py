"""Tier 1: inlining and fusion decisions on real ATen graphs, without code generation."""
import torch
from torch._decomp import decomposition_table  # noqa: F401  (keeps make_fx importable)
from torch.fx.experimental.proxy_tensor import make_fx

from braze.decompositions import table
from braze.fuse.inline import inline
from braze.fuse.schedule import Reason, schedule
from braze.codegen import target_for
from braze.lower import graph_device, lower


def groups_of(fn, *args):
    gm = make_fx(fn, decomposition_table=table())(*args)
    graph, fallbacks = lower(gm, target_for(graph_device(gm)))
    decisions = inline(graph)
    sched = schedule(graph)
    return graph, decisions, sched


def kernel_groups(sched):
    return [[n.name for n in g.nodes] for g in sched.groups if not g.extern]


def test_pointwise_chain_inlines_to_one_node():
    graph, decisions, sched = groups_of(lambda x: (x.sin() * 2).exp().relu(), torch.randn(8, 8))
    assert len(kernel_groups(sched)) == 1
    assert sum(d.stored for d in decisions) == 1


def test_softmax_reductions_and_epilogue_share_a_kernel():
    graph, decisions, sched = groups_of(lambda x: x.softmax(-1), torch.randn(8, 32))
    groups = kernel_groups(sched)
    assert len(groups) == 1 and len(groups[0]) == 3  # max, sum, division
    assert all(r.fused or r.reason is Reason.SAME_KERNEL for r in sched.log)


def test_expensive_buffer_read_twice_is_stored():
    def fn(x):
        y = x.exp().sin().cos().tanh().exp().sin().cos().tanh().exp().sin().cos().tanh()
        return y * 2, y + 1
    graph, decisions, sched = groups_of(fn, torch.randn(16))
    stored = [d for d in decisions if d.stored and "costly" in d.reason]
    assert stored, decisions
    assert len(kernel_groups(sched)) == 1  # stored, yet fused with both readers


def test_different_iteration_spaces_are_not_fused_and_say_why():
    graph, decisions, sched = groups_of(lambda x: (x.sum(0), x.sum(1)), torch.randn(8, 16))
    assert len(kernel_groups(sched)) == 2
    reasons = {r.reason for r in sched.log if not r.fused}
    assert Reason.DOMAIN in reasons


def test_sibling_reductions_fuse_horizontally():
    graph, decisions, sched = groups_of(lambda x: (x.sum(-1), x.amax(-1), x.var(-1)), torch.randn(8, 64))
    assert len(kernel_groups(sched)) == 1
    assert any(r.kind == "siblings" and r.fused for r in sched.log)


def test_transposed_read_is_not_fused_with_its_producer():
    def fn(x):
        y = x.exp().sin().cos().tanh().exp().sin().cos().tanh().exp().sin().cos()  # stored: read twice
        return y.t() + y
    graph, decisions, sched = groups_of(fn, torch.randn(16, 16))
    assert len(kernel_groups(sched)) == 2
    assert any(r.reason is Reason.INDEX for r in sched.log)


def test_no_cycle_when_an_intermediate_sits_between():
    # a -> mm -> b and a -> b directly: a and b must not fuse (the matmul sits between).
    def fn(x, w):
        a = x.exp() * 2
        b = torch.mm(a, w) + a.sum(1, keepdim=True)
        return b.sin()
    graph, decisions, sched = groups_of(fn, torch.randn(8, 8), torch.randn(8, 8))
    assert any(r.reason is Reason.CYCLE for r in sched.log)
    order = {n.name: k for k, g in enumerate(sched.groups) for n in g.nodes}
    for g in sched.groups:
        for n in g.nodes:
            for r in n.reads():
                if r in order:
                    assert order[r] <= order[n.name]


def test_layer_norm_backward_groups_are_few():
    x, w, b = torch.randn(16, 64), torch.randn(64), torch.randn(64)
    g = torch.randn(16, 64)

    def fn(x, w, b, g):
        out, mean, rstd = torch.ops.aten.native_layer_norm(x, [64], w, b, 1e-5)
        return torch.ops.aten.native_layer_norm_backward(g, x, [64], mean, rstd, w, b, [True, True, True])
    graph, decisions, sched = groups_of(fn, x, w, b, g)
    assert len(kernel_groups(sched)) <= 3
