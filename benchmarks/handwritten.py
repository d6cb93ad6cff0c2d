"""Hand-written Triton kernels for the variant benchmarks (``scan_variants``,
``layernorm_variants``): one kernel shape of braze's, written out by hand, against
other ways to write it, timed side by side in one process.

Takes: Triton source text. Gives:
- ``HEAD``: the imports such a source starts with;
- ``helpers(names)``: the source of braze's Triton helpers (combine functions,
  ``erf_plus_one``) that the kernels call, as generated kernels get them;
- ``load(name, source)``: the text imported as a module (``triton.jit`` reads a
  kernel's source from its file, so the text is written to a temporary file first);
- ``interpret()``: switch to Triton's interpreter on the CPU (``--check``: a few rows,
  values only, no timings); modules loaded after it get braze's interpreter
  ``libdevice``, as braze's own CPU tests do.
"""
from __future__ import annotations

import importlib.util
import os
import tempfile

HEAD = """
import triton
import triton.language as tl
from triton.language.extra import libdevice
"""

_INTERPRET = False


def interpret() -> None:
    global _INTERPRET
    os.environ["TRITON_INTERPRET"] = "1"  # read when a kernel is decorated, so before load()
    _INTERPRET = True


def interpreting() -> bool:
    return _INTERPRET


def helpers(names: list) -> str:
    from braze.codegen.triton.helpers import helper_source
    return helper_source(names)


def load(name: str, source: str):
    path = os.path.join(tempfile.mkdtemp(prefix="braze-bench-"), f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if _INTERPRET:
        from braze.codegen.triton.interpret import install, libdevice
        install()
        module.libdevice = libdevice
    return module
