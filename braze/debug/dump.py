"""Debug output for one compiled graph (``BRAZE_DEBUG``, ``BRAZE_DEBUG_DIR``, ``TORCH_LOGS``).

Takes: a ``CompiledGraph``. Gives: log records on braze's loggers (``braze/logs.py``):
``braze.compiler`` INFO, one line per graph and its notes; ``braze.fuse`` DEBUG, its kernels,
inlining and fusion decisions; ``braze.codegen`` DEBUG, its generated code and wrapper
(``config.debug`` 1, 2 and 3 turn them on) and, with a debug directory, one folder per graph
(``folder_name``) holding the ATen graph, braze's IR, the fusion log, the generated source and the wrapper.
"""
from __future__ import annotations

import logging
import os

from braze import config, logs
from braze.debug.notes import notes


def summary(compiled) -> str:
    t = compiled.timings
    return (f"braze {compiled.name} ({compiled.kind}): {len(compiled.kernels)} kernels, "
            f"{len(compiled.externs)} externs, {len(compiled.fallbacks)} fallbacks, "
            f"{sum(t.values()):.1f} ms ({', '.join(f'{k} {v:.1f}' for k, v in t.items())})"
            f"{', cache hit' if compiled.cache_hit else ''}")


def dump(compiled) -> None:
    logs.follow_debug_knob()
    if logs.GRAPHS.isEnabledFor(logging.INFO):
        logs.GRAPHS.info("%s", summary(compiled))
        for note in notes(compiled):
            logs.GRAPHS.info("  note: %s", note)
    if logs.FUSION.isEnabledFor(logging.DEBUG):
        for line in _decisions(compiled):
            logs.FUSION.debug("  %s", line)
    if logs.CODE.isEnabledFor(logging.DEBUG):
        logs.CODE.debug("%s", compiled.source)
        logs.CODE.debug("%s", compiled.wrapper)
    if config.debug_dir:
        write(compiled, os.path.join(config.debug_dir, folder_name(compiled)))


def folder_name(compiled) -> str:
    """``0-1-graph0``: Dynamo's compile id and the graph's name (numbered per compiled function)."""
    compile_id = getattr(compiled, "compile_id", "")
    return f"{compile_id.replace('/', '-')}-{compiled.name}" if compile_id else compiled.name


def _decisions(compiled) -> list:
    return ([str(k) for k in compiled.kernels] + [f"fallback {f}" for f in compiled.fallbacks]
            + [f"{d.node}: {'stored' if d.stored else 'inlined'} ({d.reason})" for d in compiled.decisions]
            + [str(record) for record in compiled.fusion_log])


def write(compiled, folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    files = {
        "aten_graph.py": compiled.fx_code,
        "ir.txt": compiled.graph.to_text() if compiled.graph is not None else "(no IR: loaded from the trace cache)",
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
