"""Graphs that update their inputs in place, against eager, through each code generator:
the update applied once, kernels that read an input's old value run before the kernel
that overwrites it (in one kernel or across kernels), and an optimizer step over tensors
of several sizes."""
import pytest
import torch

from helpers import rand


def test_in_place_on_input(backend):
    def fn(x, y):
        x.mul_(2).add_(y)
        return x.sum()
    x, y = rand(5, 6), rand(6)
    x2 = x.clone()
    expected = fn(x, y)
    actual = torch.compile(fn, backend="braze")(x2, y)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(x2, x)


@pytest.mark.parametrize("order", ["m_first", "p_first"])
def test_fused_input_mutations_read_old_values(order, backend):
    """One kernel overwrites m while another member still needs m's old value."""
    def update(m, p, g):
        p.add_(m * 2)
        m.mul_(0.9).add_(g)

    def fn(a, b, g):
        if order == "m_first":
            update(a, b, g)
        else:
            update(b, a, g)
    a, b, g = rand(1000), rand(1000), rand(1000)
    a2, b2 = a.clone(), b.clone()
    fn(a, b, g)
    torch.compile(fn, backend="braze")(a2, b2, g)
    torch.testing.assert_close(a2, a)
    torch.testing.assert_close(b2, b)


def test_read_of_an_input_before_its_overwrite_runs_first(backend):
    """``step.add_(1)`` then a use of ``step``: the use reads ``step + 1`` computed from the
    old value, so its kernel must run before the one that overwrites ``step`` (run after
    it, the increment is applied twice: Adam's bias corrections at the wrong step)."""
    def fn(step, x):
        step.add_(1)
        x.mul_(0.5 ** step)
    step, x = torch.tensor(float(torch.randint(0, 5, ()))), rand(37)
    step2, x2 = step.clone(), x.clone()
    fn(step, x)
    torch.compile(fn, backend="braze")(step2, x2)
    torch.testing.assert_close(step2, step)
    torch.testing.assert_close(x2, x)


def test_multi_tensor_optimizer_step(backend):
    """An SGD-with-momentum step over tensors of several sizes (one foreach kernel on cpp)."""
    shapes = [(100,), (37, 3), (1,), (5, 4, 3)]
    params, grads, state = ([rand(*s) for s in shapes] for _ in range(3))

    def step(params, grads, state):
        for p, g, m in zip(params, grads, state):
            m.mul_(0.9).add_(g, alpha=0.1)
            p.sub_(m * 0.01)
    expected_p, expected_m = [p.clone() for p in params], [m.clone() for m in state]
    step(expected_p, grads, expected_m)
    torch.compile(step, backend="braze")(params, grads, state)
    for a, b in zip(params + state, expected_p + expected_m):
        torch.testing.assert_close(a, b)
