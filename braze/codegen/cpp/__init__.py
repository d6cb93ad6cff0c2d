"""The C++/OpenMP backend: one translation unit per graph, loaded with ctypes.

Takes: kernel plans. Gives: ``Built`` (see ``braze.codegen``); its recipe is the
source and each kernel's name and argument count (``CppRecipe``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from braze import config, progress
from braze.codegen import Built
from braze.codegen.cpp.build import build_library, function, is_cached
from braze.ir import symbols


class CppBackend:
    name = "cpp"
    supports_foreach = True

    def compile(self, plans: list) -> Built:
        # (imported here: a graph-cache hit unpickles a CppRecipe and needs no generator)
        from braze.codegen.cpp.kernel import CppForeach, CppKernel
        from braze.codegen.cpp.prelude import prelude
        threads = config.num_threads or torch.get_num_threads()
        kernels = [(CppForeach if plan.is_foreach else CppKernel)(plan, threads, config.cpp_lanes)
                   for plan in plans]
        body = "\n\n".join(k.source() for k in kernels)
        source = prelude(body) + "\n" + body + "\n"
        if not kernels:
            return Built({}, {}, source, recipe=CppRecipe(source, []))
        hit = is_cached(source)
        sizes = symbols.parameters()  # symbolic sizes, after the buffers
        recipe = CppRecipe(source, [(k.plan.name, len(k.args) + len(sizes)) for k in kernels])
        launches = {k.plan.name: f"{k.plan.name}({', '.join([f'{b}.data_ptr()' for b in k.args] + sizes)})"
                    for k in kernels}
        progress.stage("loading the cached library" if hit else f"{config.cxx} compiling one library")
        objects = recipe.load(None)
        progress.built(len(kernels))
        return Built(objects, launches, source, {k.plan.name: k.shape for k in kernels}, hit, recipe,
                     {k.plan.name: _threads(k) for k in kernels})


def _threads(kernel) -> str:
    """A kernel's thread count, as the report shows it."""
    if not getattr(kernel, "threaded", lambda: True)():
        return "1 thread (too little work to share)"
    if config.num_threads:
        return f"{config.num_threads} OpenMP threads (num_threads)"
    return f"OpenMP: the caller's torch.get_num_threads() ({torch.get_num_threads()} now)"


@dataclass
class CppRecipe:
    source: str
    functions: list  # (name, argument count)

    def load(self, device) -> dict:
        """The kernel functions, from the library built (or cached) for the source."""
        if not self.functions:
            return {}
        lib = build_library(self.source)
        return {name: function(lib, name, nargs) for name, nargs in self.functions}
