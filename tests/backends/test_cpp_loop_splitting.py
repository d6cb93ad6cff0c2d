"""The C++ backend's innermost loops cut into pieces: where a condition on the innermost
index flips (``cat``, ``pad``, rotary embeddings), one ``omp simd`` loop per piece and no
clamped loads left (one loop when there would be more cuts than pieces, or the condition
is not index arithmetic); and vector-math calls (``erff``) computed in a loop of their own
when their argument is live across them (GELU after a LayerNorm), not when only the
call's result is (softmax's ``exp``). Values against eager on fresh random inputs."""
import math
import re

import pytest
import torch
import torch.nn.functional as F

import braze
from braze.codegen.cpp.lanes import CHUNK
from helpers import check, compiled_source

LANES = braze.config.cpp_lanes


@pytest.fixture(autouse=True)
def cpp():
    with braze.config.patch(cpu_backend="cpp"):
        yield


def rotary(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


@pytest.mark.parametrize("dim", [128, 7, 2])
def test_rotary_in_pieces(dim):
    """The innermost loop cut where ``cat`` switches inputs: no clamped loads left."""
    x, cos, sin = torch.randn(2, 3, 33, dim), torch.randn(33, dim), torch.randn(33, dim)
    compiled = check(rotary, x, cos, sin, expect_kernels=1)
    source = compiled.graphs[0].source
    source = source[source.index("// kernel"):]
    assert "idx_clamp" not in source and source.count("#pragma omp simd") == 2, source


def test_rotary_in_pieces_at_a_symbolic_half():
    """With every size symbolic the cut is ``s - s // 2``: two pieces of symbolic extents, no
    select and no clamped load in either, for even and odd widths alike (one variant)."""
    from helpers import Compiled
    g = torch.compile(rotary, backend="braze", dynamic=True)
    with Compiled() as compiled:
        for dim in (128, 96, 99):  # (one class: below 64 the tiles decide otherwise)
            x, cos, sin = torch.randn(2, 3, 33, dim), torch.randn(33, dim), torch.randn(33, dim)
            torch.testing.assert_close(g(x, cos, sin), rotary(x, cos, sin))
    assert len(compiled.graphs) == 1 and compiled.graphs[0].sizes is not None
    source = compiled.graphs[0].source
    source = source[source.index("// kernel"):]
    assert "idx_clamp" not in source and " ? " not in source, source
    assert set(re.findall(r"int64_t (x\d+_\d+) = ", source)) == {"x2_0", "x2_1"}, source  # (blocks and tails)
    assert source.count("rb += 16") == 2  # each piece of a symbolic extent: blocks of a constant count


@pytest.mark.parametrize("fn, pieces", [
    (lambda x, y: F.pad(x, (2, 3)) * 2, 3),
    (lambda x, y: torch.cat([x, y, x.exp()], -1), 3),
    (lambda x, y: torch.cat([x, y] * 3, -1) + 1, 6),
    (lambda x, y: torch.cat([x, y] * 5, -1) + 1, 1),  # more cuts than pieces: one loop
    (lambda x, y: torch.where(torch.arange(x.shape[-1]) == 4, x, y), 1),  # not index arithmetic
], ids=["pad", "cat3", "cat6", "cat10", "arange_eq"])
def test_last_dim_conditions(fn, pieces):
    x, y = torch.randn(5, 4, 9), torch.randn(5, 4, 9)
    x[0, 0, 0] = math.nan
    compiled = check(fn, x, y, expect_kernels=1)
    source = compiled.graphs[0].source
    source = source[source.index("// kernel"):]
    assert source.count("#pragma omp simd") == pieces, source
    assert pieces == 1 or "idx_clamp(" not in source, source


def _own_loop_calls(source: str, name: str) -> bool:
    """Is some ``name`` call alone in an ``omp simd`` loop (``calls.BlockCalls``)?"""
    lines = source.splitlines()
    return any(name + "(" in line and "[l] = " in line and lines[k - 2].strip() == "#pragma omp simd"
               for k, line in enumerate(lines))


@pytest.mark.parametrize("n", [3, 7, LANES, LANES * CHUNK + 3, 1024])
def test_layer_norm_gelu_calls_erf_in_a_loop_of_its_own(n):
    """GELU's input is live across ``erff``: each block of lanes (4 or more) computes it
    and the calls first; rows shorter than 4 have no blocks."""
    x, w, b = torch.randn(37, n) * 3, torch.randn(n), torch.randn(n)
    fn = lambda x, w, b: F.gelu(F.layer_norm(x, (n,), w, b))  # noqa: E731
    compiled = check(fn, x, w, b, expect_kernels=1)
    source = compiled.graphs[0].source
    assert _own_loop_calls(source, "erff") == (n >= 4), source


def test_layer_norm_gelu_backward_with_calls_in_their_own_loop():
    x = torch.randn(29, 1000, requires_grad=True)
    w, b = torch.randn(1000, requires_grad=True), torch.randn(1000, requires_grad=True)
    check(lambda x, w, b: F.gelu(F.layer_norm(x, (1000,), w, b)), x, w, b)


def test_softmax_keeps_exp_in_its_loop():
    """Nothing but exp's result is live across it: a loop of its own would only add traffic."""
    _, source = compiled_source(lambda x: torch.softmax(x, -1), torch.randn(13, 1000))
    assert "expf(" in source and not _own_loop_calls(source, "expf"), source
