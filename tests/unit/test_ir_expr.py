"""Tier 1: the expression node of the loop IR (``braze/ir/expr.py``), without code generation.

Interning (structurally equal expressions are one object, constants keyed by their bits),
constants stored as their dtype holds them, cast folding, the builders' dtype rules and
argument checks, traversal (``walk``, ``search``, ``free_vars``, ``loads``, ``op_count``),
rewriting and substitution (index math re-simplified, payloads kept) and the text form
(``to_text``, ``format_body``)."""
import math
import pickle

import pytest
import torch

from braze.ir import dtypes
from braze.ir import simplify as S
from braze.ir.expr import (APPROX, EXPENSIVE, ROUNDED, Expr, Op, binary, cast, checked, const, cuda_rsqrt,
                           free_vars, index, load, loads, op_count, random, rewrite, rounded_mul, scan,
                           scatter_store, search, store_cast, substitute, unary, var, walk, where)
from braze.ir.text import format_body, to_text

F32 = torch.float32


def f32(value):
    return const(value, F32)


def ld(name="buf0", *indices, dtype=F32):
    return load(name, indices or [var("x0", 8)], dtype)


# ----------------------------------------------------------------------------- interning

def test_nodes_are_interned():
    x = var("x0", 8)
    a = binary(Op.MUL, cast(load("buf0", [x], torch.float32), torch.float32), const(2.0, torch.float32))
    b = binary(Op.MUL, cast(load("buf0", [x], torch.float32), torch.float32), const(2.0, torch.float32))
    assert a is b
    assert const(0.0, torch.float32) is not const(-0.0, torch.float32)
    assert var("x0", 1).op is Op.CONST  # an extent-1 variable is the constant 0


def test_equal_trees_of_every_kind_are_one_object():
    def build():
        x, r = var("x0", 8), var("r0", 16)
        v = load("buf1", [x, S.add(S.mul(r, 2), 1)], F32)
        cond = binary(Op.LT, v, f32(0.5))
        return where(cond, unary(Op.EXP, v), cast(load("buf2", [x], torch.int32), F32))
    first, second = build(), build()
    assert first is second
    assert hash(first) == hash(second) and first == second


def test_constants_are_interned_by_dtype_and_bits():
    nan = float("nan")
    assert f32(nan) is f32(nan)  # NaN != NaN, but its bits are one key
    assert f32(1.0) is not const(1.0, torch.float64)
    assert const(1, torch.int32) is not const(1, torch.int64)
    assert index(1) is not const(True, torch.bool)
    assert index(3) is const(3, dtypes.INDEX)


def test_variables_are_keyed_by_name_and_extent():
    assert var("x0", 8) is var("x0", 8)
    assert var("x0", 8) is not var("x0", 9) and var("x0", 8) is not var("x1", 8)
    assert var("x0", 8).name == "x0" and var("x0", 8).size == 8
    assert var("x0", 1) is index(0)


def test_a_pickled_expression_comes_back_as_the_interned_node():
    e = where(binary(Op.GT, ld(), f32(0.0)), ld(), unary(Op.NEG, ld()))
    assert pickle.loads(pickle.dumps(e)) is e


# ----------------------------------------------------------------------------- constants and casts

@pytest.mark.parametrize("value, dtype, stored", [
    (300, torch.int8, 44), (-129, torch.int8, 127), (-1, torch.uint8, 255), (256, torch.uint8, 0),
    (2 ** 63, torch.int64, -2 ** 63), (2 ** 31, torch.int32, -2 ** 31), (3.7, dtypes.INDEX, 3),
    (2, torch.bool, True), (0, torch.bool, False), (3, torch.float32, 3.0),
])
def test_constants_hold_what_their_dtype_holds(value, dtype, stored):
    c = const(value, dtype)
    assert c.arg == stored and type(c.arg) is type(stored) and c.dtype is dtype


@pytest.mark.parametrize("value, src, dst", [
    (2.7, torch.float32, torch.int32), (-2.7, torch.float64, torch.int64), (300, torch.int64, torch.uint8),
    (-5, torch.int32, torch.int8), (0.5, torch.float32, torch.bool), (0.0, torch.float32, torch.bool),
    (7, torch.int64, torch.float64), (float("inf"), torch.float32, torch.bool),
    (0.1, torch.float64, torch.float32), (0.1, torch.float64, torch.bfloat16), (0.1, torch.float32, torch.float16),
    (16777217.0, torch.float64, torch.float32), (16777217.0, torch.float32, torch.int64),
    (2 ** 53 + 1, torch.int64, torch.float64), (2 ** 62 + 2 ** 38 + 1, torch.int64, torch.float32),
    (257, torch.int32, torch.bfloat16), (1e10, torch.float64, torch.float16),
])
def test_cast_of_a_constant_folds_as_torch_converts(value, src, dst):
    folded = cast(const(value, src), dst)
    assert folded.op is Op.CONST and folded.dtype is dst
    assert folded.arg == torch.tensor(value, dtype=src).to(dst).item()


