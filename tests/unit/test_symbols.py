"""Symbolic sizes (``braze.ir.symbols``): what the ranges prove adds no guard, what they do
not is decided by the hints and recorded, and the arithmetic stays exact."""
import ast
import itertools

import pytest
import sympy

from braze.ir import simplify as S
from braze.codegen.triton.shapes import cdiv
from braze.ir import divisors, symbols, traced, unbacked
from braze.ir.expr import var
from braze.ir.symbols import Context, deciding, symbol


def context(**hints):
    return Context(dict(hints), {name: (2, symbols.INF) for name in hints})


def test_what_the_ranges_prove_adds_no_guard():
    s0 = symbol("s0")
    with deciding(context(s0=7)) as ctx:
        assert s0 - 1 < s0 and s0 >= 2 and s0 != 1 and not (s0 == 0)
        assert s0 * symbol("s0") - s0 >= 0  # s0*(s0 - 1): the common factor is taken out
        assert not ctx.guards


def test_an_undecided_comparison_is_decided_by_the_hint_and_guarded():
    s0, s1 = symbol("s0"), symbol("s1")
    with deciding(context(s0=7, s1=5)) as ctx:
        assert s0 > s1
        assert not (s0 * 4 < 16)
    assert list(ctx.guards) == ["(s0 - s1) > 0", "(4*s0 - 16) >= 0"]


def test_an_integer_use_specializes_with_a_guard_and_says_where():
    s0 = symbol("s0")
    with deciding(context(s0=7)) as ctx:
        assert list(range(s0)) == list(range(7))
    assert list(ctx.guards) == ["(s0 - 7) == 0"]
    assert ctx.specialized[0][1] == 7 and ctx.specialized[0][2].startswith("test_symbols.py:")


def test_a_decision_outside_a_compile_is_an_error():
    with pytest.raises(TypeError, match="outside a compile"):
        bool(symbol("s0") > symbol("s1"))


