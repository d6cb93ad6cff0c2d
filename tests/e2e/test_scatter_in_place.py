"""Scatters into their base's storage (``braze.lower.in_place``): an in-place update of a
graph input writes only the rows it scatters, a chain of scatters shares one buffer, and
whatever else reads the tensor sees the value eager gives it, on both code generators.

The bytes a compiled graph writes are counted from its IR: a scatter writes one element
per element of its own iteration space, any other stored node all of its elements.
"""
import math

import torch

import braze


def _written_elements(fn, *args) -> int:
    graph = braze.explain(fn, *args).graphs[0].graph
    total = 0
    for node in graph.nodes:
        if getattr(node, "body", None) is None or node.layout is None and not node.mutates:
            continue
        total += math.prod(node.sizes)
    return total


def _same_as_eager(fn, *args):
    """Outputs and every input (mutated or not) equal to eager's, from equal copies."""
    eager_args = [a.clone() for a in args]
    braze_args = [a.clone() for a in args]
    torch._dynamo.reset()
    expected = fn(*eager_args)
    actual = torch.compile(fn, backend="braze")(*braze_args)
    for a, e in zip(actual if isinstance(actual, tuple) else (actual,),
                    expected if isinstance(expected, tuple) else (expected,)):
        torch.testing.assert_close(a, e)
    for k, (a, e) in enumerate(zip(braze_args, eager_args)):
        torch.testing.assert_close(a, e, msg=f"input {k} after the call")


def _add_rows(x, idx, src):
    x.index_add_(0, idx, src)
    return x


def _ten_updates(x, idx, src):
    for k in range(10):
        x.index_add_(0, (idx + k) % x.shape[0], src * k)
    x[idx] = 0.5
    return x


def _inputs(rows=50000, k=16):
    return torch.randn(rows, 64), torch.randint(0, rows, (k,)), torch.randn(k, 64)


def test_an_update_of_16_rows_writes_16_rows(backend):
    x, idx, src = _inputs()
    _same_as_eager(_add_rows, x, idx, src)
    assert _written_elements(_add_rows, x.clone(), idx, src) == 16 * 64


def test_ten_updates_share_the_input_with_no_copy(backend):
    x, idx, src = _inputs()
    _same_as_eager(_ten_updates, x, idx, src)
    assert _written_elements(_ten_updates, x.clone(), idx, src) == 11 * 16 * 64


def test_reads_before_and_after_an_update_see_eager_values(backend):
    x, idx, src = _inputs(rows=300)

    def before_and_after(x, idx, src):
        old = x * 2  # read before the update: the input's storage must not change under it
        x.index_add_(0, idx, src)
        return old, x + 1

    _same_as_eager(before_and_after, x, idx, src)


def test_a_functional_scatter_leaves_its_input(backend):
    x, idx, src = _inputs(rows=300)

    def functional(x, idx, src):
        return x.index_add(0, idx, src) * 2, x.index_put((idx,), src[:, 0].unsqueeze(1), accumulate=True)

    _same_as_eager(functional, x, idx, src)


def test_an_update_of_a_strided_input(backend):
    x, idx, src = _inputs(rows=300)
    _same_as_eager(_add_rows, x.t().contiguous().t(), idx, src)  # column-major: strides (1, 300)


def _copy_back(x, idx, src):
    old = x * 2  # read before the update: the scatter goes into a copy, copied back at the end
    x.index_add_(0, idx, src)
    return old, x + 1


