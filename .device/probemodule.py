"""What the Triton probes in .device share: ``load(name, source)`` imports Triton source text as a module
(``triton.jit`` reads a kernel's source from its file). With ``TRITON_INTERPRET=1`` (``CHECK``: a quick run
on the CPU, values only) the module's ``libdevice`` is the interpreter's, from braze."""
import importlib.util
import os
import tempfile

CHECK = os.environ.get("TRITON_INTERPRET") == "1"


def load(name: str, source: str):
    path = os.path.join(tempfile.mkdtemp(), f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if CHECK:
        from braze.codegen.triton.interpret import install, libdevice
        install()
        mod.libdevice = libdevice
    return mod
