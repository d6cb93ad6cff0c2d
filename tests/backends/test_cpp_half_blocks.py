"""float16 converted a block of lanes at a time (``codegen/cpp/halves.py``), at every x86 ISA level.

The prelude's ``b_widen_f16`` / ``b_narrow_f16`` / ``b_round_f16`` take AVX-512's and F16C's
instructions where the build enables them and the portable bit arithmetic elsewhere. Each
is built here for x86-64-v2 (no F16C), v3 (F16C, AVX2) and v4 (AVX-512), linked with
``-z defs``; the builds this machine can run convert all 65,536 halves and a million random
floats plus every rounding boundary and float denormals, bit for bit against eager (NaNs:
NaN-ness only, eager's payloads differ by position), also with DAZ and FTZ set, and round
the floats through float16 and back. Then
row and pointwise kernels that convert in blocks, with tails, against eager.
"""
import ctypes
import platform
import shlex
import subprocess

import pytest
import torch

import braze
from braze import config
from braze.codegen.cpp.build import flags
from braze.codegen.cpp.prelude import prelude
from tests.backends.test_cpp_half_conversions import _boundaries, _same_bits

x86 = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 ISA levels")

# Features each level adds that its code may use (the kernel's names in /proc/cpuinfo).
LEVELS = {
    "x86-64-v2": {"sse4_1", "sse4_2", "ssse3", "popcnt"},
    "x86-64-v3": {"sse4_1", "sse4_2", "ssse3", "popcnt", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe"},
    "x86-64-v4": {"sse4_1", "sse4_2", "ssse3", "popcnt", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe",
                  "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"},
}

# Blocks of 16 (the kernels' lanes), then the rest of n in one shorter call, as a tail
# (8 at a time, then one by one).
HARNESS = r"""
extern "C" void widen(const f16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) b_widen_f16(src + i, dst + i, 16);
  b_widen_f16(src + i, dst + i, n - i);
}
extern "C" void narrow(const float* src, f16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) b_narrow_f16(src + i, dst + i, 16);
  b_narrow_f16(src + i, dst + i, n - i);
}
extern "C" void round_trip(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) b_round_f16(src + i, dst + i, 16);
  b_round_f16(src + i, dst + i, n - i);
}
// The same under DAZ and FTZ (MXCSR bits 6 and 15), restored after
extern "C" void widen_flushing(const f16_t* src, float* dst, int64_t n) {
  const unsigned saved = __builtin_ia32_stmxcsr();
  __builtin_ia32_ldmxcsr(saved | 0x8040);
  widen(src, dst, n);
  __builtin_ia32_ldmxcsr(saved);
}
extern "C" void narrow_flushing(const float* src, f16_t* dst, int64_t n) {
  const unsigned saved = __builtin_ia32_stmxcsr();
  __builtin_ia32_ldmxcsr(saved | 0x8040);
  narrow(src, dst, n);
  __builtin_ia32_ldmxcsr(saved);
}
extern "C" int hardware() {  // the widest conversions the build takes
#if defined(__AVX512F__)
  return 16;
#elif defined(__F16C__)
  return 8;
#else
  return 0;
#endif
}
"""


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


def _build(tmp_path, level: str) -> str:
    src = tmp_path / f"halves-{level}.cpp"
    src.write_text(prelude(HARNESS) + HARNESS)
    out = tmp_path / f"halves-{level}.so"
    own = [f for f in flags() if not f.startswith(("-march", "-mtune"))]
    cmd = [config.cxx, *own, f"-march={level}", "-o", str(out), str(src), "-lmvec", "-lm", "-Wl,-z,defs"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{shlex.join(cmd)}\n{done.stderr[-3000:]}"
    return str(out)


def _call(fn, src: torch.Tensor, dtype) -> torch.Tensor:
    out = torch.empty(src.numel(), dtype=dtype)
    fn(ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(out.data_ptr()), ctypes.c_int64(src.numel()))
    return out


@x86
@pytest.mark.parametrize("level", sorted(LEVELS))
def test_block_conversions_are_exact_at_each_isa_level(tmp_path, level):
    path = _build(tmp_path, level)
    if not LEVELS[level] <= _cpu_flags():
        pytest.skip(f"this CPU cannot run {level} code (built and linked only)")
    lib = ctypes.CDLL(path)
    assert lib.hardware() == {"x86-64-v2": 0, "x86-64-v3": 8, "x86-64-v4": 16}[level]
    halves = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    halves = torch.cat([halves, halves[-13:]])  # a tail of 8 and 5
    _same_bits(_call(lib.widen, halves, torch.float32), halves.float(), torch.int32)
    _same_bits(_call(lib.widen_flushing, halves, torch.float32), halves.float(), torch.int32)
    generator = torch.Generator().manual_seed(11)
    bits = torch.randint(-2 ** 31, 2 ** 31, (1 << 20,), dtype=torch.int64, generator=generator)
    denormals = torch.randint(1, 1 << 23, (4096,), dtype=torch.int32, generator=generator)
    floats = torch.cat([_boundaries(), bits.to(torch.int32).view(torch.float32), denormals.view(torch.float32),
                        (denormals | -2 ** 31).view(torch.float32), _boundaries()[:13]])
    _same_bits(_call(lib.narrow, floats, torch.float16), floats.half(), torch.int16)
    _same_bits(_call(lib.narrow_flushing, floats, torch.float16), floats.half(), torch.int16)
    _same_bits(_call(lib.round_trip, floats, torch.float32), floats.half().float(), torch.int32)


def _specials(shape) -> torch.Tensor:
    """Random halves with NaNs, infinities, subnormals, signed zeros and the largest half mixed in."""
    x = torch.randn(shape) * 100
    flat = x.view(-1)
    picks = torch.randint(0, flat.numel(), (flat.numel() // 8,))
    values = torch.tensor([float("nan"), float("inf"), -float("inf"), 2.0 ** -20, -(2.0 ** -24), -0.0, 65504.0, 1e-30])
    flat[picks] = values[torch.randint(0, len(values), (picks.numel(),))]
    return x.half()


def _source(fn, *args) -> str:
    return "\n".join(g.source for g in braze.explain(fn, *args).graphs)


@pytest.mark.parametrize("shape", [(64, 512), (33, 1000), (7, 37)])
def test_row_kernel_converts_blocks_bit_for_bit(shape):
    def shifted(x):
        f = x.float()
        return (f - f.amax(-1, keepdim=True)).half(), (f * 0.5).half()
    x = _specials(shape)
    assert "b_widen_f16(" in _source(shifted, x) and "b_narrow_f16(" in _source(shifted, x)
    for actual, expected in zip(braze.compile(shifted)(x), shifted(x)):
        _same_bits(actual.view(-1), expected.view(-1), torch.int16)


@pytest.mark.parametrize("shape", [(1 << 16,), (300, 129), (5, 24)])
def test_pointwise_kernel_converts_blocks_bit_for_bit(shape):
    def add(a, b):
        return a + b, a.float() * 3.0
    a, b = _specials(shape), _specials(shape)
    assert "b_widen_f16(" in _source(add, a, b) and "b_narrow_f16(" in _source(add, a, b)
    for actual, expected in zip(braze.compile(add)(a, b), add(a, b)):
        _same_bits(actual.view(-1), expected.view(-1), torch.int16 if actual.dtype is torch.float16 else torch.int32)


@pytest.mark.parametrize("shape", [(1 << 16,), (300, 129)])
def test_float32_rounded_through_half_bit_for_bit(shape):
    def scaled(x):
        return x.half() * 2, x.half().float() - x
    x = _specials(shape).float() * 1.001  # between halves, and past the largest one
    assert "b_round_f16(" in _source(scaled, x)
    for actual, expected in zip(braze.compile(scaled)(x), scaled(x)):
        _same_bits(actual.view(-1), expected.view(-1), torch.int16 if actual.dtype is torch.float16 else torch.int32)


@pytest.mark.parametrize("shape", [(16, 1000), (3000,)])
def test_streamed_stores_narrow_blocks_bit_for_bit(shape):
    def scaled(x):
        f = x.float()
        return (f - f.amax(-1, keepdim=True)).half() if len(shape) > 1 else (f * 0.5).half()
    x = _specials(shape)
    with braze.config.patch(cpp_stream_min_bytes=0):  # every eligible store streamed
        source = _source(scaled, x)
        assert "b_stream(" in source and "b_narrow_f16(" in source
        _same_bits(braze.compile(scaled)(x).view(-1), scaled(x).view(-1), torch.int16)


def test_rmsnorm_with_residual_matches_eager():
    def rms(x, r, w):
        hf = (x + r).float()
        return (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6) * w).half()
    x, r, w = torch.randn(48, 5120).half(), torch.randn(48, 5120).half(), torch.randn(5120)
    assert "b_widen_f16(" in _source(rms, x, r, w)
    torch.testing.assert_close(braze.compile(rms)(x, r, w), rms(x, r, w))
