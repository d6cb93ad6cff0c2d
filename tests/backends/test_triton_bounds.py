"""Loads and stores stay inside the tensors a Triton kernel is given.

Under Triton's interpreter a pointer outside every tensor reads host memory quietly;
on a GPU it reads a neighbour's memory or faults with an illegal address (a 3-D
circular pad is such a case, below). ``config.triton_bounds_check``
makes the interpreter check every load and store its mask lets through; every test
runs with it on (conftest.py)."""
import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from braze.codegen.triton import interpret
from helpers import TRITON_ONLY, check

pytestmark = TRITON_ONLY


def _read_eight(src, dst):
    offsets = tl.arange(0, 8)
    tl.store(dst + offsets, tl.load(src + offsets))


def _read_eight_masked(src, dst, n):
    offsets = tl.arange(0, 8)
    tl.store(dst + offsets, tl.load(src + offsets, offsets < n), offsets < n)


def _add_eight(dst):
    tl.atomic_add(dst + tl.arange(0, 8), 1.0, sem="relaxed")


def test_the_check_catches_a_read_past_the_end_and_passes_a_masked_one():
    interpret.install()
    unmasked, masked = triton.jit(_read_eight), triton.jit(_read_eight_masked)  # (interpreted: decorated now)
    src, dst = torch.randn(4), torch.empty(8)
    with pytest.raises(Exception, match="a load reaches outside its tensors at 4 of 8 active lanes"):
        unmasked[(1,)](src, dst)
    masked[(1,)](src, dst, 4)
    torch.testing.assert_close(dst[:4], src)
    with pytest.raises(Exception, match="an atomic update reaches outside its tensors at 4 of 8"):
        triton.jit(_add_eight)[(1,)](torch.zeros(4))


@pytest.mark.parametrize("shape, pad", [
    ((1, 3, 3, 3, 3), (1, 1, 1, 1, 1, 1)),  # corners: one element read through three nested branches
    ((2, 3, 4, 5, 3), (2, 1, 0, 2, 1, 1)),
    ((1, 3, 4, 4), (-1, 1, -2, 1)),
    ((3, 3, 5, 5), (0, 2, 0, 1)),
])
def test_circular_pad_reads_only_its_input(shape, pad):
    """A load shared by several paths through nested ``where``s is masked by the union of
    the paths' conditions: masked by those they share, the 3-D pad's kernel read up to 5.6 KB
    before its input (forward) and past it (backward)."""
    x = torch.randn(*shape, requires_grad=True)
    check(lambda x: F.pad(x, pad, mode="circular"), x, grad=True)


def test_nested_cats_of_slices_read_only_their_inputs():
    a, b = torch.randn(6, 10, requires_grad=True), torch.randn(6, 4, requires_grad=True)
    check(lambda a, b: torch.cat([torch.cat([a[:, 7:], b, a[:, :3]], 1), a[:, 2:5] * 2], 1).sin(), a, b, grad=True)


@pytest.mark.parametrize("offset", [2, -3])
def test_a_diagonal_scatter_reads_its_source_only_inside_the_tile(offset):
    """The source of a diagonal is read where ``x1 - x0 == offset``, a condition along both
    axes of a tiled kernel: its load must be masked by both axes' extents, not only by those
    of its position (x0): lanes past the x extent read 2 elements past the source."""
    x, src = torch.randn(10, 10, requires_grad=True), torch.randn(10 - abs(offset), requires_grad=True)
    check(lambda x, s: torch.diagonal_scatter(x, s, offset), x, src, grad=True)
    check(lambda x: torch.diag(x, offset), torch.randn(10, 10, requires_grad=True), grad=True)


def test_a_branch_on_computed_values_does_not_mask_a_padded_load():
    """GPT-2's loss (HF's ForCausalLMLoss): the labels shifted by a pad, cross-entropy with
    ``ignore_index``. The pad's load sits in a branch whose other
    condition (label != -100) is a value the row kernel computes; masking the load by it
    would print that value before the kernel has it (a KeyError at code generation for
    4096 rows, and GPT-2's and LLaMA's training would run eagerly). Only index-bound terms
    mask a load."""
    vocab = 257

    def loss(logits, labels):
        labels = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous().view(-1)
        total = F.cross_entropy(logits.view(-1, vocab).float(), labels, ignore_index=-100, reduction="sum")
        return total / (labels != -100).sum()
    logits = torch.randn(8, 512, vocab, requires_grad=True)  # 4096 rows: the gather joins the row kernel
    labels = torch.randint(0, vocab, (8, 512))
    labels[0, :7] = -100
    check(loss, logits, labels, grad=True)
