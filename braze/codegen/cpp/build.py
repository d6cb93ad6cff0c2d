"""Build and load one C++ translation unit per compiled graph.

Takes: C++ source. Gives: a loaded ``ctypes.CDLL`` (no Python extension is
built). The shared library is cached on disk by a hash of the source, the
compiler flags, the compiler's version and the CPU (``-march=native`` differs
between machines), so a second process compiling the same graph runs no
compiler.
"""
from __future__ import annotations

import ctypes
import logging
import os
import shlex
import subprocess
import threading
import time

from braze import config
from braze.codegen.host_compiler import CompileError, compiler_identity
from braze.runtime import cache


log = logging.getLogger(__name__)
_loaded: dict = {}
_lock = threading.Lock()


def flags() -> list:
    return shlex.split(config.cxx_flags) + ["-shared", "-fPIC", "-std=gnu++17", "-w"]


def library_key(source: str) -> str:
    return cache.key_of(source, " ".join(flags()), config.cxx, compiler_identity(config.cxx))


def build_library(source: str) -> ctypes.CDLL:
    """The library of ``source``: the cached one, authenticated just before it is loaded
    (``cache.lookup``: owner, mode and MAC), or one built now."""
    key = library_key(source)
    path = cache.lookup(key, ".so")
    if path is None:
        path = cache.store(key, ".so", lambda out: _compile(source, out, key))
    return load(path)


def is_cached(source: str) -> bool:
    return cache.lookup(library_key(source), ".so") is not None


def _compile(source: str, out: str, key: str) -> None:
    src = out + ".cpp"
    with open(src, "w") as f:
        f.write(source)
    cmd = [config.cxx, *flags(), "-o", out, src, "-lmvec", "-lm"]
    try:
        proc = _run(cmd)
        if _crashed(proc):  # once, GCC 12's SLP vectorizer: not on the next try of the same file
            log.warning("braze: the C++ compiler crashed on kernel library %s; building it again", key)
            proc = _run(cmd)
        if _crashed(proc):
            log.warning("braze: the C++ compiler crashed again on %s; building it without vectorizing", key)
            proc = _run(cmd[:1] + ["-fno-tree-vectorize", "-fno-tree-slp-vectorize"] + cmd[1:])
    finally:
        keep = os.path.join(os.path.dirname(out), key + ".cpp")
        os.replace(src, keep)
    if proc.returncode != 0:
        raise CompileError(f"braze: the C++ compiler failed on {keep}:\n{proc.stderr[-4000:]}")


def _run(cmd: list) -> subprocess.CompletedProcess:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log.debug("%s: %.2f s, exit %d", shlex.join(cmd), time.perf_counter() - start, proc.returncode)
    return proc


def _crashed(proc: subprocess.CompletedProcess) -> bool:
    """Did the compiler itself fail (an internal compiler error), not the source?"""
    return proc.returncode != 0 and "internal compiler error" in proc.stderr


def load(path: str) -> ctypes.CDLL:
    with _lock:
        lib = _loaded.get(path)
        if lib is None:
            lib = ctypes.CDLL(path)
            _loaded[path] = lib
        return lib


def function(lib: ctypes.CDLL, name: str, nargs: int):
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p] * nargs
    fn.restype = None
    return fn
