"""C++ scatters shared by threads (``codegen/cpp/scatter.py``): each thread owns a range of the
target and walks every index in order, so each element is written by one thread in index
order. The result is the one-thread result bit for bit at any thread count, and eager's
sequential result (eager under one thread): sums of duplicate indices in index order (floats
within the usual tolerance, integers exactly), the last write winning where a scatter
overwrites. Small scatters run in one thread without opening a parallel region.
"""
import pytest
import torch

import braze
from benchmarks.scatter_in_place import OPS
from braze.codegen.cpp.scatter import SCATTER_PARALLEL_MIN_WORK


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


_index_add = OPS["index_add_"]


def _put(x, idx, src):
    x.index_put_((idx,), src)
    return x


def _scatter_add_rows(x, idx, src):
    """A fused prologue; exact in any lane (a vector ``sin`` may round otherwise than the
    scalar one of a loop's remainder, which a thread's range moves)."""
    return x.scatter_add(0, idx[:, None].expand(-1, x.shape[1]), src * 2)


def _scatter_rows(x, idx, src):
    return x.scatter(0, idx[:, None].expand(-1, x.shape[1]), src)


def _add_flat(x, idx, src):
    """A 1-D target: no row along which to clip, each element tests its position."""
    x.view(-1).index_add_(0, idx, src.view(-1)[:idx.numel()])
    return x


CASES = {"index_add_": _index_add, "index_put_ accumulate": OPS["index_put_"], "index_put_": _put,
         "scatter_add": _scatter_add_rows, "scatter": _scatter_rows, "index_add_ 1-D": _add_flat}


def _inputs(dtype, rows, columns, k):
    """``k`` indices into ``rows`` rows: many duplicates, so that order matters."""
    make = (lambda *s: torch.randn(*s, dtype=dtype)) if dtype.is_floating_point else \
        (lambda *s: torch.randint(-1000, 1000, s, dtype=dtype))
    idx = torch.randint(0, rows, (k,))
    if k > rows * columns:  # (a 1-D case takes k indices into all the elements)
        idx = torch.randint(0, rows * columns, (k,))
    return make(rows, columns), idx, make(k, columns)


def _run(fn, x, idx, src, count, threads):
    threads(count)
    out = fn(x.clone(), idx, src)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_threads_give_the_sequential_result(name, dtype, threads):
    fn = CASES[name]
    columns = 37  # rows of 37 elements: the threads' ranges (whole lines) split rows
    k = 4 * SCATTER_PARALLEL_MIN_WORK // columns if name != "index_add_ 1-D" else 2 * SCATTER_PARALLEL_MIN_WORK
    x, idx, src = _inputs(dtype, 300, columns, k)
    compiled = torch.compile(fn, backend="braze")
    source = braze.explain(fn, x.clone(), idx, src).graphs[0].source
    assert "#pragma omp parallel num_threads(b_threads)" in source and "b_own_lo" in source
    expected = _run(fn, x, idx, src, 1, threads)  # eager, one thread: in index order
    actual = {count: _run(compiled, x, idx, src, count, threads) for count in (1, 2, 3)}
    assert torch.equal(actual[1], actual[2]) and torch.equal(actual[1], actual[3])
    if dtype.is_floating_point and name not in ("index_put_", "scatter"):
        torch.testing.assert_close(actual[2], expected)
    else:
        assert torch.equal(actual[2], expected)  # integers, and the last write of each element


def test_a_small_scatter_opens_no_parallel_region(threads):
    x, idx, src = _inputs(torch.float32, 1000, 64, 16)
    source = braze.explain(_index_add, x, idx, src).graphs[0].source
    assert "omp parallel" not in source and "b_own_lo" not in source
    threads(2)
    torch.testing.assert_close(torch.compile(_index_add, backend="braze")(x.clone(), idx, src),
                               _index_add(x.clone(), idx, src))


def test_a_row_check_runs_once_per_row_before_a_simd_loop():
    """The index and its check vary by row only: computed before the row's loop, which
    stays ``omp simd`` (a check inside it, a conditional call, would keep it scalar)."""
    x, idx, src = _inputs(torch.float32, 1000, 64, 4096)
    source = braze.explain(_index_add, x, idx, src).graphs[0].source
    lines = source[source.index("kernel0: scatter"):].splitlines()
    check = next(k for k, line in enumerate(lines) if "b_check_index" in line)
    simd = next(k for k, line in enumerate(lines) if "omp simd" in line)
    assert check < simd and "for (int64_t x1 = b_lo; x1 < b_hi; x1++)" in lines[simd + 1]


def test_an_out_of_range_index_raises_under_threads(threads):
    x, idx, src = _inputs(torch.float32, 300, 37, 4096)
    idx[1000] = 300
    threads(2)
    with pytest.raises(RuntimeError, match="300"):
        torch.compile(_index_add, backend="braze")(x, idx, src)
