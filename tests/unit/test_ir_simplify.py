"""Tier 1: index arithmetic in canonical form (``braze/ir/simplify.py``), by example.

Equal affine expressions are one node; ``//`` and ``%`` by a positive constant simplify
using the variables' extents, with Python's floor semantics (a negative numerator rounds
toward minus infinity, a remainder takes the divisor's sign); division by a constant that
is not positive is kept as written; ``bounds`` gives the interval of an expression (the C
and Triton printers use plain ``/`` and ``%`` only where it proves the numerator
non-negative); comparisons, ``min``/``max`` and ``where`` fold when bounds decide them; a
run-time checked index (``Op.CHECK``) is an atom whose bounds are its dimension's.
``test_ir_simplify_properties.py`` checks the same against Python integers at random."""
import math

import torch

from braze.ir import dtypes
from braze.ir import simplify as S
from braze.ir.expr import Op, cast, checked, index, load, substitute, var


def at(e, **values):
    """``e`` with its variables replaced by constants (folded by the simplifier)."""
    from braze.ir.expr import free_vars
    folded = substitute(e, {v: index(values[v.name]) for v in free_vars(e)})
    assert folded.op is Op.CONST, folded
    return folded.arg


def loaded_index(size=4):
    return cast(load("idx", [var("x0", size)], torch.int64), dtypes.INDEX)


# ----------------------------------------------------------------------------- canonical form

def test_affine_canonical_form():
    x0, x1 = var("x0", 4), var("x1", 64)
    assert S.add(S.mul(x0, 64), x1) is S.add(x1, S.mul(64, x0))
    assert S.sub(S.add(x0, x1), x1) is x0
    assert S.mul(S.add(x0, 3), 2) is S.add(S.mul(x0, 2), 6)


def test_linear_form_splits_atoms_and_constant():
    x0, x1 = var("x0", 4), var("x1", 64)
    e = S.add(S.sub(S.mul(x0, 64), S.mul(x1, 3)), 7)
    assert S.linear(e) == ({x0: 64, x1: -3}, 7)
    d = S.floordiv(x1, 8)
    assert S.linear(S.add(d, 1)) == ({d: 1}, 1)
    assert S.linear(index(5)) == ({}, 5)


def test_terms_that_cancel_leave_a_constant():
    x0, x1 = var("x0", 4), var("x1", 64)
    assert S.sub(S.add(x0, x1), S.add(x1, x0)) is index(0)
    assert S.add(S.mul(x0, 3), S.mul(x0, -3)) is index(0)
    assert S.sum_of([x0, x1, 2, S.neg(x0)]) is S.add(x1, 2)
    assert S.sum_of([]) is index(0)


def test_products_of_variables_are_sorted_atoms():
    x, y = var("x", 4), var("y", 5)
    assert S.mul(x, y) is S.mul(y, x)
    assert S.mul(x, y).op is Op.MUL and S.linear(S.mul(x, y)) == ({S.mul(x, y): 1}, 0)
    assert S.neg(S.neg(x)) is x and S.mul(x, 1) is x and S.mul(x, 0) is index(0)


# ----------------------------------------------------------------------------- division and modulo

def test_div_mod_with_extents():
    x0, x1 = var("x0", 4), var("x1", 64)
    flat = S.add(S.mul(x0, 64), x1)
    assert S.floordiv(flat, 64) is x0
    assert S.mod(flat, 64) is x1
    assert S.floordiv(flat, 8) is S.add(S.mul(x0, 8), S.floordiv(x1, 8))
    o = var("o", 256)
    for sizes in ([4, 64], [4, 8, 8], [2, 2, 4, 16], [256]):
        assert S.ravel(S.unravel(o, sizes), sizes) is o


