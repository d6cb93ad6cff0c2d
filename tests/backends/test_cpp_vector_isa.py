"""Every vector function GCC may call is defined, whatever vector ISA the machine has.

``omp declare simd`` promises GCC vector variants of a function; GCC then calls the
variant of the best ISA the build enables (``_ZGVdN8vv_`` for AVX2, ``_ZGVeN8vv_`` for
AVX-512). A variant the prelude does not define fails only when the library is loaded, on
that kind of machine, and the graph then runs eagerly. Here the prelude and kernels that
call its vector helpers are built for x86-64-v2 (SSE4.2), v3 (AVX2) and v4 (AVX-512) and
linked with ``-z defs``, so a missing symbol fails on any x86 machine; the kernels also run
(and match eager) on this machine's own ISA.

A kernel that calls vector math asks for the CPU's widest vectors (knob
``cpp_math_vector_bits``, function attribute ``prefer-vector-width``): under a tuning that
prefers 256-bit vectors, an AVX-512 build then calls libmvec's 16-lane variants.
"""
import platform
import shlex
import subprocess

import pytest
import torch

import braze
from braze import config
from braze.codegen.cpp.build import flags

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 ISA levels")


def _floor_div_sum(a, b):
    return torch.floor_divide(a, b).sum(0), torch.remainder(a, b).sum(1), torch.fmod(a, b).amax(0)


def _math(x):
    return torch.sin(x) * torch.exp(x) + torch.atan2(x, x + 1) + torch.erf(x).sum(-1, keepdim=True)


def _fmod_beside_math(a, b):
    return torch.fmod(torch.sin(a) * 10, b), torch.fmod(torch.exp(a * 0.1), b).sum(1)


PROGRAMS = {"fmod in reductions": (_floor_div_sum, 2), "vector math": (_math, 1),
            "fmod beside vector math": (_fmod_beside_math, 2)}


def _source(fn, arity: int) -> str:
    args = [torch.randn(64, 40) * 10 for _ in range(arity)]
    report = braze.explain(fn, *args)
    return report.graphs[0].source


@pytest.mark.parametrize("level", ["x86-64-v2", "x86-64-v3", "x86-64-v4"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_symbol_resolves_at_each_isa_level(tmp_path, name, level):
    fn, arity = PROGRAMS[name]
    src = tmp_path / "unit.cpp"
    src.write_text(_source(fn, arity))
    own = [f for f in flags() if not f.startswith(("-march", "-mtune"))]
    cmd = [config.cxx, *own, f"-march={level}", "-o", str(tmp_path / "unit.so"), str(src),
           "-lmvec", "-lm", "-Wl,-z,defs"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{shlex.join(cmd)}\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_strict_build_on_this_machine_matches_eager(name):
    fn, arity = PROGRAMS[name]
    args = [torch.randn(64, 40) * 10 for _ in range(arity)]
    args[-1] = torch.where(args[-1].abs() < 0.5, 1.5, args[-1])
    expected = fn(*args)
    actual = braze.compile(fn)(*args)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-4)


def _sin_cos(x):
    return torch.sin(x) ** 2 + torch.cos(x) ** 2


@config.patch(cpp_math_vector_bits=512)
def test_only_kernels_that_call_vector_math_ask_for_wide_vectors():
    x = torch.randn(64, 40)
    math = braze.explain(_sin_cos, x).graphs[0].source
    plain = braze.explain(lambda x: (x + 1).relu(), x).graphs[0].source
    assert 'extern "C" __attribute__((target("prefer-vector-width=512"))) void kernel0(' in math
    assert "prefer-vector-width" not in plain


def _has_avx512f() -> bool:
    with open("/proc/cpuinfo") as f:
        return " avx512f " in f.read()


@pytest.mark.skipif(not _has_avx512f(), reason="AVX-512 variants of libmvec need AVX-512F")
@config.patch(cpp_math_vector_bits=512)
def test_a_256_bit_tuning_still_calls_the_16_lane_variants(tmp_path):
    src = tmp_path / "unit.cpp"
    src.write_text(braze.explain(_sin_cos, torch.randn(64, 40)).graphs[0].source)
    own = [f for f in flags() if not f.startswith("-mtune")]
    asm = tmp_path / "unit.s"
    cmd = [config.cxx, *own, "-mtune=sapphirerapids", "-S", "-o", str(asm), str(src)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "call\t_ZGVeN16v_sinf" in asm.read_text()


def test_a_kernel_too_small_for_threads_still_vectorizes_its_math(tmp_path):
    """Its ``parallel for simd`` is off by ``if(parallel: 0)``: a plain ``if(0)`` turns off
    the ``simd`` too, and every call was scalar ``sinf``."""
    source = braze.explain(_sin_cos, torch.randn(64, 40)).graphs[0].source
    assert "if(parallel: 0)" in source
    src, asm = tmp_path / "unit.cpp", tmp_path / "unit.s"
    src.write_text(source)
    done = subprocess.run([config.cxx, *flags(), "-S", "-o", str(asm), str(src)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "call\t_ZGV" in asm.read_text()  # scalar sinf is left for a loop's tail only
