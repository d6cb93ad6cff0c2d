"""Max and min accumulate in SIMD loops: GCC vectorizes the C++ backend's loops that chain
several NaN-propagating ``b_max``/``b_min`` into one accumulator.

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


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_a_column_extreme_over_a_few_rows_is_vectorized(reduce, tmp_path):
    fn = (lambda x: x.amax(1)) if reduce == "amax" else (lambda x: x.amin(1))
    x = torch.randn(64, 3, 80)
    x[5, 1, 7] = float("nan")
    with braze.config.patch(cpu_backend="cpp"):
        graph = braze.explain(fn, x).graphs[0]
    torch.testing.assert_close(graph.run([x])[0], fn(x), equal_nan=True)
    lines = graph.source.splitlines()
    helper = "b_max(" if reduce == "amax" else "b_min("
    folds = [k + 1 for k, line in enumerate(lines) if helper in line and "_v[l]" in line]
    simd = max(k + 1 for k, line in enumerate(lines) if "#pragma omp simd" in line and k + 1 < folds[0])
    assert len(folds) == 3  # the three rows, unrolled into one SIMD loop
    vectorized = _vectorized_lines(graph.source, tmp_path)
    assert any(simd < line <= folds[0] for line in vectorized), (simd, folds, sorted(vectorized))