def test_floor_division_and_modulo_follow_python_for_negative_numerators():
    """Floor semantics (Python's), not C's truncation: -5 // 2 == -3 and -5 % 3 == 1."""
    x = var("x", 10)
    assert at(S.floordiv(S.sub(x, 5), 2), x=0) == -3 == (0 - 5) // 2
    assert at(S.mod(S.sub(x, 5), 3), x=0) == 1 == (0 - 5) % 3
    assert S.floordiv(-7, 2) is index(-4) and S.mod(-7, 3) is index(2)
    assert S.floordiv(S.sub(x, 20), 7) is S.add(S.floordiv(S.add(x, 1), 7), -3)
    assert S.bounds(S.mod(S.sub(x, 20), 7)) == (0, 6)


def test_division_by_a_constant_that_is_not_positive_is_kept():
    x = var("x", 10)
    for d in (0, -2):
        q, r = S.floordiv(x, d), S.mod(x, d)
        assert (q.op, q.args) == (Op.FLOORDIV, (x, index(d)))
        assert (r.op, r.args) == (Op.MOD, (x, index(d)))
        assert S.bounds(q) == S.bounds(r) == (-math.inf, math.inf)
    assert S.floordiv(index(7), -2).op is Op.FLOORDIV  # not folded, even for constants


def test_division_by_one_and_by_a_non_constant():
    x, n = var("x", 10), var("n", 5)
    assert S.floordiv(x, 1) is x and S.mod(x, 1) is index(0)
    assert S.floordiv(x, n).op is Op.FLOORDIV and S.mod(x, n).op is Op.MOD


def test_division_within_bounds_is_free():
    x = var("x", 16)
    assert S.floordiv(S.mod(x, 8), 8) is index(0)
    assert S.mod(S.mod(x, 8), 8) is S.mod(x, 8)
    assert S.mod(x, 16) is x and S.mod(x, 32) is x and S.floordiv(x, 16) is index(0)
    assert S.mod(S.add(x, 3), 32) is S.add(x, 3)


def test_common_factors_are_divided_out():
    x = var("x", 100)
    assert S.floordiv(S.mul(x, 6), 4) is S.floordiv(S.mul(x, 3), 2)
    assert S.mod(S.mul(x, 6), 4) is S.mul(S.mod(S.mul(x, 3), 2), 2)
    assert S.floordiv(S.add(S.mul(x, 4), 2), 8) is S.floordiv(S.add(S.mul(x, 2), 1), 4)


def test_nested_divisions_and_modulos_merge():
    x = var("x", 1000)
    assert S.floordiv(S.floordiv(x, 4), 8) is S.floordiv(x, 32)
    assert S.mod(S.mod(x, 32), 8) is S.mod(x, 8)
    assert S.mod(S.mod(x, 12), 8).op is Op.MOD and S.mod(S.mod(x, 12), 8).args[0] is S.mod(x, 12)


def test_a_leading_term_splits_off_when_the_rest_is_below_its_coefficient():
    """``(c*t + r) // d == t // (d/c)`` and ``(c*t + r) % d == (t % (d/c))*c + r`` for ``c | d``
    and ``0 <= r < c``."""
    t, r = var("t", 1000), var("r", 4)
    e = S.add(S.mul(t, 4), r)
    assert S.floordiv(e, 16) is S.floordiv(t, 4)
    assert S.mod(e, 16) is S.add(S.mul(S.mod(t, 4), 4), r)


def test_quotient_times_divisor_plus_remainder_is_the_numerator():
    x, y = var("x", 7), var("y", 9)
    for t in (S.add(S.mul(x, 5), y), S.mul(x, y), S.sub(S.mul(y, 3), x)):
        for d in (2, 4, 8):
            assert S.add(S.mul(S.floordiv(t, d), d), S.mod(t, d)) is t


def test_substitution_resimplifies_index_math():
    x, m = var("x", 6), var("m", 24)
    e = load("buf", [S.floordiv(x, 2), S.mod(x, 2)], torch.float32)
    flat = substitute(e, {x: S.add(S.mul(S.floordiv(m, 4), 2), 1)})
    assert flat.args[1].arg == 1


