"""Triton's compile workers: a kernel a worker compiled is a cache hit in this process
(and is found by its hash alone on a warm start), and a worker's failure comes back as text (this machine has no GPU: Triton compiles
for an H100's architecture without one)."""
import importlib.util
import os
import sys

import pytest

triton = pytest.importorskip("triton")

from braze.codegen.triton import pool  # noqa: E402
from braze.codegen.triton.build import _from_triton_cache  # noqa: E402
from braze.codegen.triton.worker import ast_source  # noqa: E402

KERNEL = '''import triton
import triton.language as tl


@triton.jit
def twice(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)
'''
SIGNATURE = {"x": "*fp32", "y": "*fp32", "n": "i32", "BLOCK": "constexpr"}


def job(path, cache_dir, fn="twice"):
    return {"path": str(path), "module": "braze_test_pool_module", "fn": fn, "signature": SIGNATURE,
            "constexprs": {"BLOCK": 128}, "options": {"num_warps": 4}, "arch": 90, "cache_dir": str(cache_dir)}


def binaries(cache_dir) -> set:
    return {os.path.join(d, f) for d, _, files in os.walk(cache_dir) for f in files if f.endswith(".cubin")}


def test_a_kernel_compiled_by_a_worker_is_a_cache_hit_here(tmp_path):
    path, cache_dir = tmp_path / "module.py", tmp_path / "triton"
    path.write_text(KERNEL)
    future = pool.submit(job(path, cache_dir))
    if future is None:
        pytest.skip("one core: no compile workers")
    binary, error = future.result(timeout=300)
    assert error is None and binary
    built = binaries(cache_dir)
    assert len(built) == 1
    spec = importlib.util.spec_from_file_location("braze_test_pool_module", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    from triton.backends.compiler import GPUTarget
    with triton.knobs.cache.scope():
        triton.knobs.cache.dir = str(cache_dir)
        kernel = triton.compile(ast_source(module.twice, SIGNATURE, {"BLOCK": 128}),
                                target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    assert binaries(cache_dir) == built and kernel.hash == binary  # found, not compiled again
    assert kernel.metadata.num_warps == 4
    with triton.knobs.cache.scope():
        triton.knobs.cache.dir = str(cache_dir)
        again = _from_triton_cache(kernel.hash, module.twice, SIGNATURE, {"BLOCK": 128})
        assert again.hash == kernel.hash and again.asm["cubin"] == kernel.asm["cubin"]
        assert _from_triton_cache("0" * 64, module.twice, SIGNATURE, {"BLOCK": 128}) is None


def test_a_worker_error_comes_back_as_text(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(KERNEL.replace("* 2", "* undefined_name"))
    future = pool.submit(job(path, tmp_path / "triton"))
    if future is None:
        pytest.skip("one core: no compile workers")
    binary, error = future.result(timeout=300)
    assert not binary and "undefined_name" in error
    assert pool.submit(job(path, tmp_path / "triton", fn="missing")).result(timeout=300)[1]  # the worker lives on


def test_warm_up_compiles_for_the_architecture_and_leaves_no_cache(tmp_path, monkeypatch):
    """A worker started with an architecture compiles one throwaway kernel (the first compile
    of a process pays one-time costs) into a temporary cache it removes, not Triton's or braze's."""
    from braze.codegen.triton import worker
    compiled = []
    real = triton.compile
    monkeypatch.setattr(triton, "compile", lambda src, target, **kw: compiled.append((target, real(src, target=target,
                                                                                                  **kw))) or compiled[-1][1])
    monkeypatch.setattr(triton.knobs.cache, "dir", str(tmp_path / "untouched"))
    worker.warm_up(90)
    (target, kernel), = compiled
    assert target.arch == 90 and kernel.asm["cubin"]
    assert not (tmp_path / "untouched").exists()