def test_the_report_says_which_kernels_write_which_input_in_place(backend):
    """``explain`` and the IR name every write into an existing buffer: a scatter into the
    input, an overwriting ``index_put_``, a scatter into a copy and the copy back."""
    x, idx, src = _inputs(rows=300)

    def put(x, idx, src):
        x[idx] = src
        return x
    for fn, op in ((_add_rows, "+="), (put, "=")):
        report = braze.explain(fn, x.clone(), idx, src)
        assert [k.mutates for k in report.kernels if k.mutates] == [("arg0 (input 0)",)]
        assert "writes in place: arg0 (input 0)" in str(report)
        text = report.graphs[0].graph.to_text()
        assert "arg0: f32[300, 64] = input 0 strides [64, 1] (written in place by buf" in text
        assert " scatter, writes arg0 (input 0) in place: arg0[" in text and f"x1] {op} arg2[x0, x1]" in text
    report = braze.explain(_copy_back, x.clone(), idx, src)
    written = [k.mutates for k in report.kernels if k.mutates]
    assert len(written) == 2 and written[0][0].startswith("buf") and written[1] == ("arg0 (input 0)",)
    text = report.graphs[0].graph.to_text()
    assert f" scatter, writes {written[0][0]} in place: " in text
    assert f"writes arg0 (input 0) in place: arg0[x0, x1] = {written[0][0]}[x0, x1]" in text


def test_the_fusion_log_names_the_write_that_keeps_a_base_from_its_reader(backend):
    """The copy that is scattered into and the copy back read the same buffer, before and after
    the scatter: the scatter, which must run between them, is the reason they are not fused."""
    x, idx, src = _inputs(rows=300)
    report = braze.explain(_copy_back, x.clone(), idx, src)
    blocked = [r for r in report.fusion_log if r.reason is braze.Reason.MUTATION]
    assert blocked and all(not r.fused and r.detail.endswith(" in place") for r in blocked)
    assert "must run between them" in str(report)


# Updates through a view of the input: a reshape or a permutation of a dense tensor is its
# storage seen otherwise, so the scatter goes into the input (through the view's index map);
# so is a slice, whose update is merged back (``slice_scatter``); a view that picks elements
# (a select, a strided slice), or an input read before the update, keeps the copy.

def _add_through_flat_view(x, idx, src):
    x.view(-1).index_add_(0, idx, src)
    return x


def _add_rows_of_a_reshape(x, idx, src):
    x.view(-1, 32).index_add_(0, idx, src)
    return x


def _add_rows_of_a_transpose(x, idx, src):
    x.t().index_add_(0, idx, src)  # rows of x.t(): columns of x
    return x


def test_an_update_through_a_flat_view_writes_only_its_elements(backend):
    x, idx, src = torch.randn(50000, 64), torch.randint(0, 50000 * 64, (16,)), torch.randn(16)
    _same_as_eager(_add_through_flat_view, x, idx, src)
    assert _written_elements(_add_through_flat_view, x.clone(), idx, src) == 16


def test_an_update_through_a_reshape_writes_only_its_rows(backend):
    x, idx, src = torch.randn(50000, 64), torch.randint(0, 100000, (16,)), torch.randn(16, 32)
    _same_as_eager(_add_rows_of_a_reshape, x, idx, src)
    assert _written_elements(_add_rows_of_a_reshape, x.clone(), idx, src) == 16 * 32


def test_an_update_through_a_flat_view_of_a_column_major_input(backend):
    """``x.t()`` of a column-major ``x`` is contiguous: its flat view is ``x``'s storage."""
    x = torch.randn(64, 50000).t()  # strides (1, 50000)
    idx, src = torch.randint(0, 50000 * 64, (16,)), torch.randn(16)

    def update(x, idx, src):
        x.t().view(-1).index_add_(0, idx, src)
        return x
    _same_as_eager(update, x, idx, src)
    assert _written_elements(update, x.clone(memory_format=torch.preserve_format), idx, src) == 16


def test_an_update_of_the_rows_of_a_transposed_input(backend):
    """``x.t()`` is ``x``'s storage seen with permuted strides: its rows are written in ``x``."""
    x, idx, src = torch.randn(300, 64), torch.randint(0, 64, (16,)), torch.randn(16, 300)
    _same_as_eager(_add_rows_of_a_transpose, x, idx, src)
    assert _written_elements(_add_rows_of_a_transpose, x.clone(), idx, src) == 16 * 300


