"""Gathers, concatenation, padding and creation ops against eager, through each code
generator: advanced indexing, ``gather`` and ``index_select`` (with gradients, which are
scatters), one-hot scatters fused into their reader, ``cat``/``pad``/``stack``, and
``arange``/``full``/``eye``/``linspace`` inside fused kernels."""
import torch
import torch.nn.functional as F

from helpers import check, rand


def test_indexing_family(backend):
    x = rand(10, 12, grad=True)
    i = torch.randint(-10, 10, (7,))
    j = torch.randint(0, 12, (10, 3))
    check(lambda x, i, j: (x[i], x[:, j[:, 0] % 12], x.gather(1, j), x.index_select(0, i % 10),
                           x[i, j[:7, 0]], x[i][:, None, :] * 2), x, i, j, grad=True)


def test_scatter_one_per_slice_fuses(backend):
    """One-hot scatters (cross-entropy's backward) are a ``where`` that fuses into its
    reader: one kernel, no scatter (the general forms: e2e/test_scatter.py)."""
    x, s, i = rand(6, 7), rand(6, 3), torch.randint(0, 7, (6, 1))
    compiled = check(lambda x, s, i: x.scatter(1, i, 2.5) + x.scatter(1, i, s) * 2, x, s, i)
    assert [k.shape for k in compiled.kernels] == ["pointwise"]


def test_cat_pad_scatter(backend):
    a, b = rand(4, 3, grad=True), rand(4, 5, grad=True)
    check(lambda a, b: (torch.cat([a, b.sin(), a], 1), F.pad(a, (2, 1, 0, 3), value=0.5),
                        F.pad(b, (-1, 2)), torch.stack([a, a * 2]), b[:, 1:4].sum()), a, b, grad=True)


def test_creation_ops(backend):
    x = rand(5, 4)
    check(lambda x: (x + torch.arange(4), torch.full((3, 2), 7), torch.zeros_like(x) + 1,
                     torch.ones(2, dtype=torch.int64) * 3, torch.arange(1.0, 3.0, 0.25), torch.eye(3) * 2,
                     torch.linspace(0, 1, 7) + 1, torch.tensor(3.0) + x), x)
