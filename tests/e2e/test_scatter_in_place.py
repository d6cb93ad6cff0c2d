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
