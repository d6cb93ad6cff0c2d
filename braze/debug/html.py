"""The report as one self-contained HTML page: ``Report.save(path)`` and ``config.report``.

Takes: a ``braze.debug.explain.Report`` (``report_page``), or compiled graphs one by one as a
real run compiles them (``add_to_page``: ``BRAZE_REPORT=dir`` / ``options={"report": dir}``,
one page per compiled function, ``braze-<compile id>.html``, rewritten as each of its graphs
arrives: the forward at the first call, the backward at the first backward). Gives: HTML with
no external resource: per graph its summary and notes, the fused graph drawn
(``graph_drawing``: inline SVG, or a message saying why not), the kernel table (shape,
launch parameters, ATen ops, bytes read and written, times when profiled, each kernel's
source highlighted in a ``<details>``: ``highlight``), extern and fallback calls, the inlining
decisions, every fusion candidate (a table sortable by any column and filtered by reason), the
symbolic sizes and guards, the run-time checks, the IR, the wrapper and the ATen graph. A few
lines of inline JavaScript sort and filter tables; everything shows without it.
"""
from __future__ import annotations

import html
import os
import tempfile

from braze.debug import graph_drawing
from braze.debug.dump import folder_name, summary
from braze.debug.explain import buffer_label, human_bytes
from braze.debug.highlight import highlight, kernel_source
from braze.debug.notes import notes as graph_notes

_PAGES: dict = {}  # (directory, compile id) -> the sections of the graphs written so far

STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; margin-top: 2em; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.4em 0; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } table.sortable th { cursor: pointer; }
table.sortable th:after { content: "\\a0\\2195"; color: #aaa; }  /* a no-break space: the arrow stays by its name */
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f8f8f8; border: 1px solid #e4e4e4; padding: 0.6em; overflow-x: auto; font-size: 0.8em; }
.drawing { overflow: auto; border: 1px solid #e4e4e4; max-height: 80vh; }
.missing { background: #fff3cd; border: 1px solid #e0c060; padding: 0.6em; }
.stored { color: #7a5b00; } .inlined { color: #1f5fbf; } .refused { color: #c00000; } .fused { color: #2f7f2f; }
.c { color: #6a737d; } .s { color: #032f62; } .n { color: #005cc5; } .k { color: #d73a49; font-weight: bold; }
.legend span { display: inline-block; padding: 0 6px; margin-right: 6px; border: 1px solid #999; }
"""

SCRIPT = """
(function () {
  function cellValue(row, col) {
    var cell = row.cells[col];
    if (!cell) { return ""; }
    var value = cell.getAttribute("data-value");
    return value === null ? cell.textContent.trim() : value;
  }
  function sortBy(table, col, numeric, descending) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, col), y = cellValue(b, col), order;
      if (numeric) { order = (parseFloat(x) || 0) - (parseFloat(y) || 0); }
      else { order = x.localeCompare(y); }
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable th"), function (th) {
    th.addEventListener("click", function () {
      var table = th.parentNode.parentNode.parentNode;
      var col = Array.prototype.indexOf.call(th.parentNode.children, th);
      var descending = th.getAttribute("data-order") !== "desc";
      th.setAttribute("data-order", descending ? "desc" : "asc");
      sortBy(table, col, th.classList.contains("num"), descending);
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll("select.reason-filter"), function (select) {
    select.addEventListener("change", function () {
      var table = document.getElementById(select.getAttribute("data-table"));
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        var shown = !select.value || row.getAttribute("data-reason") === select.value;
        row.style.display = shown ? "" : "none";
      });
    });
  });
})();
"""


def report_page(report, title: str = "braze report") -> str:
    """The page of a ``Report`` (``braze.explain``, ``braze.report``, ``braze.profile``)."""
    head = [f"<p>{html.escape(str(report).splitlines()[0])}</p>"]
    head += _list("What Dynamo did", report.dynamo)
    head += _list("Graphs run eagerly", [f"{kind} graph: {message}" for kind, message in report.failures])
    if report.profile is not None:
        head += _profile_summary(report.profile)
    sections = [graph_section(g, k, report.profile) for k, g in enumerate(report.graphs)]
    return page(title, head, sections, report.graphs)


def page(title: str, head: list, sections: list, graphs: list = ()) -> str:
    nav = "".join(f'<li><a href="#g{k}">{html.escape(_graph_title(g))}</a></li>' for k, g in enumerate(graphs))
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>", f"<style>{STYLE}</style>", "</head>", "<body>",
        f"<h1>{html.escape(title)}</h1>", *head, f"<ul>{nav}</ul>" if nav else "",
        _legend(), *sections, f"<script>{SCRIPT}</script>", "</body>", "</html>", ""])


def add_to_page(compiled, directory: str) -> str:
    """Add a graph to its compiled function's page in ``directory`` (``config.report``) and
    write the page; returns its path."""
    os.makedirs(directory, exist_ok=True)
    key = (os.path.abspath(directory), compiled.compile_id)
    sections = _PAGES.setdefault(key, [])
    sections.append((_graph_title(compiled), graph_section(compiled, len(sections))))
    name = f"braze-{compiled.compile_id.replace('/', '-') or 'graphs'}.html"
    title = f"braze: compiled function [{compiled.compile_id}]" if compiled.compile_id else "braze: graphs"
    nav = "".join(f'<li><a href="#g{k}">{html.escape(t)}</a></li>' for k, (t, _) in enumerate(sections))
    text = page(title, [f"<ul>{nav}</ul>"], [s for _, s in sections])
    path = os.path.join(directory, name)
    handle, temporary = tempfile.mkstemp(dir=directory, suffix=".html.tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temporary, path)
    return path


def _graph_title(compiled) -> str:
    compile_id = f" [{compiled.compile_id}]" if compiled.compile_id else ""
    return f"{compiled.name}{compile_id} ({compiled.kind})"


def _legend() -> str:
    parts = [(style["fillcolor"], what) for what, style in
             (("kernel's buffer", graph_drawing.STYLES["buffer"]), ("extern call (ATen on purpose)",
              graph_drawing.STYLES["extern"]), ("fallback (no rule)", graph_drawing.STYLES["fallback"]),
              ("input", graph_drawing.STYLES["input"]))]
    spans = "".join(f'<span style="background:{color}">{html.escape(what)}</span>' for color, what in parts)
    return (f'<p class="legend">Drawings: {spans} boxes grouped per kernel; edges between kernels carry '
            f'their bytes; dashed red: a fusion refused (its reason on hover).</p>')


def _list(title: str, lines: list) -> list:
    if not lines:
        return []
    return [f"<h3>{html.escape(title)}</h3>", "<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>"]


def _profile_summary(profile) -> list:
    copy = f"; the device copies at {profile.copy_gbs:.0f} GB/s" if profile.copy_gbs else ""
    return [f"<h3>Profile</h3><p>On {html.escape(profile.device)}: {profile.runs} runs, "
            f"{profile.run_ms:.3f} ms per run, {sum(k.ms for k in profile.kernels):.3f} ms of it in kernels{copy}; "
            f"times in the kernel tables are per run.</p>", f"<pre>{html.escape(profile.table())}</pre>"]


def graph_section(compiled, index: int, profile=None) -> str:
    gid = f"g{index}"
    parts = [f'<section id="{gid}">', f"<h2>{html.escape(_graph_title(compiled))}</h2>",
             f"<p>{html.escape(summary(compiled))}</p>"]
    notes = list(graph_notes(compiled)) + ([f"moves data between the CPU and its device: {compiled.host_traffic}"]
                                           if compiled.host_traffic else [])
    parts += _list("Notes", notes)
    parts += _drawing(compiled, profile)
    parts += _kernels(compiled, gid, profile)
    parts += _list("Extern calls (ATen on purpose)", compiled.externs)
    parts += _list("Fallbacks (ATen ops braze has no rule for)", compiled.fallbacks)
    parts += _decisions(compiled, gid)
    parts += _fusions(compiled, gid)
    parts += _sizes(compiled)
    parts += [_details("IR after inlining", _ir_text(compiled), open_=True),
              _details("Wrapper (Python)", compiled.wrapper, code=True),
              _details("ATen graph braze received", compiled.fx_code or "(not at hand: loaded from the trace cache)",
                       code=True),
              _details(f"Generated source, whole ({compiled.kernels[0].backend if compiled.kernels else ''})",
                       compiled.source, code=True),
              f"<p>Debug folder name: {html.escape(folder_name(compiled))}</p>", "</section>"]
    return "\n".join(parts)


def _drawing(compiled, profile) -> list:
    svg, message = graph_drawing.drawing(compiled, profile)
    out = ["<h3>Fused graph</h3>"]
    out.append(f'<div class="drawing">{svg}</div>' if svg else f'<p class="missing">{html.escape(message)}</p>')
    source = graph_drawing.dot_source(compiled, profile)
    if source:
        out.append(_details("DOT source (for dot -Tsvg)", source))
    return out


def _kernels(compiled, gid: str, profile) -> list:
    timed = profile is not None
    gpu = timed and profile.copy_gbs is not None
    heads = ["kernel", "backend", "shape", "launch", "ATen ops", "reads", "writes", "#bytes read", "#bytes written"]
    heads += ["#time/run (us)", "#calls/run", "#GB/s"] + (["#% of copy"] if gpu else []) if timed else []
    rows = []
    for k in compiled.kernels:
        cells = [_td(k.name), _td(k.backend), _td(k.shape), _td(k.launch), _td(", ".join(k.ops)),
                 _td(", ".join(buffer_label(compiled, b) for b in k.reads)),
                 _td(", ".join(buffer_label(compiled, b) for b in k.writes)),
                 _num(k.bytes_read, human_bytes(k.bytes_read)), _num(k.bytes_written, human_bytes(k.bytes_written))]
        if timed:
            cells += _time_cells(profile.of(compiled.name, k.name), gpu)
        source = kernel_source(compiled.source, k.name)
        cells.append(f"<td>{_details('source', source, code=True) if source else ''}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return ["<h3>Kernels</h3>", _table(f"{gid}-kernels", heads + ["source"], rows) if rows else "<p>No kernel.</p>"]


def _time_cells(time, gpu: bool) -> list:
    if time is None:
        return [_td("not run")] + [_td("")] * (3 if gpu else 2)
    gbs, share = time.gbs, time.copy_share
    cells = [_num(time.ms * 1000, f"{time.ms * 1000:.1f}"), _num(time.calls, f"{time.calls:g}"),
             _num(gbs, f"{gbs:.1f}" if gbs is not None else "?")]
    return cells + ([_num(share, f"{share:.0f} %" if share is not None else "?")] if gpu else [])


def _decisions(compiled, gid: str) -> list:
    rows = [f'<tr>{_td(d.node)}<td class="{"stored" if d.stored else "inlined"}">'
            f'{"stored" if d.stored else "inlined"}</td>{_td(d.reason)}</tr>' for d in compiled.decisions]
    if not rows:
        return []
    return ["<h3>Inlining decisions</h3>",
            _details(f"{sum(d.stored for d in compiled.decisions)} stored, "
                     f"{sum(not d.stored for d in compiled.decisions)} inlined",
                     _table(f"{gid}-decisions", ["buffer", "decision", "why"], rows), raw=True)]


def _fusions(compiled, gid: str) -> list:
    log = compiled.fusion_log
    if not log:
        return ["<h3>Fusion candidates</h3>", "<p>No candidate pair.</p>"]
    rows = []
    for k, r in enumerate(log):
        verdict = "fused" if r.fused else "refused"
        rows.append(f'<tr data-reason="{html.escape(r.reason.value)}">{_num(k, str(k))}'
                    f"{_td(buffer_label(compiled, r.first))}{_td(buffer_label(compiled, r.second))}{_td(r.kind)}"
                    f'{_num(r.score, str(r.score))}<td class="{verdict}">{verdict}</td>'
                    f"{_td(r.reason.value)}{_td(r.detail)}</tr>")
    counts: dict = {}
    for r in log:
        counts[r.reason.value] = counts.get(r.reason.value, 0) + 1
    options = "".join(f'<option value="{html.escape(v)}">{html.escape(v)} ({n})</option>' for v, n in counts.items())
    table_id = f"{gid}-fusions"
    return ["<h3>Fusion candidates</h3>",
            f'<p>Every pair the scheduler considered; score: bytes of memory traffic fusing saves. '
            f'Click a column to sort. Reason: <select class="reason-filter" data-table="{table_id}">'
            f'<option value="">all ({len(log)})</option>{options}</select></p>',
            _table(table_id, ["#order", "first", "second", "kind", "#score (bytes)", "verdict", "reason", "detail"],
                   rows)]


def _sizes(compiled) -> list:
    lines = compiled.sizes.lines() if getattr(compiled, "sizes", None) is not None else []
    for k, site in enumerate(compiled.checks):
        what = "divisor != 0" if site.kind == "divisor" else \
            f"index into dim {site.dim} of {list(site.shape)}, size {site.size}"
        lines.append(f"  check {k}: {site.op}: {what} (raises {site.exception})")
    if not lines:
        return []
    return ["<h3>Symbolic sizes, guards and run-time checks</h3>",
            f"<pre>{html.escape(chr(10).join(line.strip() for line in lines))}</pre>"]


def _ir_text(compiled) -> str:
    try:
        graph = compiled.graph
    except Exception as exc:  # a rebuild that fails must not lose the rest of the page
        return f"(the IR could not be rebuilt: {type(exc).__name__}: {exc})"
    return graph.to_text() if graph is not None else "(no IR)"


def _table(table_id: str, heads: list, rows: list) -> str:
    """A sortable table; a heading starting with ``#`` sorts as numbers."""
    ths = "".join(f'<th class="num">{html.escape(h[1:])}</th>' if h.startswith("#") else f"<th>{html.escape(h)}</th>"
                  for h in heads)
    return (f'<table class="sortable" id="{table_id}"><thead><tr>{ths}</tr></thead>'
            f"<tbody>\n{chr(10).join(rows)}\n</tbody></table>")


def _td(text) -> str:
    return f"<td>{html.escape(str(text))}</td>"


def _num(value, text: str) -> str:
    shown = "" if value is None else f' data-value="{value}"'
    return f'<td class="num"{shown}>{html.escape(text)}</td>'


def _details(title: str, body: str, code: bool = False, open_: bool = False, raw: bool = False) -> str:
    inner = body if raw else f"<pre>{highlight(body) if code else html.escape(body)}</pre>"
    return f"<details{' open' if open_ else ''}><summary>{html.escape(title)}</summary>{inner}</details>"
