"""What the Triton probes in .device share: ``load(name, source)`` imports Triton source text as a module
(``triton.jit`` reads a kernel's source from its file). With ``TRITON_INTERPRET=1`` (``CHECK``: a quick run
on the CPU, values only) the module's ``libdevice`` is the interpreter's, from braze. ``module_head`` starts
such a source with braze's helpers; ``ln_kernel`` wraps a LayerNorm row body (one row of 4096 per program,
weight W and bias B loaded first)."""
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


def module_head(helpers: list) -> str:
    from braze.codegen.triton.helpers import helper_source
    return ("\nimport triton\nimport triton.language as tl\nfrom triton.language.extra import libdevice\n"
            + helper_source(helpers) + "\n")


def ln_kernel(name: str, body: str) -> str:
    return f'''
@triton.jit
def {name}(in0, in1, in2, out0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r0 = tl.arange(0, RBLOCK)[None, :]
    W = tl.load(in1 + r0).to(tl.float32)
    B = tl.load(in2 + r0).to(tl.float32)
{body}
'''
