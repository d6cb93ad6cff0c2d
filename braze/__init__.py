"""braze: an operator-fusion compiler for PyTorch.

``torch.compile(fn, backend="braze")`` (after ``import braze``) or
``braze.compile(fn)`` compiles ``fn``; ``braze.explain(fn, *args)`` (or ``braze.report``) reports which
kernels braze generates for those arguments and which ATen ops each one fuses
(``.save("report.html")``: as a page); ``braze.profile(fn, *args)`` adds each kernel's time;
``braze.config`` holds every knob.
"""
from __future__ import annotations

import torch

from braze import config
from braze.backend import braze_backend, explain, profile
from braze.errors import BrazeError
from braze.debug.explain import Report
from braze.fuse.legality import Reason

report = explain  # one report: braze.report(fn, *args).save("report.html")

__all__ = ["compile", "explain", "report", "profile", "config", "braze_backend", "BrazeError", "Report", "Reason"]
__version__ = "0.1.0"


def compile(fn=None, *, dynamic=None, fullgraph=False, options=None):
    """``torch.compile(fn, backend="braze")``; usable as a decorator."""
    def wrap(f):
        return torch.compile(f, backend="braze", dynamic=dynamic, fullgraph=fullgraph, options=options)
    return wrap(fn) if fn is not None else wrap


def _register() -> None:
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    if "braze" not in _BACKENDS:
        register_backend(name="braze")(braze_backend)


_register()
