"""A small slice of the reduction sweep (benchmarks/sweep_grid.py), for correctness.

Points drawn from a fixed seed at a few thousand elements each: every reduction kind, axis,
layout and dtype the sweep draws, with prologues and epilogues, compiled by braze on both
backends and compared with eager (``benchmarks.measure.compare``: integer results exactly,
floats within their dtype's tolerance of eager's largest value).
"""
import pytest
import torch

from benchmarks.measure import compare
from benchmarks.sweep_grid import KINDS, build, draw
from tests.helpers import Compiled

POINTS = draw(seed=7, count=36, elements=3000)


def test_the_slice_draws_every_kind():
    assert {p.kind for p in POINTS} == set(KINDS)


@pytest.mark.parametrize("point", POINTS, ids=lambda p: p.name.replace(" ", "-"))
def test_a_sweep_point_matches_eager(backend, point):
    fn, args, _ = build(point, "cpu")
    expected = fn(*args)
    with Compiled() as compiled:
        actual = torch.compile(fn, backend="braze")(*args)
    assert compiled.graphs and not compiled.failures, compiled.failures
    ok, _, note = compare(actual, expected)
    assert ok, note