@pytest.mark.parametrize("values", [(2, 3), (5, 64), (97, 7)])
def test_division_and_remainder_are_exact(values):
    a, b = values
    s0, s1 = symbol("s0"), symbol("s1")
    env = {"s0": a, "s1": b}
    with deciding(context(s0=a, s1=b)):
        for num, den in [(s0 * s1 * 6 + s1, s1), (s0 * 16 + 5, 16), (s0 * 16 + 5, s0 * 16), (s0 + 3, 4),
                         (-1, s1)]:
            assert symbols.value_of(num // den, env) == symbols.value_of(num, env) // symbols.value_of(den, env)
            assert symbols.value_of(num % den, env) == symbols.value_of(num, env) % symbols.value_of(den, env)
    with deciding(context(s0=a, s1=b)) as ctx:
        assert (s0 * s1 * 6 + s1) // s1 == s0 * 6 + 1 and (s0 * 16 + 5) % 16 == 5
        assert not ctx.guards


def test_index_arithmetic_simplifies_with_symbolic_extents():
    s1 = symbol("s1")
    with deciding(context(s0=3, s1=5)) as ctx:
        x0, x1 = var("x0", symbol("s0")), var("x1", s1)
        flat = S.add(S.mul(x0, s1), x1)
        assert S.floordiv(flat, s1) is x0 and S.mod(flat, s1) is x1
        assert not ctx.guards


def test_the_divisor_chain_is_structural():
    s0, s1 = symbol("s0"), symbol("s1")
    with deciding(context(s0=3, s1=5)) as ctx:
        assert divisors.divisor_chain([s0 * s1 * 4, 1, s1 * 4, 4]) == [1, 4, s1 * 4, s0 * s1 * 4]
        assert divisors.divisor_chain([s0, s1]) is None  # either could be the larger
        assert not ctx.guards


def test_text_in_each_language_and_from_the_shape_env():
    s0 = symbol("s0")
    size = (s0 * 3 + 1) // 2
    assert f"{size:python}" == "((3*s0 + 1) // 2)"
    assert f"{size:c}" == "((3*s0 + 1) / 2)"  # C's truncation is the floor of a size
    assert f"{(s0 - 5) // 2:c}" == "i_floordiv<int64_t>((s0 - 5), 2)"  # may be negative
    assert f"{(s0 - 5) % 2:c}" == "i_mod<int64_t>((s0 - 5), 2)" and f"{s0 % 16:c}" == "(s0 % 16)"
    with symbols.language("python"):
        assert repr((s0, 4 * s0)) == "(s0, (4*s0))"
    x, y = sympy.symbols("s0 s1", integer=True, positive=True)
    assert traced.from_sympy(x * y + 2 * x) == s0 * symbol("s1") + 2 * s0
    from torch.utils._sympy.functions import CeilToInt, IntTrueDiv
    ceiling = traced.from_sympy(CeilToInt(IntTrueDiv(x, 32)))  # SDPA's logsumexp rows
    for n in (1, 31, 32, 33, 100):
        assert symbols.value_of(ceiling, {"s0": n}) == -(-n // 32)


def test_the_text_is_an_operand_in_any_expression():
    """A size printed into code (``x // {size}``) keeps its own grouping."""
    s0, s1 = symbol("s0"), symbol("s1")
    env = {"s0": 7, "s1": 12}
    with deciding(context(**env)):
        sizes = [s0 * s1, 2 * s0, s0 - s1, -s0, (s0 * 3 + 1) // 2, s1 % 5 + s0]
    for size in sizes:
        value = symbols.value_of(size, env)
        for template in ("1000003 // {}", "1000003 % {}", "-{} * 3", "{} * {}"):
            text = template.format(*[f"{size:python}"] * template.count("{}"))
            want = template.format(*[f"({value})"] * template.count("{}"))
            assert eval(text, {}, dict(env)) == eval(want), (text, want)


class _Truncating(ast.NodeTransformer):
    """Python's ``a // b`` and ``a % b`` as a Triton kernel computes them on integers
    (C's: the quotient truncated toward zero, the remainder with the dividend's sign)."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        name = {ast.FloorDiv: "tdiv", ast.Mod: "tmod"}.get(type(node.op))
        return ast.Call(ast.Name(name, ast.Load()), [node.left, node.right], []) if name else node


def _in_a_kernel(text: str, env: dict) -> int:
    tree = ast.fix_missing_locations(_Truncating().visit(ast.parse(text, mode="eval")))
    tdiv = lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # noqa: E731
    return eval(compile(tree, "<size>", "eval"), {"tdiv": tdiv, "tmod": lambda a, b: a - tdiv(a, b) * b}, env)


def test_the_python_text_of_a_size_means_the_same_in_a_triton_kernel():
    """A split reduction's chunk ``ceil(ceil(s0 / 132) / 32) * 32`` was printed through
    negative dividends (``-32*(((-s0) // 132) // 32)``): right in the wrapper, half the
    rows in a kernel (at s0 = 8192: 32 rather than 64 per program)."""
    s0 = symbol("s0")
    with deciding(context(s0=8192)):
        sizes = [-32 * ((-s0 // 132) // 32), (-s0) % 7, (s0 - 5) // 4, (3 - s0) % 4 + s0 // 3,
                 cdiv(cdiv(s0, 132), 32) * 32]
    assert "-" not in f"{sizes[-1]:python}"
    for size in sizes:
        for n in list(range(0, 70)) + [8191, 8192, 8193]:
            assert _in_a_kernel(f"{size:python}", {"s0": n}) == symbols.value_of(size, {"s0": n}), (size, n)


def test_a_chain_of_divisors_with_sums_of_terms():
    """A key cache's ``cat`` has extents ``s + 1``: ``64*(s+1)`` divides ``768*s + 768``."""
    s, t = symbols.symbol("s0"), symbols.symbol("s1")
    assert divisors.divisor_chain([768 * s + 768, 1, 64 * (s + 1), 64]) == [1, 64, 64 * s + 64, 768 * s + 768]
    assert divisors.divisor_chain([1, 64 * (s + 1), (s + 1) * 768 * t]) == [1, 64 * s + 64, 768 * t * s + 768 * t]
    assert divisors.divisor_chain([1, 64 * (s + 1), 768 * (s + 2)]) is None
    assert (768 * s + 768) % (64 * s + 64) == 0 and (768 * s + 768) // (64 * s + 64) == 12


def test_a_chain_of_products_of_sums_is_divided_exactly():
    """Slicing two dimensions gives extents ``s0 - 1`` and ``s1 - 1``; one node's loop nest
    needs ``s1 - 1`` to divide ``(s0 - 1)*(s1 - 1)``, a quotient that is no monomial."""
    s0, s1, s2 = symbol("s0"), symbol("s1"), symbol("s2")
    rows, cols = s0 - 1, s1 - 1
    with deciding(context(s0=5, s1=7, s2=4)) as ctx:
        assert divisors.divisor_chain([2 * rows * cols, 1, cols, rows * cols]) == [1, cols, rows * cols, 2 * rows * cols]
        half = (s2 + 1) // 2  # x[::2]: a floor atom as a factor
        assert divisors.divisor_chain([1, cols, half * cols * (s0 + 2)]) == [1, cols, half * cols * (s0 + 2)]
        assert (rows * cols) // cols == rows and (rows * cols) % cols == 0
        assert divisors.divisor_chain([1, s0 + 1, rows * cols]) is None  # s0 + 1 divides neither
        assert divisors.divisor_chain([1, rows, rows * cols + 1]) is None
    assert not ctx.guards


def test_sizes_survive_pickling():
    """A variant stored on disk keeps its symbolic sizes (``runtime/variant_cache.py``)."""
    import pickle
    s0, s1 = symbol("s0"), symbol("s1")
    size = s0 * 4 + symbols.floordiv(s1, 3) * s0 + symbols.modulo(s0 + 1, 8)
    again = pickle.loads(pickle.dumps(size))
    assert again == size and hash(again) == hash(size) and str(again) == str(size)


def unbacked_context(hi=40) -> Context:
    """``u0``: the size of ``x[mask]`` over 40 elements, known only once the graph runs."""
    ctx = Context({"s0": 7, "u0": 40}, {"s0": (2, symbols.INF), "u0": (0, hi)})
    ctx.unbacked = {"u0": "the size of dim 0 of index (aten.index.Tensor)"}
    return ctx


def test_an_unbacked_size_is_never_guarded():
    """Decided as if it were at least 2 (the general code), an open equality false, and any
    other open decision an error naming the symbol, what it stands for and the deciding line."""
    u0 = symbol("u0")
    with deciding(unbacked_context()) as ctx:
        assert u0 != 1 and not (u0 == 1) and u0 > 0 and not (u0 <= 1) and u0 < 41
        assert not (u0 == 5) and not (u0 == symbol("s0"))
        with pytest.raises(unbacked.UnbackedDecision) as raised:
            _ = u0 >= 5
        with pytest.raises(unbacked.UnbackedDecision):
            range(u0)  # (an integer use would guard it equal to a value)
    assert not ctx.guards and not ctx.specialized
    message = str(raised.value)
    assert "u0" in message and "aten.index.Tensor" in message and "test_symbols.py:" in message


def test_decide_takes_the_callers_general_choice_on_an_unbacked_size():
    u0, s0 = symbol("u0"), symbol("s0")
    with deciding(unbacked_context()) as ctx:
        assert unbacked.decide(u0, "==", 0, unbacked=True) and not unbacked.decide(u0, "<=", 1, unbacked=False)
        assert not unbacked.decide(u0, ">", 40, unbacked=True)  # (the range decides)
        assert unbacked.unbacked_in(u0 * s0) and not unbacked.unbacked_in(s0)
        assert unbacked.decide(s0, ">", 5, unbacked=False)  # (a size of an argument: guarded as ever)
        assert symbols.at_most(64, u0) == 40  # (its bound: no decision on it)
    assert list(ctx.guards) == ["(s0 - 5) > 0"]


def test_a_quotient_is_bounded_with_its_dividend():
    """``s - s // 2`` is ``(s + s % 2) / 2``: at least 1 for ``s >= 2``, which the bounds of
    ``s`` and ``s // 2`` taken apart do not show; every bound holds for every value in range."""
    s0, s1 = symbol("s0"), symbol("s1")
    assert symbols.bounds_of(s0 - s0 // 2, {"s0": (2, symbols.INF)}) == (1, symbols.INF)
    assert symbols.bounds_of((s0 + 1) // 2 - s0 // 2, {"s0": (0, symbols.INF)}) == (0, 1)
    sizes = [s0 - s0 // 2 - 1, s0 // 2 - s0, s1 * 3 - (s1 + 1) // 2 * 5, s0 // 3 + s1 - s0, s0 - 2 * (s0 // 2)]
    for size in sizes:
        for r0 in [(0, 10), (2, 40), (5, 7), (-5, 5)]:
            lo, hi = symbols.bounds_of(size, {"s0": r0, "s1": (2, 30)})
            for v0, v1 in itertools.product(range(r0[0], r0[1] + 1), range(2, 31)):
                assert lo <= symbols.value_of(size, {"s0": v0, "s1": v1}) <= hi, (size, r0, v0, v1)