def test_ravel_and_unravel_handle_extent_one():
    o = var("o", 12)
    parts = S.unravel(o, [3, 1, 4])
    assert parts[1] is index(0) and parts[0] is S.floordiv(o, 4) and parts[2] is S.mod(o, 4)
    assert S.row_major_strides([3, 1, 4]) == [4, 4, 1]
    assert S.row_major_strides([2, 0, 3]) == [3, 3, 1]  # a 0-size dimension strides as 1
    i, j = var("i", 3), var("j", 4)
    assert S.flat_offset([i, j], [1, 3], offset=5) is S.add(S.add(i, S.mul(j, 3)), 5)


# ----------------------------------------------------------------------------- bounds

def test_bounds_and_comparisons_fold():
    x = var("x", 10)
    assert S.bounds(S.sub(S.mul(x, 3), 5)) == (-5, 22)
    assert S.compare(Op.LT, x, 10).arg is True
    assert S.compare(Op.GE, x, 10).arg is False
    assert S.compare(Op.LT, x, 5).op is Op.LT
    assert S.bounds(S.mod(S.sub(x, 20), 7)) == (0, 6)


def test_bounds_of_products_divisions_and_selections():
    x, y = var("x", 10), var("y", 4)
    assert S.bounds(S.mul(S.sub(x, 5), y)) == (-15, 12)
    assert S.bounds(S.floordiv(S.sub(x, 5), 2)) == (-3, 2)
    assert S.bounds(S.mod(S.add(x, 30), 7)) == (0, 6)
    assert S.bounds(S.minimum(x, S.add(y, 2))) == (0, 5)
    assert S.bounds(S.maximum(S.sub(x, 3), y)) == (0, 6)
    assert S.bounds(S.where(S.compare(Op.LT, x, y), S.neg(y), S.add(x, 100))) == (-3, 109)
    assert S.bounds(S.neg(x)) == (-9, 0)


def test_bounds_of_loaded_values_are_their_dtype_range():
    x0 = var("x0", 4)
    assert S.bounds(cast(load("i", [x0], torch.int32), dtypes.INDEX)) == (-2 ** 31, 2 ** 31 - 1)
    assert S.bounds(cast(load("b", [x0], torch.bool), dtypes.INDEX)) == (0, 1)
    assert S.bounds(cast(load("u", [x0], torch.uint8), dtypes.INDEX)) == (0, 255)
    unknown = cast(load("f", [x0], torch.float32), dtypes.INDEX)
    assert S.bounds(unknown) == (-math.inf, math.inf)
    assert S.bounds(S.mul(unknown, 0)) == (0, 0)  # folded to 0, never inf * 0
    assert S.bounds(S.floordiv(unknown, 4)) == (-math.inf, math.inf)
    assert S.bounds(S.mod(unknown, 4)) == (0, 3)


def test_comparisons_fold_only_when_bounds_decide_them():
    x = var("x", 10)  # [0, 9]
    cases = {(Op.LT, 10): True, (Op.LT, 0): False, (Op.LE, 9): True, (Op.LE, -1): False,
             (Op.GT, -1): True, (Op.GT, 9): False, (Op.GE, 0): True, (Op.GE, 10): False,
             (Op.EQ, 10): False, (Op.NE, -3): True}
    for (op, value), known in cases.items():
        folded = S.compare(op, x, value)
        assert folded.op is Op.CONST and folded.arg is known and folded.dtype is torch.bool, (op, value)
    for op in (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE):
        open_ = S.compare(op, x, 5)
        assert open_.op is op and open_.args == (x, index(5))
    assert S.compare(Op.EQ, S.sub(x, x), 0).arg is True


