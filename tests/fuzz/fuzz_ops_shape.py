"""The fuzzer's view, shape, indexing and in-place ops (see ``fuzz_ops`` for the rest).

Takes: a ``fuzz_generate.Builder``. Gives: ``SHAPE_OPS``, rule name -> rule, as in
``fuzz_ops``. Index tensors are new inputs whose values are in range by construction
(``aten.index`` also gets negative indices, which wrap like Python's); scatter-like
ops (``index_put`` without accumulation) get indices without repetition, since
eager's result with repeated ones is unspecified.
"""
from __future__ import annotations

import torch

from fuzz_program import is_float


def _sized(v) -> bool:
    return v.ndim > 0 and all(s > 0 for s in v.shape)


def _slice_text(b, size: int) -> str:
    start = b.integer(-size, size - 1)
    stop = b.choice(["", str(b.integer(-size, size))])
    step = b.choice(["", ":2", ":3"])
    return f"{start}:{stop}{step}"


def slicing(b):
    a = b.pick(_sized)
    if a is None:
        return None
    d = b.integer(0, a.ndim - 1)
    text = ", ".join([":"] * d + [_slice_text(b, a.shape[d])])
    if b.coin() and d > 0:
        text = "..., " + _slice_text(b, a.shape[-1]) if b.coin() else text
    return b.emit(f"{a.name}[{text}]", a.exact)


def select(b):
    a = b.pick(_sized)
    if a is None:
        return None
    d = b.dim(a)
    return b.emit(f"{a.name}.select({d}, {b.integer(-a.shape[d], a.shape[d] - 1)})", a.exact)


def transpose(b):
    a = b.pick(lambda v: v.ndim >= 2)
    if a is None:
        return None
    kind = b.integer(0, 2)
    if kind == 0:
        return b.emit(f"{a.name}.transpose({b.dim(a)}, {b.dim(a)})", a.exact)
    if kind == 1:
        return b.emit(f"{a.name}.mT", a.exact)
    perm = list(range(a.ndim))
    for k in range(a.ndim - 1, 0, -1):
        j = b.integer(0, k)
        perm[k], perm[j] = perm[j], perm[k]
    return b.emit(f"{a.name}.permute({', '.join(map(str, perm))})", a.exact)


def unsqueeze_squeeze(b):
    a = b.pick()
    if a is None:
        return None
    ones = [d for d, s in enumerate(a.shape) if s == 1]
    if ones and b.coin():
        return b.emit(f"{a.name}.squeeze({b.choice(ones)})", a.exact)
    return b.emit(f"{a.name}.unsqueeze({b.integer(-a.ndim - 1, a.ndim)})", a.exact)


def expand(b):
    a = b.pick()
    if a is None:
        return None
    shape = [b.choice([2, 3, 5]) if s == 1 and b.coin() else s for s in a.shape]
    if b.coin() or shape == list(a.shape):
        shape.insert(0, b.choice([2, 3]))
    return b.emit(f"{a.name}.expand({', '.join(map(str, shape))})", a.exact)


def _factor(n: int, b) -> tuple:
    divisors = [d for d in range(2, n) if n % d == 0]
    if not divisors:
        return (n, 1) if b.coin() else (1, n)
    d = b.choice(divisors)
    return d, n // d


def reshape(b):
    a = b.pick()
    if a is None:
        return None
    kind = b.integer(0, 3)
    if kind == 0 or a.ndim == 0:
        shape = [-1]
    elif kind == 1 and a.ndim >= 2:  # merge two neighbours
        d = b.integer(0, a.ndim - 2)
        shape = list(a.shape[:d]) + [a.shape[d] * a.shape[d + 1]] + list(a.shape[d + 2:])
    else:  # split one dim
        d = b.integer(0, a.ndim - 1)
        shape = list(a.shape[:d]) + list(_factor(a.shape[d], b)) + list(a.shape[d + 1:])
    method = b.choice(["reshape", "view"] if kind == 3 else ["reshape"])
    if method == "view":
        return b.emit(f"{a.name}.contiguous().view({', '.join(map(str, shape))})", a.exact)
    return b.emit(f"{a.name}.reshape({', '.join(map(str, shape))})", a.exact)