def test_an_update_through_a_view_with_reads_before_and_after(backend):
    x, idx, src = torch.randn(300, 64), torch.randint(0, 300 * 64, (16,)), torch.randn(16)

    def before_and_after(x, idx, src):
        old = x.sum(1)  # read before the update: the copy stays
        x.view(-1).index_add_(0, idx, src)
        return old, x[:, :3] * 2, x.view(-1)[:7]

    _same_as_eager(before_and_after, x, idx, src)


def test_an_update_through_a_view_of_an_intermediate(backend):
    x, idx, src = torch.randn(300, 64), torch.randint(0, 300 * 64, (16,)), torch.randn(16)

    def intermediate(x, idx, src):
        y = x * 2
        y.view(-1).index_add_(0, idx, src)
        return y.view(-1, 32) + 1, y.exp()

    _same_as_eager(intermediate, x, idx, src)


def test_an_update_through_a_view_of_part_of_the_input(backend):
    x, idx, src = torch.randn(300, 64), torch.randint(0, 299 * 32, (16,)), torch.randn(16)

    def part(x, idx, src):
        x[1:, ::2].reshape(-1).index_add_(0, idx, src)  # a copy in eager: x is left as it was
        x[1:].view(-1).index_add_(0, idx, src)
        return x

    _same_as_eager(part, x, idx, src)


def _add_rows_of_a_slice(x, idx, src):
    x[2:50].index_add_(0, idx, src)
    return x


def test_an_update_of_a_slice_writes_only_its_rows(backend):
    x, idx, src = torch.randn(50000, 64), torch.randint(0, 48, (16,)), torch.randn(16, 64)
    _same_as_eager(_add_rows_of_a_slice, x, idx, src)
    assert _written_elements(_add_rows_of_a_slice, x.clone(), idx, src) == 16 * 64


def test_updates_of_slices_along_either_dim_write_only_their_elements(backend):
    x, idx, src, columns = torch.randn(300, 64), torch.randint(0, 20, (16,)), torch.randn(16, 64), torch.randn(300, 16)

    def slices(x, idx, src, columns):
        x[:, 8:40].index_add_(1, idx, columns)
        x[100:].index_put_((idx,), src, accumulate=True)
        return x

    _same_as_eager(slices, x, idx, src, columns)
    assert _written_elements(slices, x.clone(), idx, src, columns) == 300 * 16 + 16 * 64


def test_an_update_of_a_slice_of_a_slice(backend):
    """The inner slice's update is merged into the outer slice, which is written back."""
    x, idx, src = torch.randn(300, 64), torch.randint(0, 20, (16,)), torch.randn(16, 64)

    def nested(x, idx, src):
        x[10:290][5:30].index_add_(0, idx, src)
        return x

    _same_as_eager(nested, x, idx, src)


def _assign_parts(step):
    def assign(cache, k, v):
        cache[:, step:step + 1] = k  # a KV cache's new position
        cache[:, :, :4] += v[:, :, :4]
        return cache
    return assign


def test_assignments_to_slices_write_only_their_elements(backend):
    """``x[:, i:i + 1] = k`` and ``x[:, :, :4] += v``: the parts, not all of ``x``."""
    cache, k, v = torch.randn(4, 512, 64), torch.randn(4, 1, 64), torch.randn(4, 512, 64)
    for step in (0, 37):
        _same_as_eager(_assign_parts(step), cache, k, v)
    assert _written_elements(_assign_parts(37), cache.clone(), k, v) == 4 * 64 + 4 * 512 * 4


def test_updates_of_a_select_and_of_a_slice_of_a_select_write_the_select(backend):
    """``x[2] = w`` writes its select; ``x[0, :, :4] += v`` (a ``slice_scatter`` into a
    select, merged back by a ``select_scatter``) writes all of its select, not yet only the
    slice: 2 × 512 × 64 elements of the 4 × 512 × 64."""
    cache, v = torch.randn(4, 512, 64), torch.randn(4, 512, 64)

    def update(cache, v):
        cache[2] = v[1]
        cache[0, :, :4] += v[0, :, :4]
        return cache
    _same_as_eager(update, cache, v)
    assert _written_elements(update, cache.clone(), v) == 2 * 512 * 64
