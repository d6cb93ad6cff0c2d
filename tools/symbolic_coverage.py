"""pytest plugin (``-p symbolic_coverage``, with ``tools`` on ``PYTHONPATH``): which graphs with
symbolic sizes braze compiled symbolically and why the others went per shape.

    PYTHONPATH=.:tools python -m pytest -q -p no:cacheprovider -p symbolic_coverage \\
        tests/e2e/test_dynamic_numerics.py

Takes: the graphs the tests hand to ``runtime/symbolic.Symbolic`` (each forward or backward
graph, each code generator). Gives, at the end of the session: how many compiled
symbolically (in how many size classes; how many of those use a size as a plain number,
``SizeClass.specialized``, so that a class holds one value of it), how many went per shape, by
``Symbolic.fallback_reason`` (its first words, numbers and names of buffers, ops and symbols
folded so that one cause is one line), with the tests behind each reason; and, with
``BRAZE_COVERAGE_JSON=path``, one JSON record per graph (test, kind, classes, specializations,
reason, the traceback of the failure behind it) for a closer look.
"""
from __future__ import annotations

import collections
import json
import os
import re

import pytest

from braze.runtime import symbolic

_GRAPHS: list = []  # (test id, Symbolic) of the test running
_ROWS: list = []  # one record per graph of the tests done
_CURRENT = {"test": ""}


def pytest_configure(config):
    original = symbolic.Symbolic.__init__

    def recording_init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        _GRAPHS.append((_CURRENT["test"], self))

    symbolic.Symbolic.__init__ = recording_init


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _CURRENT["test"] = item.nodeid
    yield
    _ROWS.extend(_records())  # (no graph is kept alive past its test)
    _GRAPHS.clear()


def cause(reason: str) -> str:
    """A fallback reason with what varies between graphs of one cause folded: numbers,
    symbol names (``s0``), buffer and kernel names (``buf3``, ``k_2``), quoted texts."""
    text = re.sub(r"<function (\w+) at 0x[0-9a-f]+>", r"\1", reason)
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"\([^()]*\)", "(…)", text)
    text = re.sub(r"\b[a-z_]+\d+\b", "#", text)
    return re.sub(r"\d+", "#", text)[:160]


def _records() -> list:
    out = []
    for test, graph in _GRAPHS:
        sizes = [getattr(getattr(v.call, "compiled", None), "sizes", None) for v in graph.variants]
        out.append({"test": test, "kind": graph.kind, "variants": len(graph.variants),
                    "specialized": sorted({f"{s} = {v} ({where})" for c in sizes if c is not None
                                           for s, v, where in c.specialized}),
                    "reason": graph.fallback_reason, "trace": getattr(graph, "fallback_trace", "")})
    return out


def summary(rows: list) -> list:
    called = [r for r in rows if r["variants"] or r["reason"]]
    symbolic_rows = [r for r in called if not r["reason"]]
    classes = collections.Counter(r["variants"] for r in symbolic_rows)
    lines = [f"symbolic-size graphs: {len(called)} compiled ({len(rows) - len(called)} never called)",
             f"  symbolically: {len(symbolic_rows)} "
             f"(size classes: {', '.join(f'{n}: {c}' for n, c in sorted(classes.items()))})",
             f"    of which with a size used as a plain number (one value of it per class): "
             f"{sum(1 for r in symbolic_rows if r.get('specialized'))}",
             f"  per shape: {len(called) - len(symbolic_rows)}"]
    by_cause = collections.defaultdict(list)
    for r in called:
        if r["reason"]:
            by_cause[cause(r["reason"])].append(r)
    for text, group in sorted(by_cause.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {len(group):5d}  {text}")
        for r in group[:3]:
            lines.append(f"           e.g. {r['test']} ({r['kind']})")
    return lines


def pytest_terminal_summary(terminalreporter):
    rows = _ROWS + _records()
    terminalreporter.section("symbolic sizes: coverage")
    for line in summary(rows):
        terminalreporter.write_line(line)
    path = os.environ.get("BRAZE_COVERAGE_JSON")
    if path:
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)
        terminalreporter.write_line(f"records: {path}")