@pytest.mark.parametrize("value, src, dst", [(0.1, torch.float32, torch.float64),
                                             (0.1, torch.bfloat16, torch.float32),
                                             (16777217, torch.float32, torch.float64)])
def test_cast_of_a_float_constant_to_a_wider_float_keeps_its_own_rounding(value, src, dst):
    expected = torch.tensor(value, dtype=src).to(dst).item()
    assert cast(const(value, src), dst).arg == expected


def test_cast_to_the_same_dtype_or_to_index():
    v = ld()
    assert cast(v, F32) is v
    assert cast(const(7, torch.int64), dtypes.INDEX) is index(7)
    i = load("idx", [var("x0", 4)], torch.int64)
    assert cast(i, dtypes.INDEX).op is Op.CAST and cast(i, dtypes.INDEX).dtype is dtypes.INDEX


def test_store_cast_rounds_once():
    v = binary(Op.ADD, load("a", [], torch.float32), const(1.0, torch.float32))
    assert cast(store_cast(v, torch.bfloat16), torch.float32) is v
    assert cast(cast(v, torch.bfloat16), torch.float32).args[0].op is Op.CAST  # explicit casts stay


@pytest.mark.parametrize("narrow, wide", [(torch.float16, F32), (torch.bfloat16, torch.float64), (F32, torch.float64),
                                          (torch.int32, torch.int64), (torch.uint8, torch.int16),
                                          (torch.bool, torch.float16), (torch.bool, torch.int8)])
def test_a_cast_there_and_back_through_a_dtype_that_holds_every_value_is_free(narrow, wide):
    v = load("a", [var("x0", 4)], narrow)
    assert cast(cast(v, wide), narrow) is v


@pytest.mark.parametrize("narrow, wide", [(F32, torch.float16), (torch.float16, torch.bfloat16),
                                          (torch.int64, torch.int32), (torch.int32, F32), (torch.uint8, torch.int8),
                                          (F32, torch.bool)])
def test_a_cast_there_and_back_that_can_change_a_value_stays(narrow, wide):
    v = load("a", [var("x0", 4)], narrow)
    back = cast(cast(v, wide), narrow)
    assert back.op is Op.CAST and back.args[0].op is Op.CAST and back.args[0].args[0] is v


def test_store_cast_is_marked_and_free_when_the_dtype_is_kept():
    v = ld()
    assert store_cast(v, F32) is v
    rounded = store_cast(v, torch.float16)
    assert rounded.arg == "store" and rounded is not cast(v, torch.float16)
    assert cast(rounded, torch.float64).args[0] is rounded  # undone only by a cast back to its source


# ----------------------------------------------------------------------------- builders

def test_binary_needs_equal_dtypes_and_comparisons_give_bool():
    with pytest.raises(TypeError, match="needs equal dtypes"):
        binary(Op.ADD, ld(), const(1, torch.int32))
    assert binary(Op.ADD, ld(), f32(1.0)).dtype is F32
    for op in (Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE):
        assert binary(op, ld(), f32(1.0)).dtype is torch.bool


def test_unary_result_dtypes():
    v = ld(dtype=torch.float16)
    for op in (Op.ISNAN, Op.ISINF, Op.SIGNBIT, Op.LOGICAL_NOT):
        assert unary(op, v).dtype is torch.bool
    for op in (Op.EXP, Op.NEG, Op.ABS, Op.FLOOR):
        assert unary(op, v).dtype is torch.float16


def test_where_folds_a_constant_condition_and_equal_branches():
    a, b = ld("a"), ld("b")
    assert where(const(True, torch.bool), a, b) is a
    assert where(const(False, torch.bool), a, b) is b
    assert where(binary(Op.LT, a, b), a, a) is a
    assert where(binary(Op.LT, a, b), a, b).op is Op.WHERE
    with pytest.raises(TypeError, match="equal branch dtypes"):
        where(binary(Op.LT, a, b), a, const(1, torch.int64))


