"""Channels-last convolutions: the FX pass that chooses memory formats before lowering.

Takes: an ATen FX graph from AOTAutograd (fake values in ``node.meta["val"]``), the
number of leading outputs the user sees, and optionally the real arguments of a first
call. Gives: the same graph, changed in place when it has 4-D convolutions on a device
where ``config.channels_last_convs`` wants them channels-last: each convolution's
image and weight arguments (and ``convolution_backward``'s gradient, image and
weight) that are not channels-last are cloned into channels-last first, and the fake
values downstream of a clone (or of an argument with other strides) are recomputed,
in the graph's own fake mode, so the convolutions' outputs and the pointwise ops
after them (BatchNorm, ReLU, residual adds) carry channels-last strides the way eager
computes them; braze's kernels then store in that layout. cuDNN runs NHWC
convolutions without converting on each call (given NCHW tensors in bf16, it converts
each to NHWC and back, a sizeable share of a ResNet-50 step on a GPU).

Outputs the user sees keep eager's strides (the lowering reads them from
``output.meta["braze_layouts"]``). Outputs saved for the backward keep channels-last,
and ``repropagate`` gives the backward graph the strides its arguments really have.
"""
from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from braze import config

aten = torch.ops.aten
CONV_ARGS = {aten.convolution.default: (0, 1), aten.convolution_backward.default: (0, 1, 2)}


def wants_channels_last(gm: torch.fx.GraphModule) -> bool:
    """Does ``gm`` have a 4-D convolution on a device where channels-last is chosen?"""
    setting = config.channels_last_convs
    if setting == "off":
        return False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in CONV_ARGS:
            val = node.args[0].meta.get("val")
            if isinstance(val, torch.Tensor) and val.dim() == 4 and (setting == "on" or val.device.type == "cuda"):
                return True
    return False


def choose_layouts(gm: torch.fx.GraphModule, visible: int | None = None, args=None) -> bool:
    """Make ``gm``'s convolutions channels-last (when wanted) and recompute fake values,
    from ``args``' real strides when given. The first ``visible`` outputs (all when None)
    keep the strides they had, or those of ``output.meta["braze_eager"]`` where given
    (eager's, where the functional graph traced others: ``backend._keep_eager_strides``).
    Returns whether an output beyond them changed strides."""
    convs = wants_channels_last(gm)
    output = gm.graph.find_nodes(op="output")[0]
    eager = output.meta.get("braze_eager") or []  # eager's strides where the traced ones differ (backend.py)
    if not convs and args is None and not any(e is not None for e in eager):
        return False
    results = list(output.args[0]) if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    before = [_val(r) for r in results]
    if convs or args is not None:
        _propagate(gm, args, convs)
    visible = len(results) if visible is None else visible
    before[:len(eager)] = [e if e is not None else b for e, b in zip(eager, before)]
    output.meta["braze_layouts"] = [b if _restrided(b, _val(r)) else None
                                    for b, r in zip(before[:visible], results[:visible])]
    return any(_restrided(b, _val(r)) for b, r in zip(before[visible:], results[visible:]))


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _restrided(before, after) -> bool:
    return (isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor)
            and before.numel() > 1 and _strides(before) != _strides(after))


def _strides(t: torch.Tensor) -> tuple:
    return tuple(st for size, st in zip(t.shape, t.stride()) if size != 1)


def _propagate(gm: torch.fx.GraphModule, args, convs: bool) -> None:
    """Recompute fake values in order, inserting channels-last clones in front of convolution
    arguments that need them. Only nodes downstream of a change are recomputed (FakeTensor
    dispatch is costly per node, and this runs in a graph's first call): a placeholder
    whose real argument has other strides, a convolution given a clone, and whatever
    reads a value whose layout moved."""
    mode = _fake_mode(gm)
    changed = set()
    for node, arg in zip(gm.graph.find_nodes(op="placeholder"), args or ()):
        if isinstance(arg, torch.Tensor) and not _same(node.meta.get("val"), arg):
            node.meta["val"] = mode.from_tensor(arg, static_shapes=True)
            changed.add(node)
    with mode:
        for node in list(gm.graph.nodes):
            if node.op == "get_attr" and "val" not in node.meta:
                value = getattr(gm, node.target)
                node.meta["val"] = mode.from_tensor(value) if isinstance(value, torch.Tensor) else value
            if node.op != "call_function":
                continue
            cloned = convs and node.target in CONV_ARGS and _clone_arguments(gm, node)
            if cloned or any(n in changed for n in node.all_input_nodes):
                old, node.meta["val"] = node.meta.get("val"), _run(node)
                if not _same(old, node.meta["val"]):
                    changed.add(node)
    gm.recompile()


def _same(a, b) -> bool:
    """Whether two values (tensors, or tuples of them) have the same layout."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return (a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
                and a.device == b.device and a.storage_offset() == b.storage_offset())
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor) or type(a) is not type(b):
        return False
    return a == b if isinstance(a, (int, float, bool)) else True


def _fake_mode(gm) -> FakeTensorMode:
    for node in gm.graph.find_nodes(op="placeholder"):
        val = node.meta.get("val")
        if isinstance(val, torch._subclasses.FakeTensor):
            return val.fake_mode
    return FakeTensorMode(allow_non_fake_inputs=True)


def _run(node: torch.fx.Node):
    args = torch.fx.node.map_arg(node.args, _val)
    kwargs = torch.fx.node.map_arg(node.kwargs, _val)
    return node.target(*args, **kwargs)


def _clone_arguments(gm: torch.fx.GraphModule, conv: torch.fx.Node) -> bool:
    """Clone ``conv``'s 4-D arguments that are not channels-last; whether any was."""
    cloned = False
    for k in CONV_ARGS[conv.target]:
        arg = conv.args[k]
        val = _val(arg)
        if not isinstance(val, torch.Tensor) or val.dim() != 4 or val.is_contiguous(memory_format=torch.channels_last):
            continue
        with gm.graph.inserting_before(conv):
            clone = gm.graph.call_function(aten.clone.default, (arg,), {"memory_format": torch.channels_last})
        clone.meta["val"] = _run(clone)
        conv.update_arg(k, clone)
        cloned = True
    return cloned
