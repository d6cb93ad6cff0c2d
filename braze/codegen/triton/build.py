"""Kernel modules on disk, and their compilation.

Takes: the text of one kernel module (imports, helpers, ``@triton.jit``
functions) and, on a GPU, each kernel's signature and launch options. Gives:
``load_module`` (the module, imported from the per-user 0700 cache; under the
interpreter its ``libdevice`` is the NumPy stand-in), ``Compiler``, which
starts compiling each kernel as soon as it is generated (in the worker
processes of ``pool.py`` when several kernels miss the cache, in a thread pool
if they cannot run) and hands back Triton's ``CompiledKernel`` objects, loaded
in this process from Triton's cache, and ``signature_of``.

Caches, all keyed by content: the module file (braze's cache), Triton's
binaries (``<cache>/triton``, Triton's own cache format), and a marker per
compiled configuration so a warm cache is reported as a hit and compiles
nothing. In-process, modules and compiled kernels are memoized too.
"""
from __future__ import annotations

import concurrent.futures as futures
import contextlib
import importlib.util
import os
import sys
import threading

import torch

from braze import config
from braze.codegen.triton import native, pool
from braze.codegen.triton.worker import ast_source
from braze.runtime import cache

_modules: dict = {}  # (key, interpret) -> module
_compiled: dict = {}  # (key, fn name, config key, device index) -> CompiledKernel
_lock = threading.Lock()

POINTER_TYPES = {
    torch.float32: "*fp32", torch.float64: "*fp64", torch.float16: "*fp16", torch.bfloat16: "*bf16",
    torch.int64: "*i64", torch.int32: "*i32", torch.int16: "*i16", torch.int8: "*i8",
    torch.uint8: "*u8", torch.bool: "*i1",
}


def interpreting(device) -> bool:
    """CPU tensors always run through Triton's interpreter; CUDA ones when it is asked for."""
    import triton
    return device.type != "cuda" or bool(triton.knobs.runtime.interpret)


def module_key(text: str) -> str:
    import triton
    return cache.key_of("triton-module", triton.__version__, text)


def is_cached(key: str) -> bool:
    return cache.lookup(key, ".py") is not None


def load_module(text: str, key: str, interpret: bool):
    """The module of ``text`` (written once to the cache, then imported)."""
    with _lock:
        module = _modules.get((key, interpret))
        if module is not None:
            return module
        path = cache.lookup(key, ".py") or cache.store(key, ".py", lambda out: _write(out, text))
        module = _import(path, f"braze_triton_{key[:16]}_{'i' if interpret else 'g'}", interpret)
        _modules[(key, interpret)] = module
        return module


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _import(path: str, name: str, interpret: bool):
    import triton
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # inspect.getsource (used by triton.jit) looks modules up here
    with triton.knobs.runtime.scope():  # @triton.jit reads it when it decorates
        triton.knobs.runtime.interpret = interpret
        spec.loader.exec_module(module)
    if interpret:
        from braze.codegen.triton.interpret import install, libdevice
        module.libdevice = libdevice
        install()
    return module


def signature_of(fn_params: list, dtypes: list, constexprs: dict, sizes: dict | None = None) -> dict:
    """Triton's signature for a kernel: pointer types of the buffers, the integer types of
    its symbolic sizes, then constexprs."""
    signature = {p: POINTER_TYPES[d] for p, d in zip(fn_params, dtypes)}
    signature.update(sizes or {})
    signature.update({name: "constexpr" for name in constexprs})
    return signature


# ----------------------------------------------------------------------------- GPU compilation

def compile_check(text: str, key: str, launches: list, options_of, arch: int) -> None:
    """Compile a kernel module's launches for GPU architecture ``arch`` (no GPU needed) and
    drop the binaries: Triton's compiler rejects programs its interpreter runs (a loop
    variable whose type changes, a libdevice call of the wrong type), and CI has no GPU."""
    import triton
    from triton.backends.compiler import GPUTarget
    module = load_module(text, key, interpret=False)
    with _braze_triton_cache():
        for launch in launches:
            triton.compile(ast_source(getattr(module, launch.fn), launch.signature, launch.constexprs),
                           target=GPUTarget("cuda", arch, 32), options=options_of(launch))


def _triton_cache_dir() -> str:
    path = os.path.join(cache.cache_dir(), "triton")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


@contextlib.contextmanager
def _braze_triton_cache():
    import triton
    with triton.knobs.cache.scope():
        triton.knobs.cache.dir = _triton_cache_dir()
        yield


