"""Tier 1: property tests of the index simplifier (``braze/ir/simplify.py``) against Python's
integer arithmetic, with hypothesis.

Random index expressions over variables of known extents (``var(name, size)`` ranges over
``[0, size)``) are built twice: evaluated directly with Python's ``+ - * // %`` (floor
semantics, the IR's meaning: the module docstring says so, and the C and Triton printers
call floor helpers wherever the numerator may be negative), and built through the
simplifying builders and then evaluated. Both must agree at every assignment drawn within
the extents, and every node of the simplified expression must lie within ``S.bounds`` of
it. Also: canonical form (commutative, associative, cancelling sums are one node),
``ravel``/``unravel`` and dense layouts inverse to each other, exact bounds of affine
forms, ``coefficient`` as a finite difference, substitution, and constants and casts as
torch converts them."""
import itertools
import math

import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from braze.ir import dtypes
from braze.ir import simplify as S
from braze.ir.expr import Op, cast, checked, const, index, load, substitute, var, walk
from braze.ir.graph import Layout

PROPERTY = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SIZES = st.sampled_from([2, 3, 4, 5, 7, 8, 16, 64])
SMALL_SIZES = st.sampled_from([2, 3, 4, 5, 8])
DIVISORS = st.sampled_from([1, 2, 3, 4, 5, 6, 8, 12, 16, 64, -1, -3, -4])
NAMES = ("a", "b", "c")


# ----------------------------------------------------------------------------- expressions as trees

def trees(names):
    """Expression trees over ``names``: tuples ("var", n), ("const", k), (op, child, ...)."""
    leaves = st.one_of(st.tuples(st.just("var"), st.sampled_from(names)),
                       st.tuples(st.just("const"), st.integers(-40, 40)))

    def extend(children):
        return st.one_of(
            st.tuples(st.sampled_from(["add", "sub", "mul", "min", "max"]), children, children),
            st.tuples(st.just("scale"), children, st.integers(-9, 9)),
            st.tuples(st.sampled_from(["floordiv", "mod"]), children, DIVISORS),
            st.tuples(st.just("neg"), children),
            st.tuples(st.just("where"), st.sampled_from(["lt", "le", "eq", "ne"]), children, children, children,
                      children),
        )
    return st.recursive(leaves, extend, max_leaves=12)


def index_trees(names):
    """Trees shaped like the index math of views: sums of variables times small strides
    plus a small offset, under floor divisions and modulos by small positive constants
    (nested, added, and recombined as ``(t // d) * d + t % d``)."""
    term = st.tuples(st.just("scale"), st.tuples(st.just("var"), st.sampled_from(names)),
                     st.sampled_from([1, 2, 3, 4, 8, 16, -1, -2]))
    offset = st.tuples(st.just("const"), st.integers(-9, 9))

    def total(parts):
        tree = parts[0]
        for part in parts[1:]:
            tree = ("add", tree, part)
        return tree
    sums = st.lists(term, min_size=1, max_size=3).flatmap(lambda ts: offset.map(lambda c: total(ts + [c])))
    small = st.sampled_from([2, 3, 4, 5, 8, 16])

    def extend(children):
        return st.one_of(
            st.tuples(st.sampled_from(["floordiv", "mod"]), children, small),
            st.tuples(st.just("add"), children, children),
            st.tuples(st.just("scale"), children, st.sampled_from([2, 3, 4, -1])),
            st.tuples(children, small).map(lambda td: ("add", ("scale", ("floordiv", td[0], td[1]), td[1]),
                                                       ("mod", td[0], td[1]))),
        )
    return st.recursive(sums, extend, max_leaves=6)


TREES = st.one_of(trees(list(NAMES)), index_trees(list(NAMES)))
TREES_OF_B_AND_C = st.one_of(trees(["b", "c"]), index_trees(["b", "c"]))
CMP = {"lt": (Op.LT, lambda a, b: a < b), "le": (Op.LE, lambda a, b: a <= b),
       "eq": (Op.EQ, lambda a, b: a == b), "ne": (Op.NE, lambda a, b: a != b)}


