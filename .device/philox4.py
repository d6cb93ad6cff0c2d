"""Does one Philox per four adjacent elements pay on the H100, and what do Triton's reshape/split/join cost?
Dropout (p 0.1) + residual + LayerNorm over bf16 16384x4096 rows (braze's row kernel, hand-written) and a
plain 1-D dropout of 64M bf16, each with: no random numbers, one Philox per element (braze now), one
Philox per group of four (words 0-3 of counter offset >> 2, reshape + split to the group's first lane,
join back). python .device/philox4.py"""
import torch, triton
import triton.language as tl


@triton.jit
def philox4(seed, offset):
    seed = seed.to(tl.uint64)
    k0 = (seed & 0xFFFFFFFF).to(tl.uint32)
    k1 = (seed >> 32).to(tl.uint32)
    c0 = offset.to(tl.uint32)
    c1 = (offset >> 32).to(tl.uint32)
    c2 = c0 * 0
    c3 = c2
    for _ in tl.static_range(10):
        a0 = c0
        a2 = c2
        c0 = tl.umulhi(0xCD9E8D57, a2) ^ c1 ^ k0
        c2 = tl.umulhi(0xD2511F53, a0) ^ c3 ^ k1
        c1 = a2 * 0xCD9E8D57
        c3 = a0 * 0xD2511F53
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    return c0, c1, c2, c3


@triton.jit
def uniform(w):
    x = w.to(tl.int32, bitcast=True)
    x = tl.where(x < 0, ~x, x)
    return x.to(tl.float32) * 4.6566127342e-10


@triton.jit
def rand_each(seed, offset):
    c0, c1, c2, c3 = philox4(seed, offset)
    return uniform(c0)


@triton.jit
def rand_each_word(seed, offset):  # word offset & 3 of counter offset >> 2, per element
    c0, c1, c2, c3 = philox4(seed, offset >> 2)
    j = offset & 3
    return uniform(tl.where(j < 2, tl.where(j == 0, c0, c1), tl.where(j == 2, c2, c3)))


@triton.jit
def rand_group_2d(seed, offset):
    A: tl.constexpr = offset.shape[0]
    B: tl.constexpr = offset.shape[1]
    o = tl.reshape(offset, [A, B // 4, 2, 2])
    o, _ = tl.split(o)
    o, _ = tl.split(o)
    c0, c1, c2, c3 = philox4(seed, o >> 2)
    return uniform(tl.reshape(tl.join(tl.join(c0, c2), tl.join(c1, c3)), [A, B]))


@triton.jit
def rand_group_1d(seed, offset):
    B: tl.constexpr = offset.shape[0]
    o = tl.reshape(offset, [B // 4, 2, 2])
    o, _ = tl.split(o)
    o, _ = tl.split(o)
    c0, c1, c2, c3 = philox4(seed, o >> 2)
    return uniform(tl.reshape(tl.join(tl.join(c0, c2), tl.join(c1, c3)), [B]))


@triton.jit
def row_kernel(x_ptr, b_ptr, r_ptr, w_ptr, bb_ptr, seed_ptr, h_ptr, y_ptr, MODE: tl.constexpr,
               XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r0 = tl.arange(0, RBLOCK)[None, :]
    pos = r0 + xindex * RBLOCK
    x = tl.load(x_ptr + pos).to(tl.float32) + tl.load(b_ptr + r0).to(tl.float32)
    seed = tl.load(seed_ptr)
    off = pos.to(tl.int64)
    if MODE == 0:
        keep = x == x
    elif MODE == 1:
        keep = rand_each(seed, off) < 0.9
    elif MODE == 2:
        keep = rand_each_word(seed, off) < 0.9
    else:
        keep = rand_group_2d(seed, off) < 0.9
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
    seed = tl.load(seed_ptr)
    off = pos.to(tl.int64)
    if MODE == 0:
        keep = x == x
    elif MODE == 1:
        keep = rand_each(seed, off) < 0.9
    elif MODE == 2:
        keep = rand_each_word(seed, off) < 0.9
    else:
        keep = rand_group_1d(seed, off) < 0.9
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
