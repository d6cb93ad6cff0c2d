"""Max, min, any and all accumulate in SIMD loops: GCC vectorizes the C++ backend's loops that
chain several NaN-propagating ``b_max``/``b_min`` into one accumulator, and those that fold
comparisons into ``any``/``all`` (bytes combined by ``|``/``&``: a ``bool`` accumulator or a
short-circuit ``||`` left the loop scalar, 4x to 50x slower).

A column max over a few rows (``x.amax(1)`` of ``[451, 3, 775]``) folds three loads into each
lane's accumulator; with ``b_max`` written as one nested select GCC 12 left that loop scalar
and the kernel ran 24x slower (``docs/benchmarks.md``, "CPU kernels"). The generated source is
compiled with the backend's flags and GCC's vectorizer report, which must name the loop; the
values, NaNs included, are eager's.
"""
import re
import shutil
import subprocess

import pytest
import torch

import braze
from braze.codegen.cpp import build

pytestmark = pytest.mark.skipif(shutil.which(braze.config.cxx) is None or "g++" not in braze.config.cxx,
                                reason="the vectorizer report is GCC's")


def _vectorized_lines(source: str, tmp_path) -> set:
    path = tmp_path / "kernels.cpp"
    path.write_text(source)
    report = tmp_path / "vec.txt"
    subprocess.run([braze.config.cxx, *build.flags(), f"-fopt-info-vec-optimized={report}", str(path),
                    "-o", str(tmp_path / "kernels.so")], check=True)
    return {int(m.group(1)) for m in re.finditer(r"kernels\.cpp:(\d+):\d+: optimized: loop vectorized",
                                                 report.read_text())}


REDUCTIONS = {
    "amax": (lambda x: x.amax(1), "b_max("),
    "amin": (lambda x: x.amin(1), "b_min("),
    "any": (lambda x: (x > 1).any(1), " | (bool)("),
    "all": (lambda x: (x > -1).all(1), " | (bool)("),  # (lowered as not any of not)
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("reduce", sorted(REDUCTIONS))
def test_a_column_reduction_over_a_few_rows_is_vectorized(reduce, dtype, tmp_path):
    """Also over bf16 and fp16 loads: GCC 12 left a bf16 column max scalar with the NaN mask
    made by arithmetic on the test, GCC 13 an fp16 one with the mask as a select."""
    fn, helper = REDUCTIONS[reduce]
    x = torch.randn(64, 3, 80).to(dtype)
    x[5, 1, 7] = float("nan")
    with braze.config.patch(cpu_backend="cpp"):
        graph = braze.explain(fn, x).graphs[0]
    torch.testing.assert_close(graph.run([x])[0], fn(x), equal_nan=True)
    lines = graph.source.splitlines()
    folds = [k + 1 for k, line in enumerate(lines) if helper in line and "_v[l]" in line]
    simd = max(k + 1 for k, line in enumerate(lines) if "#pragma omp simd" in line and k + 1 < folds[0])
    assert len(folds) == 3  # the three rows, unrolled into one SIMD loop
    vectorized = _vectorized_lines(graph.source, tmp_path)
    assert any(simd < line <= folds[0] for line in vectorized), (simd, folds, sorted(vectorized))


@pytest.mark.parametrize("dtype, lane_type", [(torch.float32, "uint32_t"), (torch.bfloat16, "uint32_t"),
                                              (torch.int16, "uint16_t"), (torch.bool, "uint8_t")])
@pytest.mark.parametrize("dim", [0, 1])
def test_any_and_all_accumulate_in_lanes_as_wide_as_their_values(dtype, lane_type, dim):
    """An ``any`` of float32 comparisons folded into bytes mixed two lane widths in one loop
    (a column ``any`` over 9 of 12 columns: 3x slower than in 32-bit lanes). A bf16 value
    is compared in float32."""
    base = torch.randn(4099, 12) < -2.5 if dtype is torch.bool else (torch.randn(4099, 12) * 4 - 12).to(dtype)
    x = base[:, :9]

    def fn(v):
        hit = v if v.dtype is torch.bool else v > 0
        return hit.any(dim), (~hit).all(dim)
    for case in (x, torch.zeros_like(x), x.clone().index_fill_(0, torch.tensor([4098]), 1)):
        with braze.config.patch(cpu_backend="cpp"):
            graph = braze.explain(fn, case).graphs[0]
        assert re.search(rf"{lane_type} a\w*_v\[", graph.source), graph.source
        for actual, expected in zip(graph.run([case]), fn(case)):
            assert torch.equal(actual, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_a_column_max_over_a_long_middle_axis_is_vectorized(dtype, tmp_path):
    """A column kernel over 515 rows of 16 columns, four rows a pass: with the NaN mask made
    as ``0u - (uint32_t)(a != a)`` GCC 12 left its bf16 loop scalar ("control flow in loop",
    2.7x slower on the sweep's logsumexp over a middle axis)."""
    x = torch.randn(8, 515, 16).to(dtype)
    x[3, 100, 5] = float("nan")
    with braze.config.patch(cpu_backend="cpp"):
        graph = braze.explain(lambda v: v.amax(1), x).graphs[0]
    assert torch.equal(graph.run([x])[0].isnan(), x.amax(1).isnan())
    torch.testing.assert_close(graph.run([x])[0], x.amax(1), equal_nan=True)
    lines = graph.source.splitlines()
    folds = [k + 1 for k, line in enumerate(lines) if "b_max(" in line and "_v[l]" in line]
    simd = max(k + 1 for k, line in enumerate(lines) if "#pragma omp simd" in line and k + 1 < folds[0])
    vectorized = _vectorized_lines(graph.source, tmp_path)
    assert any(simd < line <= folds[0] for line in vectorized), (simd, folds, sorted(vectorized))
