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


@pytest.mark.parametrize("reduce", sorted(REDUCTIONS))
def test_a_column_reduction_over_a_few_rows_is_vectorized(reduce, tmp_path):
    fn, helper = REDUCTIONS[reduce]
    x = torch.randn(64, 3, 80)
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
