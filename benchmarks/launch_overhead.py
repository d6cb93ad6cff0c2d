"""Host time per kernel launch on the GPU: braze's one C launcher (``codegen/triton/native.py``)
against Triton's per-signature C launcher and Triton's ``fn[grid](...)``.

What it measures: one small compiled kernel (``out = a + b`` over 4096 floats, 4 programs)
launched 20000 times in a row by each path, called directly (no wrapper, no Dynamo), in
alternating rounds; prints the best and the median of 9 rounds in microseconds per
launch, and an empty Python loop's cost for scale. The kernel is compiled for sm_90 as
braze's compile workers compile it (``worker.ast_source``: pointers 16-byte aligned);
braze's launcher gets it through ``native.prepare``, as ``codegen/triton/build.py`` does.
Triton's launcher is called with Triton 3.6's argument list.

Device: an NVIDIA GPU of compute capability 9.0 (the H100).

    python -m benchmarks.launch_overhead

Results and what braze takes from them: docs/benchmarks.md, "Host overhead".
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch
import triton
import triton.language as tl

LAUNCHES = 20000
ROUNDS = 9


@triton.jit
def add(a, b, out, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(a + i) + tl.load(b + i))


def compiled_kernel():
    from triton.backends.compiler import GPUTarget
    from braze.codegen.triton.worker import ast_source
    signature = {"a": "*fp32", "b": "*fp32", "out": "*fp32", "BLOCK": "constexpr"}
    return triton.compile(ast_source(add, signature, {"BLOCK": 1024}), target=GPUTarget("cuda", 90, 32))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    os.environ.setdefault("BRAZE_CACHE_DIR", tempfile.mkdtemp(prefix="braze-bench-"))
    from braze.codegen.triton import native

    a, b, c = (torch.randn(4096, device="cuda") for _ in range(3))
    stream = torch._C._cuda_getCurrentRawStream(0)
    theirs = compiled_kernel()
    theirs._init_handles()
    ours = compiled_kernel()
    if not native.prepare(ours, 0):
        raise SystemExit("braze's launcher cannot run this kernel here (native.prepare refused it)")
    run, function, metadata = theirs.run.launch, theirs.function, theirs.packed_metadata
    launch = native.launch_function()
    threads, shared, extra = ours.braze_launch

    def triton_launcher():
        for _ in range(LAUNCHES):
            run(4, 1, 1, stream, function, False, False, None, None, metadata, None, None, None, a, b, c, 1024)

    def braze_launcher():
        for _ in range(LAUNCHES):
            launch(ours.function, 4, 1, 1, threads, shared, stream, 0, extra, a, b, c)

    def triton_jit_call():
        for _ in range(LAUNCHES):
            add[(4,)](a, b, c, BLOCK=1024)

    def empty_loop():
        for _ in range(LAUNCHES):
            pass

    paths = {"braze's launcher": braze_launcher, "Triton's C launcher": triton_launcher,
             "Triton fn[grid](...)": triton_jit_call, "empty loop": empty_loop}
    for path in paths.values():  # warm up
        path()
    torch.cuda.synchronize()
    times: dict = {name: [] for name in paths}
    for _ in range(ROUNDS):
        for name, path in paths.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            path()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - start) / LAUNCHES * 1e6)
    torch.testing.assert_close(c, a + b)
    print(f"{torch.cuda.get_device_name()}, Triton {triton.__version__}, {LAUNCHES} launches a round")
    for name, values in times.items():
        print(f"{name}: best {min(values):.2f} us, median {statistics.median(values):.2f} us per launch")


if __name__ == "__main__":
    main()
