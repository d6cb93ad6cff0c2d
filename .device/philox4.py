"""Does one Philox per four adjacent elements pay on the H100, and what do Triton's reshape/split/join cost?
Dropout (p 0.1) + residual + LayerNorm over bf16 16384x4096 rows (braze's row kernel, hand-written) and a
plain 1-D dropout of 64M bf16, each with: no random numbers, one Philox per element (word 0 of counter
offset: braze before 282e42d), one per element taking word offset % 4 of counter offset >> 2 (braze's
philox_rand now), one per group of four (reshape + split to the group's first lane, join back).
The Philox and the uniform map are braze's own helpers. python .device/philox4.py"""
import importlib.util
import os
import sys
import tempfile

import torch
import triton
import triton.language as tl

sys.path.insert(0, ".")
from braze.codegen.triton.helpers import HEADER, helper_source  # noqa: E402

_path = os.path.join(tempfile.mkdtemp(), "philox4_helpers.py")  # @triton.jit needs a source file
with open(_path, "w") as f:
    f.write(HEADER + helper_source(["philox_rand"]))
_spec = importlib.util.spec_from_file_location("philox4_helpers", _path)
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)
philox_words, uniform_of_word, philox_rand = _helpers.philox_words, _helpers.uniform_of_word, _helpers.philox_rand


@triton.jit
def rand_each(seed, offset):  # a whole Philox per element, its word 0
    c0, c1, c2, c3 = philox_words(seed, offset)
    return uniform_of_word(c0)


@triton.jit
def rand_group_2d(seed, offset):
    A: tl.constexpr = offset.shape[0]
    B: tl.constexpr = offset.shape[1]
    o = tl.reshape(offset, [A, B // 4, 2, 2])
    o, _ = tl.split(o)
    o, _ = tl.split(o)
    c0, c1, c2, c3 = philox_words(seed, o >> 2)
    return uniform_of_word(tl.reshape(tl.join(tl.join(c0, c2), tl.join(c1, c3)), [A, B]))


@triton.jit
def rand_group_1d(seed, offset):
    B: tl.constexpr = offset.shape[0]
    o = tl.reshape(offset, [B // 4, 2, 2])
    o, _ = tl.split(o)
    o, _ = tl.split(o)
    c0, c1, c2, c3 = philox_words(seed, o >> 2)
    return uniform_of_word(tl.reshape(tl.join(tl.join(c0, c2), tl.join(c1, c3)), [B]))


@triton.jit
def kept(seed, off, x, MODE: tl.constexpr, ROWS: tl.constexpr):
    """Dropout's keep mask (p 0.1) of the lanes at offsets ``off`` under variant MODE."""
    if MODE == 0:
        keep = x == x
    elif MODE == 1:
        keep = rand_each(seed, off) < 0.9
    elif MODE == 2:
        keep = philox_rand(seed, off) < 0.9
    elif ROWS:
        keep = rand_group_2d(seed, off) < 0.9
    else:
        keep = rand_group_1d(seed, off) < 0.9
    return keep


@triton.jit
def row_kernel(x_ptr, b_ptr, r_ptr, w_ptr, bb_ptr, seed_ptr, h_ptr, y_ptr, MODE: tl.constexpr,
               XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r0 = tl.arange(0, RBLOCK)[None, :]
    pos = r0 + xindex * RBLOCK
    x = tl.load(x_ptr + pos).to(tl.float32) + tl.load(b_ptr + r0).to(tl.float32)
    keep = kept(tl.load(seed_ptr), pos.to(tl.int64), x, MODE, True)
    h = tl.load(r_ptr + pos).to(tl.float32) + x * keep.to(tl.float32) * 1.1111111
    tl.store(h_ptr + pos, h.to(tl.bfloat16))
    mean = tl.sum(h, 1)[:, None] / RBLOCK
    d = h - mean
    var = tl.sum(d * d, 1)[:, None] / RBLOCK
    y = d / tl.sqrt(var + 1e-5) * tl.load(w_ptr + r0).to(tl.float32) + tl.load(bb_ptr + r0).to(tl.float32)
    tl.store(y_ptr + pos, y.to(tl.bfloat16))


@triton.jit
def flat_kernel(x_ptr, seed_ptr, y_ptr, MODE: tl.constexpr, XBLOCK: tl.constexpr):
    pos = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    x = tl.load(x_ptr + pos).to(tl.float32)
    keep = kept(tl.load(seed_ptr), pos.to(tl.int64), x, MODE, False)
    tl.store(y_ptr + pos, (x * keep.to(tl.float32) * 1.1111111).to(tl.bfloat16))


MODES = ["none", "each", "each_word", "group4"]
big = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
copy_ms = triton.testing.do_bench(lambda: big.clone())
copy = 2 * big.numel() * 4 / copy_ms / 1e6
print(f"copy 1 GiB: {copy:.0f} GB/s")
seed = torch.randint(0, 2 ** 62, (1,), device="cuda")
M, N = 16384, 4096
x, r, h, y = (torch.randn(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(4))
b, w, bb = (torch.randn(N, device="cuda", dtype=torch.bfloat16) for _ in range(3))
masks = {}
for xb, warps in ((1, 8), (1, 16), (2, 16)):
    for mode, label in enumerate(MODES):
        run = lambda: row_kernel[(M // xb,)](x, b, r, w, bb, seed, h, y, mode, xb, N, num_warps=warps)  # noqa: E731
        run()
        ms = triton.testing.do_bench(run, rep=200)
        masks[label] = (h != r).float().mean().item()
        print(f"row XBLOCK {xb} warps {warps:2d} {label:9s}: {ms * 1e3:6.1f} us "
              f"{4 * M * N * 2 / ms / 1e6 / copy * 100:5.1f} % of copy, kept {masks[label]:.4f}")
xf = torch.randn(1 << 26, device="cuda", dtype=torch.bfloat16)
yf = torch.empty_like(xf)
outs = {}
for xb, warps in ((1024, 4), (2048, 8), (4096, 8)):
    for mode, label in enumerate(MODES):
        run = lambda: flat_kernel[(xf.numel() // xb,)](xf, seed, yf, mode, xb, num_warps=warps)  # noqa: E731
        run()
        ms = triton.testing.do_bench(run, rep=200)
        outs[label] = yf.clone()
        print(f"flat XBLOCK {xb} warps {warps} {label:9s}: {ms * 1e3:6.1f} us "
              f"{2 * xf.numel() * 2 / ms / 1e6 / copy * 100:5.1f} % of copy")
print("group4 == each_word:", torch.equal(outs["group4"], outs["each_word"]))
