"""The fused graph of a compiled graph, drawn with Graphviz, for the report page.

Takes: a ``CompiledGraph`` (its IR after inlining, its kernels, fusion log and buffer
contents) and optionally ``braze.profile``'s times. Gives: ``digraph(compiled)``, a
``graphviz.Digraph`` (the ``graphviz`` package from the package index), and
``drawing(compiled)``: ``(svg, message)``, the SVG text that ``dot -Tsvg`` renders (None when it
cannot, then ``message`` says why: the package or the ``dot`` program missing, or no IR).

The drawing: each IR node (a graph input, a buffer braze realized, an extern call) is one
box labelled with its name and the ATen ops it holds; the buffers a kernel computes sit in
one cluster per kernel (its name, shape and, when profiled, its time); extern calls (ATen
on purpose: matrix products, convolutions) are blue components, fallbacks (ops braze has
no rule for) red octagons, inputs grey ellipses, the outputs one node. An edge is a buffer
read; one that crosses kernels is labelled with the bytes the buffer holds. A refused
fusion is a dashed red edge between its two buffers, its reason on hover (the edge's SVG
``<title>``, and a tooltip); refusals because one side is an extern call (never fused) are
left to the page's fusion table.
"""
from __future__ import annotations

import html
import re
import shutil
import subprocess

from braze.compiler import buffer_bytes
from braze.debug.explain import human_bytes
from braze.fuse.legality import Reason
from braze.ir.dtypes import short
from braze.ir.graph import ExternNode, InputNode

MAX_NODES = 1500  # past this many IR nodes the page shows no drawing (dot would take minutes)
DOT_TIMEOUT_S = 60

STYLES = {
    "input": dict(shape="ellipse", style="filled", fillcolor="#e8e8e8", color="#888888"),
    "buffer": dict(shape="box", style="rounded,filled", fillcolor="#fff7d6", color="#b08800"),
    "extern": dict(shape="component", style="filled", fillcolor="#d6e8ff", color="#1f5fbf"),
    "fallback": dict(shape="octagon", style="filled", fillcolor="#ffd6d6", color="#c00000"),
    "output": dict(shape="doublecircle", style="filled", fillcolor="#e0f0e0", color="#2f7f2f"),
}


def digraph(compiled, profile=None):
    """The drawing's ``graphviz.Digraph`` (raises ImportError without the package)."""
    import graphviz
    graph = compiled.graph
    dot = graphviz.Digraph(compiled.name, graph_attr=dict(rankdir="TB", fontname="Helvetica", fontsize="11"),
                           node_attr=dict(fontname="Helvetica", fontsize="10"),
                           edge_attr=dict(fontname="Helvetica", fontsize="9", color="#555555"))
    kernel_of = {n: k for k in compiled.kernels for n in k.nodes}
    sizes = buffer_bytes(graph)
    _nodes(dot, compiled, graph, kernel_of, profile)
    _edges(dot, graph, kernel_of, sizes)
    _refused(dot, compiled, graph)
    return dot


def _nodes(dot, compiled, graph, kernel_of: dict, profile) -> None:
    """Each IR node: in its kernel's cluster, or on its own (inputs, extern calls)."""
    clusters: dict = {}
    for node in graph.nodes:
        kind, label = _kind_and_label(compiled, node)
        kernel = kernel_of.get(node.name)
        if kernel is None:
            dot.node(node.name, label, **STYLES[kind])
        else:
            clusters.setdefault(kernel.name, []).append((node.name, label, kind))
    for kernel in compiled.kernels:
        if kernel.name in clusters:
            dot.subgraph(_cluster(type(dot), compiled, kernel, clusters[kernel.name], profile))
    dot.node("outputs", "outputs", **STYLES["output"])


def _cluster(digraph_class, compiled, kernel, members: list, profile):
    timed = profile.of(compiled.name, kernel.name) if profile is not None else None
    time = f", {timed.ms * 1000:.1f} us" if timed is not None else ""
    cluster = digraph_class(f"cluster_{kernel.name}")
    cluster.attr(label=f"{kernel.name} ({kernel.shape or kernel.backend}{time})", style="rounded,filled",
                 fillcolor="#fffdf0", color="#b08800", fontname="Helvetica", fontsize="11",
                 tooltip=f"{kernel.name}: {', '.join(kernel.ops)}")
    for name, label, kind in members:
        cluster.node(name, label, **STYLES[kind])
    return cluster


def _kind_and_label(compiled, node) -> tuple:
    dims = f"{short(node.dtype)}[{', '.join(str(s) for s in node.sizes or ())}]" if node.dtype is not None else ""
    if isinstance(node, InputNode):
        return "input", f"{node.name}\n{'constant ' if node.constant is not None else ''}{dims}"
    if isinstance(node, ExternNode):
        outs = ", ".join(o[0] for o in node.outputs if o is not None)
        target = str(node.target)
        return ("fallback" if node.is_fallback else "extern"), \
            f"{'fallback: ' if node.is_fallback else ''}{target}\n-> {outs or node.name}"
    ops = compiled.contents.get(node.name) or [o.split(".")[1] if o.startswith("aten.") else o for o in node.origins]
    return "buffer", f"{node.name} {dims}\n{_wrap(' + '.join(dict.fromkeys(ops)))}"


