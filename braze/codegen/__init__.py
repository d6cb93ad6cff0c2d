"""Code generators behind one small interface.

Takes: kernel plans. Gives: ``Built``: callable kernel objects by name, the
wrapper's launch text for each, the generated source, each kernel's shape,
whether the build came from the cache, and a recipe: a picklable description
of what to load (``recipe.load(device)`` gives the same kernel objects) that the
graph cache keeps, so a later process loads the kernels without generating them.
``target_for(device)`` picks the target (``braze.target.Target``: what the passes may
assume, and ``compile(plans)``): C++/OpenMP for CPU tensors (or Triton in interpreter mode
when ``config.cpu_backend == "triton"``), Triton for CUDA tensors.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from braze import config


@dataclass
class Built:
    objects: dict
    launches: dict
    source: str
    shapes: dict = field(default_factory=dict)
    cache_hit: bool = False
    recipe: object = None  # what a later process loads instead of generating (``recipe.load(device)``); None: not cacheable
    params: dict = field(default_factory=dict)  # kernel name -> its launch parameters, as text for reports


def target_for(device: torch.device):
    device = torch.device(device)
    if device.type == "cpu" and config.cpu_backend == "cpp":
        from braze.codegen.cpp.policy import CppTarget
        return CppTarget.for_device(device)
    if device.type in ("cpu", "cuda"):
        from braze.codegen.triton.policy import TritonTarget
        return TritonTarget.for_device(device)
    raise NotImplementedError(f"braze has no code generator for device {device}")
