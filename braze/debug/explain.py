"""The report of ``braze.explain``: what braze does with a function, for given arguments.

Takes: the compiled graphs and failures ``braze.backend.explain`` recorded. Gives:
``Report``: the compiled graphs (forward, backward or inference), their kernels (each with the
ATen ops fused into it and its backend), extern and fallback ATen calls,
inlining decisions and the fusion log (every pair considered, with its reason), for a
graph with symbolic sizes its symbols, guards and specializations, what Dynamo did around
braze (graph breaks, recompile limits: ``dynamo``), and a readable table as ``str(report)``.
Buffers are shown with the ATen ops they hold (``buf9 (addmm + gelu)``); graphs are
numbered per compiled function, each shown with Dynamo's compile id (``graph0 [0/0]``).
``report.save("report.html")`` writes it as one HTML page (``debug/html.py``), with the
kernels' times when ``braze.profile`` made it (``report.profile``).

"""
from __future__ import annotations

from dataclasses import dataclass, field

from braze.debug.notes import notes as graph_notes
from braze.fuse.legality import Reason
from braze.ir.graph import ERROR_RECORD


@dataclass
class Report:
    graphs: list = field(default_factory=list)
    failures: list = field(default_factory=list)  # (kind, message) of graphs run eagerly
    dynamo: list = field(default_factory=list)  # graph breaks and recompile limits, with Dynamo's reasons
    profile: object = None  # ``braze.profile``'s kernel times (``debug/profile.Profile``), else None

    def html(self, title: str = "braze report") -> str:
        """The report as one self-contained HTML page (``debug/html.py``)."""
        from braze.debug.html import report_page
        return report_page(self, title)

    def save(self, path: str, title: str = "braze report") -> str:
        """Write ``html()`` to ``path``; returns the path."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.html(title))
        return path

    @property
    def kernels(self) -> list:
        return [k for g in self.graphs for k in g.kernels]

    @property
    def externs(self) -> list:
        return [e for g in self.graphs for e in g.externs]

    @property
    def fallbacks(self) -> list:
        return [f for g in self.graphs for f in g.fallbacks]

    @property
    def fusion_log(self) -> list:
        return [r for g in self.graphs for r in g.fusion_log]

    @property
    def notes(self) -> list:
        """What a graph's counts hide (``debug/notes.py``: a native fast path)."""
        return [n for g in self.graphs for n in graph_notes(g)]

    def graph(self, kind: str):
        """The first graph of a kind: 'forward', 'backward' or 'inference'."""
        return next(g for g in self.graphs if g.kind == kind)

    def kernels_of(self, kind: str) -> list:
        return [k for g in self.graphs if g.kind == kind for k in g.kernels]

    def why_not_fused(self, first: str, second: str) -> list:
        """Fusion-log verdicts for a pair of buffers (in either order)."""
        return [r for r in self.fusion_log if {r.first, r.second} == {first, second}]

    def __str__(self) -> str:
        lines = [f"braze: {len(self.graphs)} graph(s), {len(self.kernels)} kernel(s), "
                 f"{len(self.externs)} extern call(s), {len(self.fallbacks)} fallback(s)"]
        lines += [f"Dynamo: {note}" for note in self.dynamo]
        for g in self.graphs:
            stored = sum(d.stored for d in g.decisions)
            fused = sum(r.fused for r in g.fusion_log)
            compile_id = f" [{g.compile_id}]" if getattr(g, "compile_id", "") else ""
            lines.append(f"\n{g.name}{compile_id} ({g.kind}): {g.node_count} nodes after inlining, "
                         f"{stored} buffers stored, {len(g.decisions) - stored} inlined, "
                         f"{fused} fusions, compiled in {sum(g.timings.values()):.1f} ms")
            lines.append(f"  {'kernel':10} {'backend':8} {'shape':10} ATen ops")
            for k in g.kernels:
                writes = [b for b in k.writes if b != ERROR_RECORD]
                stores = f" -> {', '.join(writes)}" if writes else ""
                lines.append(f"  {k.name:10} {k.backend:8} {k.shape:10} {', '.join(k.ops)}{stores}")
                if k.mutates:
                    lines.append(f"  {'':10} {'':8} {'':10} writes in place: {', '.join(k.mutates)}")
            for e in g.externs:
                lines.append(f"  {'extern':10} {'aten':8} {'':10} {e}")
            for f in g.fallbacks:
                lines.append(f"  {'fallback':10} {'aten':8} {'':10} {f}")
            lines += [f"  note: {note}" for note in graph_notes(g)]
            if getattr(g, "sizes", None) is not None:
                lines += g.sizes.lines()
            for k, site in enumerate(getattr(g, "checks", [])):
                what = "divisor != 0" if site.kind == "divisor" else \
                    f"index into dim {site.dim} of {list(site.shape)}, size {site.size}"
                lines.append(f"  check {k}: {site.op}: {what} (raises {site.exception})")
            refused = [r for r in g.fusion_log if not r.fused and r.reason is not Reason.SAME_KERNEL]
            for r in refused[:8]:
                lines.append(f"  not fused: {buffer_label(g, r.first)} + {buffer_label(g, r.second)}: {r.reason.value}"
                             f"{f' ({r.detail})' if r.detail else ''}")
            if len(refused) > 8:
                lines.append(f"  ... {len(refused) - 8} more refused pairs in .fusion_log")
        for kind, message in self.failures:
            lines.append(f"\n{kind} graph ran eagerly: {message}")
        return "\n".join(lines)


def buffer_label(graph, name: str) -> str:
    """``buf9 (addmm + gelu)``: a buffer of a compiled graph with the ATen ops it holds."""
    ops = getattr(graph, "contents", {}).get(name)
    return f"{name} ({' + '.join(ops)})" if ops else name


def human_bytes(n) -> str:
    """``8.0 KiB``; "?" for None (a symbolic size)."""
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
