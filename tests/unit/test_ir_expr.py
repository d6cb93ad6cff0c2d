"""Tier 1: the IR itself — interning, canonical index arithmetic, bounds, printing."""
import torch

from braze.ir import simplify as S
from braze.ir.expr import Op, binary, cast, const, load, store_cast, substitute, var, walk
from braze.ir.graph import Layout


def test_nodes_are_interned():
    x = var("x0", 8)
    a = binary(Op.MUL, cast(load("buf0", [x], torch.float32), torch.float32), const(2.0, torch.float32))
    b = binary(Op.MUL, cast(load("buf0", [x], torch.float32), torch.float32), const(2.0, torch.float32))
    assert a is b
    assert const(0.0, torch.float32) is not const(-0.0, torch.float32)
    assert var("x0", 1).op is Op.CONST  # an extent-1 variable is the constant 0


def test_affine_canonical_form():
    x0, x1 = var("x0", 4), var("x1", 64)
    assert S.add(S.mul(x0, 64), x1) is S.add(x1, S.mul(64, x0))
    assert S.sub(S.add(x0, x1), x1) is x0
    assert S.mul(S.add(x0, 3), 2) is S.add(S.mul(x0, 2), 6)


def test_div_mod_with_extents():
    x0, x1 = var("x0", 4), var("x1", 64)
    flat = S.add(S.mul(x0, 64), x1)
    assert S.floordiv(flat, 64) is x0
    assert S.mod(flat, 64) is x1
    assert S.floordiv(flat, 8) is S.add(S.mul(x0, 8), S.floordiv(x1, 8))
    o = var("o", 256)
    for sizes in ([4, 64], [4, 8, 8], [2, 2, 4, 16], [256]):
        assert S.ravel(S.unravel(o, sizes), sizes) is o


def test_bounds_and_comparisons_fold():
    x = var("x", 10)
    assert S.bounds(S.sub(S.mul(x, 3), 5)) == (-5, 22)
    assert S.compare(Op.LT, x, 10).arg is True
    assert S.compare(Op.GE, x, 10).arg is False
    assert S.compare(Op.LT, x, 5).op is Op.LT
    assert S.bounds(S.mod(S.sub(x, 20), 7)) == (0, 6)


def test_substitution_resimplifies_index_math():
    x, m = var("x", 6), var("m", 24)
    e = load("buf", [S.floordiv(x, 2), S.mod(x, 2)], torch.float32)
    flat = substitute(e, {x: S.add(S.mul(S.floordiv(m, 4), 2), 1)})
    assert flat.args[1].arg == 1


def test_store_cast_rounds_once():
    v = binary(Op.ADD, load("a", [], torch.float32), const(1.0, torch.float32))
    assert cast(store_cast(v, torch.bfloat16), torch.float32) is v
    assert cast(cast(v, torch.bfloat16), torch.float32).args[0].op is Op.CAST  # explicit casts stay


def test_layouts():
    lay = Layout.contiguous((2, 3, 4))
    assert lay.strides == (12, 4, 1) and lay.is_dense() and lay.storage_numel() == 24
    assert not Layout((2, 3), (4, 1)).is_dense()
    assert Layout((3, 2), (1, 3)).is_dense()
    i, j = var("i", 3), var("j", 2)
    assert lay.position([i, j, 0]) is S.add(S.mul(i, 12), S.mul(j, 4))


def test_walk_visits_shared_nodes_once():
    x = load("a", [var("x0", 4)], torch.float32)
    y = binary(Op.MUL, x, x)
    z = binary(Op.ADD, y, y)
    assert [n.op for n in walk(z)].count(Op.LOAD) == 1
