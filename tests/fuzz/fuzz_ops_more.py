"""The fuzzer's normalization, scan and in-place-on-intermediates ops, and a few more
views (see ``fuzz_ops`` and ``fuzz_ops_shape`` for the rest).

Takes: a ``fuzz_generate.Builder``. Gives: ``MORE_OPS``, rule name -> rule, as in
``fuzz_ops``: ``layer_norm`` (over the last one or two dims, with or without weight
and bias), ``softmax_dtype`` (softmax / log_softmax of a low-precision value in
float32), ``cumulative`` (cumsum with an output dtype, logcumsumexp, cummax),
``in_place`` (an in-place op on an intermediate value, whole or through a view:
slice, select, transpose), ``more_views`` (narrow, movedim, flatten, unflatten),
``like`` (``full_like``/``zeros_like``, which keep their operand's strides),
``cat_many`` (three operands, one of them a slice).
"""
from __future__ import annotations

import torch

from fuzz_program import LOW_PRECISION, is_float


def _floating(v) -> bool:
    return is_float(v.dtype)


def _sized(v) -> bool:
    return v.ndim > 0 and all(s > 0 for s in v.shape)


def layer_norm(b):
    a = b.pick(lambda v: _floating(v) and _sized(v))
    if a is None:
        return None
    k = b.integer(1, min(2, a.ndim))
    shape = tuple(a.shape[a.ndim - k:])
    args = [a.name, repr(list(shape))]
    if b.coin():
        weight = b.data_input(shape, a.dtype)
        bias = b.data_input(shape, a.dtype) if b.coin() else None
        args += [weight.name, bias.name if bias else "None"]
    eps = b.choice(["1e-5", "1e-3"])
    return b.emit(f"F.layer_norm({', '.join(args)}, eps={eps})", False)


def softmax_dtype(b):
    a = b.pick(lambda v: v.dtype in LOW_PRECISION and v.ndim > 0)
    if a is None:
        return None
    fn = b.choice(["torch.softmax", "torch.log_softmax"])
    return b.emit(f"{fn}({a.name}, {b.dim(a)}, dtype=torch.float32)", False)


def cumulative(b):
    a = b.pick(lambda v: v.ndim > 0 and v.dtype is not torch.bool)
    if a is None:
        return None
    d = b.dim(a)
    kind = b.integer(0, 2)
    if kind == 0:
        dtype = b.choice([torch.float32, torch.int64] if not is_float(a.dtype) else [torch.float32, torch.float64])
        return b.emit(f"torch.cumsum({a.name}, {d}, dtype={dtype})", False)
    if kind == 1 and is_float(a.dtype):
        return b.emit(f"torch.logcumsumexp({a.name}, {d})", False)
    if not a.exact:  # an index of the running maximum: exact operands only
        return None
    part = b.choice(["values", "indices"])
    return b.emit(f"torch.{b.choice(['cummax', 'cummin'])}({a.name}, {d}).{part}", True)


def _target(b, a) -> str:
    """``a`` whole, or a view of it that the in-place op writes through."""
    kind = b.integer(0, 3) if _sized(a) else 0
    if kind == 1:
        d = b.integer(0, a.ndim - 1)
        start = b.integer(0, a.shape[d] - 1)
        return f"{a.name}[{', '.join([':'] * d + [f'{start}:'])}]"
    if kind == 2:
        d = b.dim(a)
        return f"{a.name}.select({d}, {b.integer(-a.shape[d], a.shape[d] - 1)})"
    if kind == 3 and a.ndim >= 2:
        return f"{a.name}.transpose(0, -1)"
    return a.name


def _overlapping(t) -> bool:
    """Do elements share memory (an expanded view)? torch drops an in-place write through
    such a view of an input (``aot_eager`` too): test_in_place_write_through_expanded_view."""
    return any(stride == 0 and size > 1 for stride, size in zip(t.stride(), t.shape))


