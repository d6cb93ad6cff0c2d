"""Debug output for one compiled graph (``BRAZE_DEBUG``, ``BRAZE_DEBUG_DIR``).

Takes: a ``CompiledGraph``. Gives: printed lines by level (1: one line per
graph; 2: kernels, inlining and fusion decisions; 3: generated code) and, with
a debug directory, one folder per graph (``folder_name``) holding the ATen graph,
braze's IR, the fusion log, the generated source and the wrapper.
"""
from __future__ import annotations

import os

from braze import config


def summary(compiled) -> str:
    t = compiled.timings
    return (f"braze {compiled.name} ({compiled.kind}): {len(compiled.kernels)} kernels, "
            f"{len(compiled.externs)} externs, {len(compiled.fallbacks)} fallbacks, "
            f"{sum(t.values()):.1f} ms ({', '.join(f'{k} {v:.1f}' for k, v in t.items())})"
            f"{', cache hit' if compiled.cache_hit else ''}")


def dump(compiled) -> None:
    level = config.debug
    if level >= 1:
        print(summary(compiled))
    if level >= 2:
        for k in compiled.kernels:
            print(f"  {k}")
        for f in compiled.fallbacks:
            print(f"  fallback {f}")
        for d in compiled.decisions:
            print(f"  {d.node}: {'stored' if d.stored else 'inlined'} ({d.reason})")
        for record in compiled.fusion_log:
            print(f"  {record}")
    if level >= 3:
        print(compiled.source)
        print(compiled.wrapper)
    if config.debug_dir:
        write(compiled, os.path.join(config.debug_dir, folder_name(compiled)))


def folder_name(compiled) -> str:
    """``0-1-graph0``: Dynamo's compile id and the graph's name (numbered per compiled function)."""
    compile_id = getattr(compiled, "compile_id", "")
    return f"{compile_id.replace('/', '-')}-{compiled.name}" if compile_id else compiled.name


def write(compiled, folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    files = {
        "aten_graph.py": compiled.fx_code,
        "ir.txt": compiled.graph.to_text(),
        "decisions.txt": "\n".join(f"{d.node}: {'stored' if d.stored else 'inlined'} ({d.reason})"
                                   for d in compiled.decisions),
        "fusion_log.txt": "\n".join(str(r) for r in compiled.fusion_log),
        "kernels.txt": "\n".join(str(k) for k in compiled.kernels),
        "source.txt": compiled.source,
        "wrapper.py": compiled.wrapper,
        "summary.txt": summary(compiled),
    }
    for name, text in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text + "\n")
