"""The C++/OpenMP backend: one translation unit per graph, loaded with ctypes."""
from __future__ import annotations

import torch

from braze import config
from braze.codegen import Built
from braze.codegen.cpp.build import build_library, function, is_cached
from braze.codegen.cpp.kernel import CppForeach, CppKernel
from braze.codegen.cpp.prelude import PRELUDE


class CppBackend:
    name = "cpp"
    supports_foreach = True

    def compile(self, plans: list) -> Built:
        threads = config.num_threads or torch.get_num_threads()
        kernels = [(CppForeach if plan.is_foreach else CppKernel)(plan, threads, config.cpp_lanes)
                   for plan in plans]
        source = PRELUDE + "\n" + "\n\n".join(k.source() for k in kernels) + "\n"
        if not kernels:
            return Built({}, {}, source)
        hit = is_cached(source)
        lib = build_library(source)
        objects, launches = {}, {}
        for k in kernels:
            name = k.plan.name
            objects[name] = function(lib, name, len(k.args))
            launches[name] = f"{name}({', '.join(f'{b}.data_ptr()' for b in k.args)})"
        return Built(objects, launches, source, {k.plan.name: k.shape for k in kernels}, hit)