def small_views(b):
    a = b.pick(_sized)
    if a is None:
        return None
    d = b.dim(a)
    kind = b.integer(0, 5)
    if kind == 0:
        return b.emit(f"{a.name}.flip({d})", a.exact)
    if kind == 1:
        return b.emit(f"{a.name}.roll({b.integer(-3, 3)}, {d})", a.exact)
    if kind == 2 and a.ndim >= 2:
        return b.emit(f"{a.name}.{b.choice(['tril', 'triu'])}({b.integer(-1, 1)})", a.exact)
    if kind == 3 and a.ndim >= 2:
        return b.emit(f"torch.diagonal({a.name}, {b.integer(-1, 1)}, 0, -1)", a.exact)
    if kind == 4 and not b.program.grad:  # (torch: test_gradient_of_overlapping_view_output)
        size = b.integer(1, a.shape[d])
        return b.emit(f"{a.name}.unfold({d}, {size}, {b.integer(1, 2)})", a.exact)
    return b.emit(f"{a.name}.contiguous()", a.exact)


def concatenate(b):
    a = b.pick()
    if a is None:
        return None
    if b.coin() or a.ndim == 0:
        other = b.pick(lambda v: v.shape == a.shape) or a
        return b.emit(f"torch.stack([{a.name}, {other.name}], {b.integer(-a.ndim - 1, a.ndim)})",
                      a.exact and other.exact)
    d = b.integer(0, a.ndim - 1)
    other = b.pick(lambda v: v.ndim == a.ndim and all(x == y for k, (x, y) in enumerate(zip(v.shape, a.shape))
                                                     if k != d)) or a
    return b.emit(f"torch.cat([{a.name}, {other.name}], {d})", a.exact and other.exact)


def pad_repeat(b):
    a = b.pick(_sized)
    if a is None:
        return None
    if b.coin():
        reps = [b.choice([1, 1, 2, 3]) for _ in range(a.ndim)]
        return b.emit(f"{a.name}.repeat({', '.join(map(str, reps))})", a.exact)
    left, right = b.integer(-1, 2), b.integer(-1, 2)
    if a.shape[-1] + left + right < 1:
        return None
    value = "0" if a.dtype is torch.bool else b.choice(["0", "1", "-2"] if not is_float(a.dtype) else ["0", "1.5"])
    if a.dtype is torch.uint8:
        value = "0"
    return b.emit(f"F.pad({a.name}, ({left}, {right}), value={value})", a.exact)


# ---------------------------------------------------------------- indexing

def index_select(b):
    a = b.pick(_sized)
    if a is None:
        return None
    d = b.dim(a)
    idx = b.index_input((b.integer(1, 6),), a.shape[d])
    return b.emit(f"{a.name}.index_select({d}, {idx})", a.exact)


def advanced_index(b):
    a = b.pick(_sized)
    if a is None:
        return None
    dtype = b.choice([torch.int64, torch.int32])
    shape = (b.integer(1, 5),) if b.coin() else (b.integer(1, 3), b.integer(1, 3))
    if a.ndim >= 2 and b.coin():
        if b.coin():
            other = b.index_input(shape, a.shape[1], negative=True, dtype=dtype)
            idx = b.index_input(shape, a.shape[0], negative=True, dtype=dtype)
            return b.emit(f"{a.name}[{idx}, {other}]", a.exact)
        idx = b.index_input(shape, a.shape[1], negative=True, dtype=dtype)
        return b.emit(f"{a.name}[:, {idx}]", a.exact)
    idx = b.index_input(shape, a.shape[0], negative=True, dtype=dtype)
    return b.emit(f"{a.name}[{idx}]", a.exact)


def gather(b):
    a = b.pick(_sized)
    if a is None:
        return None
    d = b.dim(a)
    shape = tuple(b.integer(1, s) if b.coin() else s for s in a.shape)
    shape = shape[:d % a.ndim] + (b.integer(1, 6),) + shape[d % a.ndim + 1:]
    idx = b.index_input(shape, a.shape[d])
    return b.emit(f"torch.gather({a.name}, {d}, {idx})", a.exact)