def test_min_max_and_clamp_vanish_when_bounds_prove_them():
    x, y = var("x", 10), var("y", 64)
    assert S.minimum(x, 9) is x and S.minimum(x, 20) is x and S.minimum(20, x) is x
    assert S.maximum(x, 0) is x and S.maximum(-1, x) is x
    assert S.minimum(x, 3).op is Op.MINIMUM and S.maximum(x, 3).op is Op.MAXIMUM
    assert S.clamp(x, 0, 9) is x
    assert S.clamp(S.sub(y, 5), 0, 63) is S.maximum(S.sub(y, 5), 0)


def test_where_of_index_values():
    x, y = var("x", 10), var("y", 4)
    assert S.where(S.compare(Op.LT, x, 10), x, y) is x
    assert S.where(S.compare(Op.LT, x, 5), y, y) is y
    e = S.where(S.compare(Op.LT, x, 5), x, 3)
    assert e.op is Op.WHERE and e.dtype is dtypes.INDEX and e.args[2] is index(3)


def test_build_dispatches_to_the_simplifying_builders():
    x = var("x", 8)
    assert S.build(Op.ADD, (x, index(1))) is S.add(x, 1)
    assert S.build(Op.SUB, (x, x)) is index(0)
    assert S.build(Op.MUL, (index(2), x)) is S.mul(x, 2)
    assert S.build(Op.FLOORDIV, (x, index(8))) is index(0)
    assert S.build(Op.MOD, (x, index(8))) is x
    assert S.build(Op.NEG, (x,)) is S.mul(x, -1)
    assert S.build(Op.MINIMUM, (x, index(9))) is x and S.build(Op.MAXIMUM, (x, index(0))) is x
    assert S.build(Op.LT, (x, index(8))).arg is True


def test_coefficient_of_a_variable():
    x, y, z = var("x", 8), var("y", 16), var("z", 4)
    e = S.add(S.add(S.mul(x, 16), S.mul(y, -3)), 5)
    assert S.coefficient(e, x) == 16 and S.coefficient(e, y) == -3 and S.coefficient(e, z) == 0
    inside = S.add(S.floordiv(x, 2), y)
    assert S.coefficient(inside, x) is None and S.coefficient(inside, y) == 1
    assert S.coefficient(S.mul(x, y), x) is None


# ----------------------------------------------------------------------------- checked indices (Op.CHECK)

def test_a_checked_index_lies_in_its_dimension():
    """``check_index`` wraps [-size, size) into [0, size) and gives 0 otherwise; so does
    ``check_position`` (negatives refused): either way the value is in [0, size)."""
    i = loaded_index()
    assert S.bounds(i) == (-2 ** 63, 2 ** 63 - 1)
    for kind in ("index", "position"):
        c = checked(i, kind, 0, 10)
        assert S.bounds(c) == (0, 9)
        assert S.bounds(S.add(S.mul(c, 3), 1)) == (1, 28)
    assert S.bounds(checked(i, "index", 0, 0)) == (0, 0)  # an empty dimension: 0, reported


def test_a_checked_divisor_keeps_its_values_bounds():
    d = checked(cast(load("d", [var("x0", 4)], torch.int8), dtypes.INDEX), "divisor", 1)
    assert S.bounds(d) == (-128, 127)


def test_a_checked_index_needs_no_further_wrapping():
    c = checked(loaded_index(), "index", 0, 10)
    assert S.mod(c, 10) is c and S.floordiv(c, 10) is index(0)
    assert S.compare(Op.LT, c, 10).arg is True and S.compare(Op.GE, c, 0).arg is True
    assert S.compare(Op.LT, c, 9).op is Op.LT


def test_a_checked_index_is_an_atom_of_affine_forms():
    c, x = checked(loaded_index(), "index", 0, 10), var("x", 8)
    e = S.add(S.mul(c, 8), x)
    assert S.linear(e) == ({c: 8, x: 1}, 0)
    assert S.floordiv(e, 8) is c and S.mod(e, 8) is x
    assert S.sub(e, S.mul(c, 8)) is x
    assert S.coefficient(e, x) == 1