def test_rounded_products_and_cuda_rsqrt_are_nodes_of_their_own():
    a, b = ld("a"), ld("b")
    assert rounded_mul(a, b) is not binary(Op.MUL, a, b)
    assert rounded_mul(a, b).arg == ROUNDED and rounded_mul(a, b).op is Op.MUL
    assert cuda_rsqrt(a) is not unary(Op.RSQRT, a) and cuda_rsqrt(a).arg == APPROX


def test_random_checks_its_operands_and_gives_float32_or_int64():
    seed, offset = const(3, torch.int64), cast(var("x0", 8), torch.int64)
    assert random(seed, offset, "rand").dtype is torch.float32
    assert random(seed, offset, "randn").dtype is torch.float32
    assert random(seed, offset, "bits").dtype is torch.int64
    with pytest.raises(TypeError, match="random needs"):
        random(seed, offset, "gauss")
    with pytest.raises(TypeError, match="random needs"):
        random(const(3, torch.int32), offset, "rand")


def test_checked_values_record_kind_site_and_size():
    i = cast(load("idx", [var("x0", 4)], torch.int64), dtypes.INDEX)
    c = checked(i, "index", 2, 10)
    assert c.op is Op.CHECK and c.dtype is dtypes.INDEX and c.arg == ("index", 2, 10)
    assert checked(i, "position", 2, 10).arg == ("position", 2, 10)
    d = checked(load("den", [var("x0", 4)], torch.int32), "divisor", 5)
    assert d.dtype is torch.int32 and d.arg == ("divisor", 5, 0)
    assert checked(i, "index", 2, 10) is not checked(i, "index", 3, 10)  # one node per site
    with pytest.raises(TypeError, match="check kind"):
        checked(i, "range", 0, 10)


def test_scatter_and_scan_bodies():
    v, x = ld(), var("x0", 8)
    s = scatter_store(v, [x, index(0)], accumulate=True)
    assert s.op is Op.SCATTER and s.args == (v, x, index(0)) and s.arg == "add"
    assert scatter_store(v, [x], accumulate=False).arg == "set"
    assert scan(v, "prod", 1).arg == ("prod", 1) and scan(v, "prod", 1).dtype is F32


# ----------------------------------------------------------------------------- traversal

def test_walk_visits_shared_nodes_once():
    x = load("a", [var("x0", 4)], torch.float32)
    y = binary(Op.MUL, x, x)
    z = binary(Op.ADD, y, y)
    assert [n.op for n in walk(z)].count(Op.LOAD) == 1


def test_walk_lists_children_before_parents():
    x0 = var("x0", 8)
    e = where(binary(Op.LT, ld("a", x0), f32(0.0)), unary(Op.EXP, ld("b", S.add(x0, 1))), ld("a", x0))
    order = walk(e)
    position = {id(n): k for k, n in enumerate(order)}
    assert len(position) == len(order) and order[-1] is e
    for node in order:
        assert all(position[id(child)] < position[id(node)] for child in node.args)
    both = walk([e, unary(Op.SIN, ld("a", x0))])
    assert len(both) == len(order) + 1  # the second root shares everything but itself


def test_search_follows_only_the_children_it_is_given():
    x0 = var("x0", 8)
    i = load("idx", [x0], torch.int64)
    e = unary(Op.EXP, load("buf", [cast(i, dtypes.INDEX)], F32))
    everything = search([e], lambda n: n.args)
    stop_at_loads = search([e], lambda n: () if n.op is Op.LOAD else n.args)
    assert i in everything and x0 in everything
    assert i not in stop_at_loads and [n.op for n in stop_at_loads] == [Op.EXP, Op.LOAD]


def test_free_vars_and_loads():
    x0, r0 = var("x0", 8), var("r0", 16)
    e = binary(Op.ADD, ld("a", S.add(x0, r0)), ld("b", x0))
    assert free_vars(e) == {x0, r0}
    assert free_vars(f32(1.0)) == frozenset() and free_vars(x0) == {x0}
    assert free_vars(load("c", [index(0)], F32)) == frozenset()
    assert sorted(n.arg for n in loads(e)) == ["a", "b"]
    assert loads([e, ld("c", x0)])[-1].arg == "c"


def test_op_count_weighs_expensive_ops_four_and_counts_shared_nodes_once():
    v = ld()
    assert op_count(v) == 0  # leaves are free
    assert op_count(binary(Op.ADD, v, f32(1.0))) == 1
    assert op_count(unary(Op.EXP, v)) == 4
    e = unary(Op.EXP, v)
    assert op_count(binary(Op.MUL, e, e)) == 5
    assert Op.EXP in EXPENSIVE and Op.ADD not in EXPENSIVE