def masked_fill(b):
    a = b.pick()
    if a is None:
        return None
    mask = b.pick(lambda v: v.dtype is torch.bool and _broadcasts_to(v.shape, a.shape))
    if mask is None:
        from fuzz_generate import broadcast_shape
        mask = b.data_input(broadcast_shape(b, a.shape), torch.bool)
    from fuzz_ops import scalar_for
    value = scalar_for(b, a.dtype) if a.dtype is not torch.uint8 else "7"
    if not is_float(a.dtype) and "." in value:
        value = "3" if a.dtype is not torch.bool else "True"
    return b.emit(f"{a.name}.masked_fill({mask.name}, {value})", a.exact)


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    try:
        return tuple(torch.broadcast_shapes(shape, target)) == tuple(target)
    except RuntimeError:
        return False


def embedding(b):
    a = b.pick(lambda v: v.ndim == 2 and is_float(v.dtype) and v.shape[0] > 0)
    if a is None:
        return None
    idx = b.index_input((b.integer(1, 4), b.integer(1, 5)), a.shape[0])
    return b.emit(f"F.embedding({idx}, {a.name})", a.exact)


def index_add(b):
    a = b.pick(lambda v: _sized(v) and v.dtype is not torch.bool)
    if a is None:
        return None
    d = b.integer(0, a.ndim - 1)
    count = b.integer(1, 6)
    source = b.data_input(a.shape[:d] + (count,) + a.shape[d + 1:], a.dtype)
    idx = b.index_input((count,), a.shape[d])
    return b.emit(f"{a.name}.index_add({d}, {idx}, {source.name})", False)


def index_put(b):
    a = b.pick(_sized)
    if a is None:
        return None
    accumulate = a.dtype is not torch.bool and b.coin()
    count = b.integer(1, 6) if accumulate else b.integer(1, a.shape[0])
    values = b.data_input((count,) + a.shape[1:] if b.coin() else a.shape[1:], a.dtype)
    idx = b.index_input((count,), a.shape[0], unique=not accumulate)
    return b.emit(f"{a.name}.index_put(({idx},), {values.name}, accumulate={accumulate})",
                  a.exact and values.exact and not (accumulate and is_float(a.dtype)))


# torch 2.13's AOTAutograd drops an in-place change to a 0-d float64 graph input
# (aot_eager too; fixed in 2.14): tests/e2e/test_fuzz_regressions.py keeps the repro.
_ZERO_DIM_FLOAT64_MUTATION_BROKEN = torch.__version__ < "2.14"


def mutate_input(b):
    """An in-place op on an input (a graph input mutation)."""
    if b.program.grad:  # an in-place op on a leaf that requires grad is an error in eager
        return None

    def writable(v):
        if _ZERO_DIM_FLOAT64_MUTATION_BROKEN and v.ndim == 0 and v.dtype is torch.float64:
            return False
        return v.is_input and b.program.inputs[int(v.name[1:])].layout != "expanded"
    a = b.pick(writable)
    if a is None:
        return None
    if a.dtype is torch.bool:
        statement, keeps = f"{a.name}.logical_not_()", True
    else:
        statement, keeps = b.choice([(f"{a.name}.mul_(2)", True), (f"{a.name}.add_(1)", not is_float(a.dtype)),
                                     (f"{a.name}.neg_()", True), (f"{a.name}.clamp_(0, 5)", True)])
    return a if b.mutate(a, statement, keeps) else None


SHAPE_OPS = {
    "slice": slicing, "select": select, "transpose": transpose, "unsqueeze_squeeze": unsqueeze_squeeze,
    "expand": expand, "reshape": reshape, "small_views": small_views, "concatenate": concatenate,
    "pad_repeat": pad_repeat, "index_select": index_select, "advanced_index": advanced_index,
    "gather": gather, "masked_fill": masked_fill, "embedding": embedding, "index_add": index_add,
    "index_put": index_put, "mutate_input": mutate_input,
}
