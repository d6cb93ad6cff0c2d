"""A kernel-compiling worker process, and the one definition of a kernel's Triton source.

Run as a script (``python worker.py [ARCH]``, by ``pool.py``): it imports Triton only
(not torch, not braze), compiles one throwaway kernel for GPU architecture ARCH if
given (a process's first compile costs far more than later ones), then reads jobs
from stdin and answers on stdout, each a length-prefixed pickle. A job names a kernel module file, a function in it, its
signature, constexprs, launch options, the GPU architecture, Triton's cache
directory and whether Triton's C launcher is wanted (not when braze's own,
``native.py``, runs the kernel); the worker compiles it, and that launcher for its
signature, into that cache and answers ``(job id, Triton's hash of the binary, None)``, or
``(job id, "", error text)``. The parent then loads both from the cache. It exits when stdin closes.

Imported (by ``build.py``): ``ast_source``, what both sides compile.
"""
from __future__ import annotations

import importlib.util
import pickle
import struct
import sys
import traceback


DIVISIBLE = ":16"  # after an integer type in a signature: the argument is a multiple of 16


def ast_source(fn, signature: dict, constexprs: dict):
    """Triton's source object for a kernel: every pointer argument 16-byte aligned, and each
    integer whose type says ``DIVISIBLE`` a multiple of 16 (so loads along it vectorize)."""
    from triton.compiler import ASTSource
    attrs = {(k,): [["tt.divisibility", 16]] for k, t in enumerate(signature.values())
             if t.startswith("*") or t.endswith(DIVISIBLE)}
    plain = {name: t.removesuffix(DIVISIBLE) for name, t in signature.items()}
    return ASTSource(fn, plain, constexprs, attrs)


def read_message(stream):
    header = stream.read(8)
    if len(header) < 8:
        return None
    (size,) = struct.unpack("<Q", header)
    return pickle.loads(stream.read(size))


def write_message(stream, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


_modules: dict = {}


def _function(path: str, name: str, fn_name: str):
    """``fn_name`` from the module at ``path``, imported under the parent's module name."""
    module = _modules.get(path)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # triton.jit reads the source through inspect
        spec.loader.exec_module(module)
        _modules[path] = module
    return getattr(module, fn_name)


def compile_job(job: dict) -> str:
    import triton
    from triton.backends.compiler import GPUTarget
    triton.knobs.cache.dir = job["cache_dir"]
    fn = _function(job["path"], job["module"], job["fn"])
    target = GPUTarget("cuda", job["arch"], 32)
    kernel = triton.compile(ast_source(fn, job["signature"], job["constexprs"]), target=target,
                            options=job["options"])
    if job.get("launcher", True):  # not when braze's own launcher runs it (native.py)
        _build_launcher(kernel)
    return kernel.hash


def _build_launcher(kernel) -> None:
    """Build Triton's C launcher for the kernel's signature into the cache too: a C
    compile per distinct signature that the parent would otherwise run, one kernel
    after the other, when it loads the binary. Best
    effort: without a CUDA driver here, the parent builds it."""
    try:
        from triton.backends.nvidia.driver import CudaLauncher
        CudaLauncher(kernel.src, kernel.metadata)
    except Exception:
        pass


def warm_up(arch: int) -> None:
    """Compile a one-line kernel for ``arch`` into a throwaway cache: Triton's and LLVM's
    first-use costs are paid now, while the parent traces, not by the first real kernel."""
    import tempfile
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget

    @triton.jit
    def increment(x, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(x + offsets, tl.load(x + offsets) + 1.0)

    with tempfile.TemporaryDirectory() as cache_dir, triton.knobs.cache.scope():
        triton.knobs.cache.dir = cache_dir
        kernel = triton.compile(ast_source(increment, {"x": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 128}),
                                target=GPUTarget("cuda", arch, 32))
        _build_launcher(kernel)


def main() -> None:
    import triton  # noqa: F401  (imported before the first job arrives)
    if len(sys.argv) > 1:
        try:
            warm_up(int(sys.argv[1]))
        except Exception:  # only a warm-up: the jobs report real errors
            pass
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # anything Triton prints must not corrupt the answers
    while True:
        job = read_message(stdin)
        if job is None:
            return
        try:
            write_message(stdout, (job["id"], compile_job(job), None))
        except Exception:
            write_message(stdout, (job["id"], "", traceback.format_exc(limit=8)))


if __name__ == "__main__":
    main()