def _wrap(text: str, width: int = 36) -> str:
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + len(word) > width:
            lines.append(line)
            line = ""
        line += ("" if not line else " ") + word
    return "\n".join(lines + [line])


def _edges(dot, graph, kernel_of: dict, sizes: dict) -> None:
    seen = set()
    for node in graph.nodes:
        for buffer in node.reads():
            source = graph.producer(buffer).name if buffer in graph.by_name else None
            if source is None or (source, node.name) in seen:
                continue
            seen.add((source, node.name))
            dot.edge(source, node.name, **_edge_label(source, node.name, buffer, kernel_of, sizes))
    for k, out in enumerate(graph.outputs):
        if out.buffer is not None and out.buffer in graph.by_name:
            dot.edge(graph.producer(out.buffer).name, "outputs", label=f"out {k}: {human_bytes(sizes.get(out.buffer))}",
                     fontcolor="#2f7f2f", color="#9fc99f")


def _edge_label(source: str, target: str, buffer: str, kernel_of: dict, sizes: dict) -> dict:
    inside = source in kernel_of and kernel_of.get(source) is kernel_of.get(target)
    if inside:
        return dict(tooltip=f"{buffer}: read inside {kernel_of[source].name}")
    size = human_bytes(sizes.get(buffer))
    return dict(label=size, tooltip=f"{buffer}: {size} through memory")


def _refused(dot, compiled, graph) -> None:
    for k, record in enumerate(refused_fusions(compiled)):
        if record.first in graph.by_name and record.second in graph.by_name:
            dot.edge(graph.producer(record.first).name, graph.producer(record.second).name,
                     id=f"refused{k}", style="dashed", color="#d00000", penwidth="1.5", weight="0",
                     arrowhead="none", tooltip=_reason(record))


def refused_fusions(compiled) -> list:
    """The refusals drawn: all but those that go without saying (already in one kernel, or an
    extern call, which is never fused), which the page's fusion table still lists."""
    return [r for r in compiled.fusion_log if not r.fused and r.reason not in (Reason.SAME_KERNEL, Reason.EXTERN)]


def _reason(record) -> str:
    detail = f" ({record.detail})" if record.detail else ""
    return (f"not fused: {record.first} + {record.second} [{record.kind}]: {record.reason.value}{detail}; "
            f"fusing would save {record.score} bytes")


def drawing(compiled, profile=None) -> tuple:
    """``(svg, message)``: the drawing as inline SVG text, or None and why not."""
    try:
        import graphviz  # noqa: F401 (builds the DOT text)
    except ImportError:
        return None, ("No drawing: the graphviz Python package is not installed "
                      "(pip install graphviz; it also needs Graphviz's dot program).")
    if shutil.which("dot") is None:
        return None, ("No drawing: Graphviz's dot program is not on PATH (install Graphviz: "
                      "apt install graphviz, brew install graphviz, conda install graphviz). "
                      "The DOT source is below; everything else on this page is complete.")
    try:
        if compiled.graph is None or len(compiled.graph.nodes) > MAX_NODES:
            return None, f"No drawing: {'no IR' if compiled.graph is None else 'over %d IR nodes' % MAX_NODES}."
        done = subprocess.run(["dot", "-Tsvg"], input=digraph(compiled, profile).source, capture_output=True,
                              text=True, timeout=DOT_TIMEOUT_S)
        if done.returncode != 0:
            return None, f"No drawing: dot failed: {done.stderr.strip()[:500]}"
        svg = done.stdout
    except subprocess.TimeoutExpired:
        return None, f"No drawing: dot ran past {DOT_TIMEOUT_S} s."
    except Exception as exc:  # a report never fails for its drawing
        return None, f"No drawing: {type(exc).__name__}: {exc}"
    return inline_svg(svg, refused_fusions(compiled)), ""


def inline_svg(svg: str, refused: list) -> str:
    """``dot``'s SVG ready to sit inside HTML: no XML prolog or doctype, and each refused
    fusion's edge titled with its reason (a browser shows an SVG ``<title>`` on hover)."""
    svg = svg[svg.index("<svg"):] if "<svg" in svg else svg
    svg = re.sub(r"<!--.*?-->", "", svg, flags=re.S)

    def titled(match):
        record = refused[int(match.group(2))]
        return f"{match.group(1)}<title>{html.escape(_reason(record))}</title>"
    return re.sub(r'(<g id="refused(\d+)" class="edge">\s*)<title>.*?</title>', titled, svg, flags=re.S)


def dot_source(compiled, profile=None) -> str:
    """The DOT text of the drawing ("" without the graphviz package or the IR)."""
    try:
        return digraph(compiled, profile).source
    except Exception:  # (ImportError; or an IR that cannot be rebuilt)
        return ""
