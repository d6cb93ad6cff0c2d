"""The C++ kernels read their thread count at each call, not when they are compiled.

A graph compiled under one ``torch.set_num_threads`` runs under another with the new
count: reductions whose threads keep partials (a split reduction over few long rows,
column sums) size them by the count of the call, and match eager under each. The knob
``num_threads`` fixes the count instead.
"""
import re

import pytest
import torch

import braze


def _split_rows(x):
    return x.sum(1), x.amax(1)


def _column_sums(x):
    return torch.softmax(x, -1), x.sum(0)


CASES = {"split rows": (_split_rows, (2, 1 << 16)), "column sums": (_column_sums, (4096, 64))}


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_graph_compiled_at_one_count_runs_at_others(name, threads):
    fn, shape = CASES[name]
    x = torch.randn(shape)
    threads(2)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="braze")
    source = braze.explain(fn, x).graphs[0].source
    assert "[b_threads]" in source  # the threads' partials
    assert set(re.findall(r"num_threads\((\w+)\)", source)) == {"b_threads"}
    for count in (2, 1, 3):
        threads(count)
        for actual, expected in zip(compiled(x), fn(x)):
            torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_the_knob_fixes_the_count():
    with braze.config.patch(num_threads=3):
        source = braze.explain(_column_sums, torch.randn(4096, 64)).graphs[0].source
    assert "const int b_threads = 3;" in source
