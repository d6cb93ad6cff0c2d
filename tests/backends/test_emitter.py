"""The code generators' shared emitter (``braze/codegen/emitter.py``) and shape tables: lines
at explicit indents stepped by the language's unit, fresh names from one counter shared
where asked, a print scope's memo seeded from its preset, and one entry per kernel shape
in each backend's ``SHAPE_EMITTERS``."""
import itertools

import pytest

from braze.codegen.cpp import kernel as cpp_kernel
from braze.codegen.emitter import CPP_INDENT, PYTHON_INDENT, Emitter, PrintScope


def test_lines_at_indents():
    em = Emitter(CPP_INDENT, ["head"])
    inner = em.deeper("  ", 2)
    em.emit(inner, "a;")
    em.emit_lines(em.shallower(inner), ["b;", "c;"])
    assert inner == "      "
    assert em.text() == "head\n      a;\n    b;\n    c;"


def test_fresh_names_share_a_counter():
    first = Emitter(PYTHON_INDENT)
    assert first.assign("    ", "tmp", "x + 1") == "tmp0"
    second = Emitter(PYTHON_INDENT, counter=first.counter)
    assert second.fresh("partial") == "partial1"
    assert first.lines == ["    tmp0 = x + 1"]
    c = Emitter(CPP_INDENT, counter=itertools.count(5))
    assert c.assign("", "t", "1.0f", "const float ", ";") == "t5"
    assert c.lines == ["const float t5 = 1.0f;"]


def test_print_scope_starts_from_its_preset():
    preset = {1: "t0"}
    scope = PrintScope(Emitter(CPP_INDENT), "  ", preset)
    scope.memo[2] = "t1"
    assert scope.memo == {1: "t0", 2: "t1"} and preset == {1: "t0"}


def test_every_cpp_shape_has_an_emitter():
    assert set(cpp_kernel.SHAPE_EMITTERS) == {"pointwise", "tiled", "row", "column", "split", "scatter", "scan"}


def test_every_triton_shape_has_an_emitter():
    pytest.importorskip("triton")
    from braze.codegen.triton import kernel as triton_kernel
    assert set(triton_kernel.SHAPE_EMITTERS) == {"pointwise", "tiled", "row", "row_loop", "column", "split", "scan"}
