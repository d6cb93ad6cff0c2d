"""The host's C++ compiler, as both code generators use it: the C++ backend for its
kernels, the Triton backend for its native launcher.

Gives: ``CompileError`` (a compiler that failed or is missing) and ``compiler_identity``,
what makes a built library specific to this machine (part of every cache key of a build).
"""
from __future__ import annotations

import functools
import os
import shutil


class CompileError(RuntimeError):
    pass


@functools.lru_cache(maxsize=None)
def compiler_identity(cxx: str) -> str:
    """What makes a built library specific to this machine: the compiler binary
    (path, size, mtime: no subprocess on the warm path) and the CPU."""
    path = shutil.which(cxx)
    if path is None:
        raise CompileError(f"braze: C++ compiler {cxx!r} not found; set BRAZE_CXX")
    info = os.stat(os.path.realpath(path))
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags")):
                    cpu += line
                if line.startswith("flags"):
                    break
    except OSError:
        pass
    return f"{os.path.realpath(path)}:{info.st_size}:{int(info.st_mtime)}:{cpu}"