# ----------------------------------------------------------------------------- rewriting

def test_substitution_folds_index_math_of_constants():
    x0 = var("x0", 8)
    e = ld("a", S.add(S.mul(x0, 2), 1))
    assert substitute(e, {x0: index(3)}) is ld("a", index(7))
    assert substitute(e, {}) is e


def test_rewrite_replaces_nodes_bottom_up_and_keeps_untouched_ones():
    x0 = var("x0", 8)
    untouched = ld("b", x0)
    e = binary(Op.ADD, unary(Op.EXP, ld("a", x0)), untouched)
    swapped = rewrite(e, lambda node, args: unary(Op.SIN, args[0]) if node.op is Op.EXP else None)
    assert swapped is binary(Op.ADD, unary(Op.SIN, ld("a", x0)), untouched)
    assert rewrite(e, lambda node, args: None) is e


def test_rebuilt_nodes_keep_their_payloads():
    x0, m = var("x0", 8), var("m", 4)
    i = cast(load("idx", [x0], torch.int64), dtypes.INDEX)
    e = store_cast(ld("a", checked(i, "index", 1, 10)), torch.bfloat16)
    moved = substitute(e, {x0: m})
    assert moved.arg == "store" and moved.dtype is torch.bfloat16
    check = moved.args[0].args[0]
    assert check.op is Op.CHECK and check.arg == ("index", 1, 10) and check.args[0].args[0].args == (m,)
    r = rounded_mul(ld("a", x0), f32(3.0))
    assert substitute(r, {x0: m}).arg == ROUNDED


def test_substitution_folds_a_where_whose_condition_becomes_constant():
    x0 = var("x0", 8)
    e = where(S.compare(Op.LT, x0, 4), ld("a", x0), ld("b", x0))
    assert substitute(e, {x0: index(2)}) is ld("a", index(2))
    assert substitute(e, {x0: index(6)}) is ld("b", index(6))


# ----------------------------------------------------------------------------- text

def test_text_form_of_each_kind_of_node():
    x0, x1 = var("x0", 4), var("x1", 64)
    a = load("buf0", [x0, x1], F32)
    assert to_text(S.add(S.mul(x0, 64), x1)) == "((x0 * 64) + x1)"
    assert to_text(S.sub(x1, 3)) == "(x1 + -3)"
    assert to_text(a) == "buf0[x0, x1]" and str(a) == repr(a) == to_text(a)
    assert to_text(cast(a, torch.bfloat16)) == "bf16(buf0[x0, x1])"
    assert to_text(rounded_mul(a, f32(2.0))) == "mul_rn(buf0[x0, x1], 2.0)"
    assert to_text(cuda_rsqrt(a)) == "cuda_rsqrt(buf0[x0, x1])"
    assert to_text(unary(Op.EXP, a)) == "exp(buf0[x0, x1])"
    assert to_text(Expr(Op.VALUE, F32, (), "buf3")) == "<buf3>"
    assert to_text(const(True, torch.bool)) == "True" and to_text(f32(-0.0)) == "-0.0"
    assert to_text(f32(math.inf)) == "inf"
    assert to_text(where(binary(Op.LT, a, f32(0.0)), a, f32(0.0))) == \
        "where((buf0[x0, x1] < 0.0), buf0[x0, x1], 0.0)"


def test_text_form_of_checks_and_random_numbers():
    i = cast(load("i", [var("x0", 4)], torch.int64), dtypes.INDEX)
    assert to_text(checked(i, "index", 3, 10)) == "check_index(idx(i[x0]), 10; site 3)"
    assert to_text(checked(load("i", [var("x0", 4)], torch.int64), "divisor", 1)) == "check_divisor(i[x0]; site 1)"
    offset = cast(var("x0", 4), torch.int64)
    assert to_text(random(const(1, torch.int64), offset, "randn")) == "randn(1, i64(x0))"


def test_format_body_binds_shared_subexpressions_once():
    e = unary(Op.EXP, ld("buf0", var("x0", 4)))
    assert format_body(binary(Op.ADD, e, binary(Op.MUL, e, e))) == ["t0 = exp(buf0[x0])", "out = (t0 + (t0 * t0))"]
    assert format_body(e, "value") == ["value = exp(buf0[x0])"]
    long = ld("a_buffer_with_a_long_name")
    for _ in range(8):
        long = binary(Op.ADD, unary(Op.SIN, long), f32(1.0))
    lines = format_body(long)
    assert len(lines) > 1 and all(len(line) < 140 for line in lines) and lines[-1].startswith("out = ")