def _target_of(device):
    from triton.backends.compiler import GPUTarget
    major, minor = torch.cuda.get_device_capability(device)
    return GPUTarget("cuda", major * 10 + minor, 32)


class Compiler:
    """Compiles kernels for one CUDA device: ``submit`` starts a job (in a thread pool
    when several kernels are expected: Triton's passes and ptxas run outside the GIL),
    ``result`` waits for it and loads the binary. Used as a context manager: Triton's
    cache is braze's while it is open."""

    def __init__(self, device, expected: int):
        self.device = device
        self.target = _target_of(device)
        self.jobs: dict = {}
        self.use_pool = expected > 1 and pool.workers() > 1

    def __enter__(self):
        self._scope = _braze_triton_cache()
        self._scope.__enter__()
        return self

    def __exit__(self, *exc):
        return self._scope.__exit__(*exc)

    def _job(self, key: str, fn_name: str, signature: dict, constexprs: dict, options: dict) -> tuple:
        settings = repr(sorted(signature.items())) + repr(sorted(constexprs.items())) + repr(sorted(options.items()))
        return key, fn_name, settings, self.device.index or 0, config.native_launch  # whose launcher runs it

    def submit(self, module, key: str, fn_name: str, signature: dict, constexprs: dict, options: dict) -> None:
        job = self._job(key, fn_name, signature, constexprs, options)
        if job in _compiled or job in self.jobs:
            return
        args = (getattr(module, fn_name), signature, constexprs, options)
        binary = _read(cache.lookup(_marker(job, self.target), ".ok"))  # Triton's hash of the binary
        pending, elsewhere = None, False
        if self.use_pool and not binary:
            pending = pool.submit({"path": module.__file__, "module": module.__name__, "fn": fn_name,
                                   "signature": signature, "constexprs": constexprs, "options": options,
                                   "arch": self.target.arch, "cache_dir": _triton_cache_dir(),
                                   "launcher": not native.expected()})
            elsewhere = pending is not None
            pending = pending or _get_threads().submit(self._compile, *args)
        self.jobs[job] = (pending, args, binary, elsewhere)

    def result(self, key: str, fn_name: str, signature: dict, constexprs: dict, options: dict):
        job = self._job(key, fn_name, signature, constexprs, options)
        if job in _compiled:
            return _compiled[job]
        pending, args, marked, elsewhere = self.jobs[job]
        # a worker's binary is in Triton's cache now (its error: raised again by _compile below)
        binary = pending.result()[0] if elsewhere else marked
        kernel = binary and _from_triton_cache(binary, *args[:3])
        if not kernel:
            kernel = pending.result() if pending is not None and not elsewhere else self._compile(*args)
        with torch.cuda.device(self.device):
            if not native.prepare(kernel, self.device.index or 0):
                kernel._init_handles()
        if kernel.hash != marked:  # (a marker naming a binary Triton's cache no longer has is replaced)
            cache.store(_marker(job, self.target), ".ok", lambda out: _write(out, kernel.hash), replace=bool(marked))
        _compiled[job] = kernel
        return kernel

    def _compile(self, fn, signature: dict, constexprs: dict, options: dict):
        import triton
        return triton.compile(ast_source(fn, signature, constexprs), target=self.target, options=options)

    def was_cached(self) -> bool:
        """Whether every kernel submitted was in the cache before this compile."""
        return all(job[2] for job in self.jobs.values())


def _marker(job, target) -> str:
    """A file naming the binary of a configuration compiled into Triton's cache (a warm-cache hit)."""
    return cache.key_of("triton-binary", *map(str, job[:3]), repr(target))


def _read(path: str | None) -> str:
    if path is None:
        return ""
    with open(path) as f:
        return f.read().strip()


def _from_triton_cache(binary: str, fn, signature: dict, constexprs: dict):
    """The kernel Triton cached under hash ``binary``, or None. What ``triton.compile``
    does on a cache hit, without computing the hash: that costs time per kernel, and
    hashing Triton's own sources more once per process (Triton 3.6's cache layout)."""
    try:
        from triton.compiler.compiler import CompiledKernel
        from triton.runtime.cache import get_cache_manager
        source = ast_source(fn, signature, constexprs)
        group = get_cache_manager(binary).get_group(f"{source.name[:150]}.json")
        return CompiledKernel(source, group, binary) if group else None
    except Exception:  # another Triton: its own lookup
        return None


_threads = None


def _get_threads():
    global _threads
    with _lock:
        if _threads is None:
            _threads = futures.ThreadPoolExecutor(pool.workers(), thread_name_prefix="braze-compile")
        return _threads