def python_value(tree, env):
    """The tree evaluated with Python integers: floor division and modulo."""
    kind = tree[0]
    if kind == "var":
        return env[tree[1]]
    if kind == "const":
        return tree[1]
    v = [python_value(t, env) if isinstance(t, tuple) else t for t in tree[1:]]
    if kind == "where":
        return v[3] if CMP[tree[1]][1](v[1], v[2]) else v[4]
    return {"add": lambda: v[0] + v[1], "sub": lambda: v[0] - v[1], "mul": lambda: v[0] * v[1],
            "min": lambda: min(v[0], v[1]), "max": lambda: max(v[0], v[1]), "scale": lambda: v[0] * v[1],
            "floordiv": lambda: v[0] // v[1], "mod": lambda: v[0] % v[1], "neg": lambda: -v[0]}[kind]()


def build(tree, variables):
    """The tree through the simplifying builders."""
    kind = tree[0]
    if kind == "var":
        return variables[tree[1]]
    if kind == "const":
        return index(tree[1])
    if kind == "where":
        op, _ = CMP[tree[1]]
        a, b, x, y = (build(t, variables) for t in tree[2:])
        return S.where(S.compare(op, a, b), x, y)
    a = build(tree[1], variables)
    if kind == "neg":
        return S.neg(a)
    if kind in ("scale", "floordiv", "mod"):
        return {"scale": S.mul, "floordiv": S.floordiv, "mod": S.mod}[kind](a, tree[2])
    b = build(tree[2], variables)
    return {"add": S.add, "sub": S.sub, "mul": S.mul, "min": S.minimum, "max": S.maximum}[kind](a, b)


def ir_values(e, env, loaded=None) -> dict:
    """Every node of an index expression evaluated as the IR means it (``id(node)`` ->
    value): Python's ``//`` and ``%``; a checked index wrapped into its dimension, 0 when
    out of range; a checked divisor as it is; a loaded index ``loaded[buffer name]``."""
    found = {}
    for node in walk(e):
        op, arg = node.op, node.arg
        v = [found.get(id(a)) for a in node.args]
        if op is Op.CONST:
            value = arg
        elif op is Op.VAR:
            value = env[node.name]
        elif op is Op.LOAD:
            value = loaded[arg]
        elif op is Op.CAST:
            value = v[0]
        elif op is Op.CHECK:
            kind, _, size = arg
            low = -size if kind == "index" else 0
            value = v[0] if kind == "divisor" else v[0] % size if low <= v[0] < size else 0
        else:
            value = {Op.ADD: lambda: v[0] + v[1], Op.SUB: lambda: v[0] - v[1], Op.MUL: lambda: v[0] * v[1],
                     Op.FLOORDIV: lambda: v[0] // v[1], Op.MOD: lambda: v[0] % v[1],
                     Op.MINIMUM: lambda: min(v), Op.MAXIMUM: lambda: max(v), Op.NEG: lambda: -v[0],
                     Op.WHERE: lambda: v[1] if v[0] else v[2], Op.LT: lambda: v[0] < v[1],
                     Op.LE: lambda: v[0] <= v[1], Op.GT: lambda: v[0] > v[1], Op.GE: lambda: v[0] >= v[1],
                     Op.EQ: lambda: v[0] == v[1], Op.NE: lambda: v[0] != v[1]}[op]()
        found[id(node)] = value
    return found


def ir_value(e, env, loaded=None):
    return ir_values(e, env, loaded)[id(e)]


@st.composite
def expressions(draw):
    """(tree, variables, sizes): a tree over variables of drawn extents."""
    sizes = {n: draw(st.one_of(SMALL_SIZES, SIZES)) for n in NAMES}
    variables = {n: var(n, s) for n, s in sizes.items()}
    return draw(TREES), variables, sizes


def assignments(draw, sizes, count=8):
    """Every assignment of the variables when there are at most ``EXHAUSTIVE`` of them,
    else ``count`` drawn within the extents."""
    if math.prod(sizes.values()) <= EXHAUSTIVE:
        return [dict(zip(sizes, point)) for point in itertools.product(*(range(s) for s in sizes.values()))]
    return [{n: draw(st.integers(0, s - 1)) for n, s in sizes.items()} for _ in range(count)]


EXHAUSTIVE = 512


def within_bounds(e, env, loaded=None):
    """Every index node of ``e`` evaluates inside its ``S.bounds``."""
    values = ir_values(e, env, loaded)
    for node in walk(e):
        if node.dtype is dtypes.INDEX:
            lo, hi = S.bounds(node)
            assert lo <= values[id(node)] <= hi, (str(node), (lo, hi), values[id(node)], env)


# ----------------------------------------------------------------------------- simplification is exact

@PROPERTY
@given(expressions(), st.data())
def test_simplified_expressions_compute_what_python_computes(expr, data):
    tree, variables, sizes = expr
    e = build(tree, variables)
    for env in assignments(data.draw, sizes):
        assert ir_value(e, env) == python_value(tree, env), (tree, str(e), env)


@PROPERTY
@given(expressions(), st.data())
def test_bounds_contain_every_value_of_every_node(expr, data):
    tree, variables, sizes = expr
    e = build(tree, variables)
    for env in assignments(data.draw, sizes):
        within_bounds(e, env)


@PROPERTY
@given(expressions())
def test_building_an_expression_twice_gives_one_object(expr):
    tree, variables, _ = expr
    assert build(tree, variables) is build(tree, dict(variables))


@PROPERTY
@given(expressions(), st.data())
def test_sums_are_canonical(expr, data):
    """Commutative and associative, cancelling, distributing a constant factor: one node."""
    tree, variables, _ = expr
    a = build(tree, variables)
    b = build(data.draw(TREES), variables)
    c = build(data.draw(TREES), variables)
    assert S.add(a, b) is S.add(b, a)
    assert S.add(S.add(a, b), c) is S.add(a, S.add(b, c))
    assert S.sub(S.add(a, b), b) is a
    assert S.mul(S.add(a, b), 3) is S.add(S.mul(a, 3), S.mul(b, 3))
    assert S.neg(S.neg(a)) is a


def test_every_small_division_of_one_variable_is_exact_and_bounded():
    """Exhaustively: ``(k*x + c) // d`` and ``% d`` for every extent, stride, offset and
    divisor below 10, at every value of ``x``."""
    for size, k, c, d in itertools.product(range(2, 10), range(-3, 5), range(-10, 11), range(1, 10)):
        x = var("x", size)
        numerator = S.add(S.mul(x, k), c)
        for e, op in ((S.floordiv(numerator, d), lambda n: n // d), (S.mod(numerator, d), lambda n: n % d)):
            for value in range(size):
                assert ir_value(e, {"x": value}) == op(k * value + c), (str(e), value)
                within_bounds(e, {"x": value})


def test_every_small_division_of_two_variables_is_exact_and_bounded():
    """Exhaustively: ``(k1*x + k2*y + c) // d`` and ``% d`` over small extents and strides,
    where a leading term splits off when the rest stays below its stride."""
    for sx, sy, k1, k2, c, d in itertools.product((2, 3, 4, 5), (2, 3, 4, 5), (1, 2, 4), (1, 3, -1),
                                                  (-5, -1, 0, 1, 3, 7), (2, 3, 4, 8)):
        x, y = var("x", sx), var("y", sy)
        numerator = S.add(S.add(S.mul(x, k1), S.mul(y, k2)), c)
        for e, op in ((S.floordiv(numerator, d), lambda n: n // d), (S.mod(numerator, d), lambda n: n % d)):
            for vx, vy in itertools.product(range(sx), range(sy)):
                env = {"x": vx, "y": vy}
                assert ir_value(e, env) == op(k1 * vx + k2 * vy + c), (str(e), env)
                within_bounds(e, env)


# ----------------------------------------------------------------------------- affine forms

@st.composite
def affine(draw):
    """(expression, terms, constant, sizes): sum of coefficient * variable plus a constant."""
    sizes = {n: draw(st.sampled_from([2, 3, 4, 5, 7, 8, 16])) for n in NAMES}
    terms = {n: draw(st.sampled_from([0, 1, 2, 3, 4, 8, 16, 64, -1, -2, -5])) for n in NAMES}
    constant = draw(st.integers(-70, 70))
    e = index(constant)
    for n in NAMES:
        e = S.add(e, S.mul(var(n, sizes[n]), terms[n]))
    return e, terms, constant, sizes


@PROPERTY
@given(affine())
def test_bounds_of_an_affine_form_are_exact(form):
    e, terms, constant, sizes = form
    values = [sum(terms[n] * x for n, x in zip(NAMES, point)) + constant
              for point in itertools.product(*(range(sizes[n]) for n in NAMES))]
    assert S.bounds(e) == (min(values), max(values))


@PROPERTY
@given(affine(), st.sampled_from([2, 3, 4, 8, 16, 64]))
def test_quotient_times_divisor_plus_remainder_is_the_numerator(form, d):
    t = form[0]
    assert S.add(S.mul(S.floordiv(t, d), d), S.mod(t, d)) is t


@PROPERTY
@given(affine(), st.data())
def test_coefficient_of_an_affine_form_is_its_step(form, data):
    e, terms, _, sizes = form
    for n in NAMES:
        v = var(n, sizes[n])
        assert S.coefficient(e, v) == terms[n]
        env = {m: data.draw(st.integers(0, sizes[m] - 1)) for m in NAMES}
        if env[n] + 1 < sizes[n]:
            assert ir_value(e, {**env, n: env[n] + 1}) - ir_value(e, env) == terms[n]


@PROPERTY
@given(expressions(), st.data())
def test_a_coefficient_given_is_the_step_of_its_variable(expr, data):
    """Where ``coefficient`` finds an expression affine in a variable, one step of that
    variable changes the value by the coefficient, whatever else the expression holds."""
    tree, variables, sizes = expr
    e = build(tree, variables)
    for n, v in variables.items():
        k = S.coefficient(e, v)
        if k is None or v.op is not Op.VAR:
            continue
        for env in assignments(data.draw, sizes, count=4):
            if env[n] + 1 < sizes[n]:
                assert ir_value(e, {**env, n: env[n] + 1}) - ir_value(e, env) == k, (str(e), n, env)


# ----------------------------------------------------------------------------- layouts

SHAPES = st.lists(st.sampled_from([1, 2, 3, 4, 5, 8, 16]), min_size=1, max_size=4)


@PROPERTY
@given(SHAPES, st.data())
def test_ravel_and_unravel_are_inverse(sizes, data):
    xs = [var(f"x{k}", s) for k, s in enumerate(sizes)]
    assert all(a is b for a, b in zip(S.unravel(S.ravel(xs, sizes), sizes), xs))
    total = math.prod(sizes)
    assume(total > 1)
    o = var("o", total)
    parts = S.unravel(o, sizes)
    assert S.ravel(parts, sizes) is o
    flat = data.draw(st.integers(0, total - 1))
    expected, rest = [], flat
    for size in reversed(sizes):
        expected.append(rest % size)
        rest //= size
    assert [ir_value(p, {"o": flat}) for p in parts] == expected[::-1]


@PROPERTY
@given(SHAPES, st.permutations(range(4)), st.integers(0, 9))
def test_a_dense_layout_gives_back_the_index_it_stores(sizes, order, offset):
    """Storage positions of a permuted row-major layout, and the logical index at each."""
    order = [k for k in order if k < len(sizes)]
    strides, acc = [0] * len(sizes), 1
    for k in reversed(order):
        strides[k], acc = acc, acc * sizes[k]
    layout = Layout(tuple(sizes), tuple(strides), offset)
    assert layout.is_dense() and layout.storage_numel() == offset + math.prod(sizes)
    xs = [var(f"x{k}", s) for k, s in enumerate(sizes)]
    position = layout.position(xs)
    assert S.bounds(position) == (offset, offset + math.prod(sizes) - 1)
    back = layout.indices_at(S.sub(position, offset))
    assert all(a is b for a, b in zip(back, xs))


# ----------------------------------------------------------------------------- substitution

@PROPERTY
@given(expressions(), st.data())
def test_substituting_a_value_in_range_commutes_with_evaluation(expr, data):
    """``x -> r`` with ``r`` in ``[0, size(x))`` (the simplifier may rely on x's extent)."""
    tree, variables, sizes = expr
    e = build(tree, variables)
    other = {n: v for n, v in variables.items() if n != "a"}
    replacement = S.mod(build(data.draw(TREES_OF_B_AND_C), other), sizes["a"])
    moved = substitute(e, {variables["a"]: replacement})
    for env in assignments(data.draw, sizes, count=4):
        inner = ir_value(replacement, env)
        assert 0 <= inner < sizes["a"]
        assert ir_value(moved, env) == ir_value(e, {**env, "a": inner})
        within_bounds(moved, env)


# ----------------------------------------------------------------------------- checked indices

@PROPERTY
@given(expressions(), st.sampled_from(["index", "position"]), st.integers(2, 12), st.data())
def test_checked_indices_stay_within_their_bounds_inside_any_expression(expr, kind, size, data):
    """A loaded index of every value from below ``-size`` to above ``size``, checked against
    a dimension of ``size``, then used as variable ``a`` (of extent ``size``) of a random
    expression: values as the IR means them, every node inside its bounds."""
    tree, variables, sizes = expr
    tree = ("add", tree, ("var", "a"))
    sizes = {**sizes, "a": size}
    variables = {**variables, "a": var("a", size)}
    i = checked(cast(load("idx", [variables["b"]], torch.int64), dtypes.INDEX), kind, 0, size)
    e = substitute(build(tree, variables), {variables["a"]: i})
    env = {n: data.draw(st.integers(0, s - 1)) for n, s in sizes.items()}
    for value in range(-size - 3, size + 3):
        wrapped = value % size if (-size if kind == "index" else 0) <= value < size else 0
        assert ir_value(e, env, {"idx": value}) == python_value(tree, {**env, "a": wrapped})
        within_bounds(e, env, {"idx": value})


# ----------------------------------------------------------------------------- constants

INTEGER_DTYPES = st.sampled_from([torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])


@PROPERTY
@given(st.integers(-2 ** 70, 2 ** 70), INTEGER_DTYPES)
def test_integer_constants_wrap_as_torch_converts(value, dtype):
    """Two's complement: the value modulo 2^64 as an int64, converted by torch to ``dtype``."""
    as_int64 = (value + 2 ** 63) % 2 ** 64 - 2 ** 63
    assert const(value, dtype).arg == torch.tensor(as_int64, dtype=torch.int64).to(dtype).item()


@PROPERTY
@given(st.integers(-2 ** 31, 2 ** 31 - 1), INTEGER_DTYPES, INTEGER_DTYPES)
def test_integer_casts_of_constants_fold_as_torch_converts(value, src, dst):
    folded = cast(const(value, src), dst)
    assert folded.op is Op.CONST
    assert folded.arg == torch.tensor(value, dtype=torch.int64).to(src).to(dst).item()


@PROPERTY
@given(st.floats(-1e9, 1e9, allow_nan=False), st.sampled_from([torch.int32, torch.int64, torch.bool]))
def test_float_to_integer_casts_of_constants_truncate_as_torch(value, dst):
    assert cast(const(value, torch.float64), dst).arg == torch.tensor(value, dtype=torch.float64).to(dst).item()
