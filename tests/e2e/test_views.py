"""Views and layouts against eager, through each code generator: every view op as an index
map inside a fused kernel (forward and backward), strided, broadcast and channels-last
inputs, transposes large enough to be tiled, tensors with a dimension of size 0 or 1, and
outputs that are inputs or views of them."""
import pytest
import torch

from helpers import check, rand


VIEWS = {
    "permute": lambda x: x.permute(2, 0, 1) * 2,
    "transpose_add": lambda x: x.transpose(0, 2) + 1,
    "expand": lambda x: x[:, :1].expand(4, 6, 5) + x,
    "reshape_merge": lambda x: x.reshape(24, 5).sin(),
    "reshape_split": lambda x: x.reshape(4, 3, 2, 5).cos(),
    "reshape_mixed": lambda x: x.reshape(2, 60).exp().reshape(8, 15),
    "view_of_transpose": lambda x: x.transpose(1, 2).reshape(4, 30) + 1,
    "slice": lambda x: x[1:3, ::2, 1:] * 3,
    "negative_slice": lambda x: x[-2:, 1:-1] + 1,
    "select": lambda x: x[2] + x[:, 3, :].sum(),
    "squeeze_unsqueeze": lambda x: x[:, :1].squeeze(1).unsqueeze(0) + 1,
    "t": lambda x: x[0].t() * x[1].t(),
    "unbind": lambda x: sum(x.unbind(1)),
    "split": lambda x: x.split(2, dim=1)[1] * x.split([1, 4], dim=2)[1].sum(),
    "diagonal": lambda x: torch.diagonal(x, 0, 1, 2) + 1,
    "flip": lambda x: x.flip(1) + 1,
    "roll": lambda x: x.roll(2, 1) + 1,
    "repeat": lambda x: x.repeat(2, 1, 1) + 1,
    "narrow": lambda x: x.narrow(1, 1, 3) * 2,
    "unfold": lambda x: x.unfold(2, 2, 1) + 1,
    "as_strided": lambda x: torch.as_strided(x.exp(), (3, 3), (5, 1), 2) + 1,
    "contiguous": lambda x: x.transpose(0, 1).contiguous(),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views(name, backend):
    x = rand(4, 6, 5, grad=True)
    check(VIEWS[name], x, grad=True)


def test_non_contiguous_and_broadcast_inputs(backend):
    base = rand(8, 12, 6)
    x = base.transpose(0, 2)[::2]  # strided, non-contiguous view as a graph input
    y = rand(1, 12, 1)
    z = rand(12, 1).expand(12, 8)  # stride 0
    check(lambda x, y, z: (x * y + 1, (x.sum(0) + z[:, :1]).relu(), x + z[None]), x, y, z)


def test_channels_last(backend):
    x = rand(2, 3, 5, 7).to(memory_format=torch.channels_last)
    w = rand(3, 1, 1)
    check(lambda x, w: (x * w).relu() + 1, x, w)


def test_transposes_in_tiles(backend):
    """Large enough to be tiled: ragged tile edges (not multiples of 8), two strided loads of
    different dtypes, integers, a third loop outside the tile, channels-last to contiguous."""
    x, y = rand(200, 130), rand(130, 200)
    d = rand(130, 200, dtype=torch.float64)
    i = torch.randint(-1000, 1000, (130, 200))
    check(lambda x, y, d, i: (x.t() + y, x.t() * d + i, i.t() * 3), x, y, d, i)
    j = torch.randint(-1000, 1000, (203, 67), dtype=torch.int32)  # 4 bytes: 8x8 register transposes
    check(lambda j, y: (j.t() * 3, j.t()[:, :64] + y[:67, :64]), j, y)
    p = rand(3, 70, 90)
    check(lambda p: p.permute(0, 2, 1).contiguous().exp() + p.sum(), p)
    c = rand(2, 70, 9, 10).to(memory_format=torch.channels_last)
    check(lambda c: (c * 2).contiguous(memory_format=torch.contiguous_format), c)


SHAPES = [(0,), (1,), (5, 0), (1, 1), (1, 7), (7, 1), (3, 1, 4), ()]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_edge_shapes(shape, backend):
    x = rand(*shape, grad=True)
    check(lambda x: (x.sin() * 2 + 1, x.sum(), (x * x).mean() if x.numel() else x.sum()), x, grad=True)


def test_outputs_that_alias_inputs_and_views(backend):
    x = rand(4, 6)
    check(lambda x: (x, x.t(), x[1:], (x * 2).view(24), (x + 1)[:, ::2]), x)