def in_place(b):
    """An in-place op on an intermediate (not an input: ``fuzz_ops_shape.mutate_input``)."""
    a = b.pick(lambda v: not v.is_input and not _overlapping(b.env[v.name]))
    if a is None:
        return None
    target = _target(b, a)
    if a.dtype is torch.bool:
        options = [(f"{target}.logical_not_()", True), (f"{target}.fill_(True)", True)]
    elif is_float(a.dtype):
        lo, hi = sorted((b.choice([-2.0, -0.5, 0.0, 1.0]), b.choice([-1.0, 0.5, 2.0])))
        options = [(f"{target}.mul_(2)", True), (f"{target}.neg_()", True), (f"{target}.clamp_({lo}, {hi})", True),
                   (f"{target}.add_(1.5)", False), (f"{target}.fill_(0.25)", True), (f"{target}.exp_()", False)]
    else:
        options = [(f"{target}.mul_(3)", True), (f"{target}.add_(1)", True), (f"{target}.neg_()", True),
                   (f"{target}.fill_(2)", True)]
    other = b.pick(lambda v: v is not a and v.shape == a.shape)
    if other is not None and target == a.name:
        options.append((f"{target}.copy_({other.name})", other.exact or not is_float(other.dtype)))
        if a.dtype is not torch.bool and (is_float(a.dtype) or not is_float(other.dtype)):
            options.append((f"{target}.add_({other.name})", not is_float(a.dtype)))
    statement, exact = b.choice(options)
    if not b.mutate(a, statement, exact):
        return None
    return a


def more_views(b):
    a = b.pick(_sized)
    if a is None:
        return None
    kind = b.integer(0, 3)
    if kind == 0:
        d = b.dim(a)
        size = a.shape[d]
        start = b.integer(0, size - 1)
        return b.emit(f"{a.name}.narrow({d}, {start}, {b.integer(1, size - start)})", a.exact)
    if kind == 1 and a.ndim >= 2:
        return b.emit(f"torch.movedim({a.name}, {b.dim(a)}, {b.dim(a)})", a.exact)
    if kind == 2 and a.ndim >= 2:
        d = b.integer(0, a.ndim - 2)
        return b.emit(f"{a.name}.flatten({d}, {b.integer(d + 1, a.ndim - 1)})", a.exact)
    d = b.dim(a)
    size = a.shape[d]
    split = next((k for k in (2, 3, 4) if size % k == 0 and size > k), 1)
    return b.emit(f"{a.name}.unflatten({d}, ({split}, {size // split}))", a.exact)


def like(b):
    a = b.pick()
    if a is None:
        return None
    if a.dtype is torch.bool:
        return b.emit(f"torch.zeros_like({a.name}) | {a.name}", a.exact)
    fill = b.choice(["1.5", "-2"]) if is_float(a.dtype) else b.choice(["3", "-2"])
    if a.dtype is torch.uint8:
        fill = "3"
    return b.emit(f"torch.full_like({a.name}, {fill}) + {a.name}", False)


def cat_many(b):
    a = b.pick(_sized)
    if a is None:
        return None
    d = b.integer(0, a.ndim - 1)
    same = b.pick(lambda v: v.ndim == a.ndim and v.dtype == a.dtype
                  and all(x == y for k, (x, y) in enumerate(zip(v.shape, a.shape)) if k != d)) or a
    sliced = f"{a.name}[{', '.join([':'] * d + ['1:'])}]" if a.shape[d] > 1 else a.name
    return b.emit(f"torch.cat([{a.name}, {same.name}, {sliced}], {d - a.ndim if b.coin() else d})",
                  a.exact and same.exact)


MORE_OPS = {
    "layer_norm": layer_norm, "softmax_dtype": softmax_dtype, "cumulative": cumulative,
    "in_place": in_place, "more_views": more_views, "like": like, "cat_many": cat_many,
}
