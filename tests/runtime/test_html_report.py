"""The HTML report (``braze.report(fn, *args).save(path)``, ``config.report``) and
``braze.profile``: pages for a GPT-2-like block and a ResNet block (forward and backward)
name every kernel, draw the fused graph (where Graphviz's ``dot`` is installed; a clear
message where it is not), parse with balanced tags, carry the sortable and filterable
fusion table; the knob writes one page per compiled function; profiling times every kernel.
Headless Chromium, where it is installed, loads the pages with no error, shows every kernel,
and sorts and filters the fusion table."""
import html.parser
import math
import os
import re
import shutil
import subprocess

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import braze
from braze.debug import graph_drawing
from braze.debug.highlight import highlight, kernel_source
from headless_browser import BROWSER, load_page
from helpers import rand

DOT = shutil.which("dot")
NODE = shutil.which("node")
try:
    import graphviz  # noqa: F401
    GRAPHVIZ = True
except ImportError:
    GRAPHVIZ = False


class GPT2Block(nn.Module):
    """Pre-norm causal self-attention and a tanh-GELU MLP, with residuals (GPT-2's block)."""

    def __init__(self, dim=32, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        attention = scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(attention.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class ResNetBlock(nn.Module):
    """conv 3x3, batch norm, relu, conv 3x3, batch norm, the residual, relu."""

    def __init__(self, channels=8):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1, self.bn2 = nn.BatchNorm2d(channels), nn.BatchNorm2d(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


MODELS = {"gpt2_block": (GPT2Block, (2, 8, 32)), "resnet_block": (ResNetBlock, (2, 8, 8, 8))}


@pytest.fixture(scope="module", params=list(MODELS))
def model_report(request):
    """The report of a model's forward and backward, and its page (one compile per module)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    make, shape = MODELS[request.param]
    model = make()
    with braze.config.patch(strict=True, graph_cache=False):
        report = braze.report(model, rand(*shape, grad=True))
    torch._dynamo.reset()
    return request.param, report, report.html(f"braze: {request.param}")


class TagBalance(html.parser.HTMLParser):
    """Every element closed in order (void elements aside)."""
    VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col", "embed", "source", "track", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()
        else:
            self.errors.append(f"</{tag}> at {self.getpos()} closes {self.stack[-3:]}")


def assert_balanced(text: str) -> None:
    parser = TagBalance()
    parser.feed(text)
    parser.close()
    assert not parser.errors, parser.errors[:5]
    assert not parser.stack, f"unclosed: {parser.stack[-5:]}"


def sections(text: str) -> list:
    return re.split(r'<section id="g\d+">', text)[1:]


def test_page_names_every_kernel_of_every_graph(model_report):
    name, report, text = model_report
    kinds = [g.kind for g in report.graphs]
    assert "forward" in kinds and "backward" in kinds, kinds
    assert len(report.kernels) >= 2 * len(report.graphs) - 1, str(report)
    parts = sections(text)
    assert len(parts) == len(report.graphs)
    for graph, part in zip(report.graphs, parts):
        assert f"{graph.name} [{graph.compile_id}] ({graph.kind})" in part
        for kernel in graph.kernels:
            assert f"<td>{kernel.name}</td>" in part, f"{name}: {graph.name} {kernel.name} missing"
            assert re.search(rf"(void|def)</span> {kernel.name}\(", part), f"{name}: no source of {kernel.name}"
        assert "IR after inlining" in part and graph.graph.to_text().splitlines()[0].split(":")[0] in part


def test_page_parses_with_balanced_tags_and_is_self_contained(model_report):
    _, _, text = model_report
    assert text.startswith("<!DOCTYPE html>")
    assert_balanced(text)
    assert not re.search(r'<(script|link|img)[^>]+(src|href)=', text), "an external resource"
    assert 'class="sortable"' in text and 'class="reason-filter"' in text
    assert "Fusion candidates" in text and "Inlining decisions" in text


def test_page_draws_the_fused_graph(model_report):
    name, report, text = model_report
    for graph, part in zip(report.graphs, sections(text)):
        if DOT and GRAPHVIZ:
            assert "<svg" in part and "</svg>" in part, f"{name} {graph.name}: no drawing"
            for kernel in graph.kernels:
                assert f"cluster_{kernel.name}" in part  # dot titles each cluster's <g> with its name
        else:
            assert '<p class="missing">No drawing: ' in part
            assert "<svg" not in part


@pytest.mark.skipif(not GRAPHVIZ, reason="the graphviz Python package is not installed")
def test_dot_source_clusters_kernels_and_marks_externs(model_report):
    name, report, _ = model_report
    for graph in report.graphs:
        source = graph_drawing.dot_source(graph)
        for kernel in graph.kernels:
            if kernel.nodes:
                assert f"subgraph cluster_{kernel.name}" in source, f"{name} {graph.name} {kernel.name}"
        if graph.externs:
            assert "shape=component" in source  # extern calls drawn apart from kernels
        crossing = re.findall(r'-> \w+ \[label="[\d.]+ (?:B|KiB|MiB)"', source)
        assert crossing or not graph.kernels, f"{name} {graph.name}: no edge labelled with its bytes"


def test_refused_fusions_are_dashed_with_their_reason():
    x, w = rand(32, 64), rand(64)
    report = braze.report(lambda x, w: F.layer_norm(x, (64,), w).relu() + x.sum(0), x, w)
    graph = report.graphs[0]
    refused = graph_drawing.refused_fusions(graph)
    assert refused and refused[0].reason is braze.Reason.DOMAIN
    if GRAPHVIZ:
        source = graph_drawing.dot_source(graph)
        assert re.search(r"style=dashed[^\]]*tooltip=\"not fused: buf\d+ \+ buf\d+ \[[a-z-]+\]: different iteration "
                         r"spaces", source), source
    # dot titles an edge "a->b"; the page's SVG titles a refused fusion's edge with its reason
    svg = ('<?xml version="1.0"?>\n<!DOCTYPE svg>\n<svg width="8pt"><!-- graph0 -->'
           '<g id="refused0" class="edge">\n<title>buf1&#45;&gt;buf9</title><path d="M0,0"/></g></svg>')
    inline = graph_drawing.inline_svg(svg, refused)
    assert inline.startswith("<svg") and "<!--" not in inline
    assert "<title>not fused: " in inline and "different iteration spaces" in inline and "&#45;&gt;" not in inline


def test_page_without_dot_says_so_and_keeps_the_rest(monkeypatch):
    monkeypatch.setattr(graph_drawing.shutil, "which", lambda name: None)
    x = rand(16, 32)
    report = braze.report(lambda x: (x.sin() + 1).sum(-1), x)
    text = report.html()
    missing = "dot program is not on PATH" if GRAPHVIZ else "graphviz Python package is not installed"
    assert f'<p class="missing">No drawing: ' in text and missing in text and "<svg" not in text
    assert all(f"<td>{k.name}</td>" in text for k in report.kernels) and report.kernels
    assert_balanced(text)


def test_report_knob_writes_one_page_per_compiled_function(tmp_path):
    model = GPT2Block(dim=16)
    compiled = torch.compile(model, backend="braze", options={"report": str(tmp_path)})
    compiled(rand(2, 4, 16, grad=True)).sum().backward()
    pages = sorted(os.listdir(tmp_path))
    assert pages == ["braze-0-0.html"], pages
    text = (tmp_path / pages[0]).read_text()
    assert_balanced(text)
    assert "graph0 [0/0] (forward)" in text and "graph1 [0/0] (backward)" in text
    parts = sections(text)
    assert len(parts) == 2
    with braze.config.patch(report=str(tmp_path / "env")):  # the knob itself (BRAZE_REPORT)
        torch.compile(lambda x: x.cos() * 2, backend="braze")(rand(8))
        torch.compile(lambda x: x.exp() - 1, backend="braze")(rand(8))
    assert len(os.listdir(tmp_path / "env")) == 2
    knob = next(k for k in braze.config.KNOBS if k.name == "report")
    assert knob.env == "BRAZE_REPORT" and knob.default == ""


def test_profile_times_every_kernel_on_the_cpu(capsys):
    model = GPT2Block(dim=32)
    x = rand(2, 8, 32, grad=True)
    report = braze.profile(model, x)
    profile = report.profile
    assert profile.device == "cpu" and profile.runs >= 3 and profile.copy_gbs is None
    timed = {(k.graph, k.kernel) for k in profile.kernels}
    assert timed == {(g.name, k.name) for g in report.graphs for k in g.kernels}
    for k in profile.kernels:
        assert k.ms > 0 and k.calls == 1 and k.bytes > 0 and k.gbs > 0, k
    assert sum(k.ms for k in profile.kernels) < profile.run_ms
    printed = capsys.readouterr().out
    assert "braze profile on cpu" in printed
    assert all(re.search(rf"{k.graph}\s+{k.kernel}\s+[\d.]+ (us|ms)", printed) for k in profile.kernels), printed
    text = report.html()
    assert_balanced(text)
    assert "time/run (us)" in text and "GB/s" in text and "Profile" in text
    assert model.qkv.weight.grad is None  # profiling leaves the caller's gradients alone


def test_kernel_sources_are_cut_per_kernel_and_highlighted(backend):
    x = rand(16, 32)
    report = braze.report(lambda x: (x.sin() + 1).sum(-1) + x.amax(-1), x)
    graph = report.graphs[0]
    for kernel in graph.kernels:
        source = kernel_source(graph.source, kernel.name)
        assert kernel.name in source and len(source) < len(graph.source)
        assert kernel.launch  # launch parameters (threads, or blocks, warps and grid)
        if backend == "triton":
            assert "@triton.jit" in source and "num_warps" in kernel.launch
    assert highlight('def f(x):  # "a" < b\n    return 1.5') == (
        '<span class="k">def</span> f(x):  <span class="c"># &quot;a&quot; &lt; b</span>\n'
        '    <span class="k">return</span> <span class="n">1.5</span>')


# A DOM of one fusion table (three rows: scores 5, 30, 7; reasons a, b, a), enough for the
# page's script: a click on the score heading sorts, a filter shows one reason's rows.
FAKE_DOM = """
function element(attrs, text) {
  return {attrs: attrs || {}, textContent: text || "", children: [], style: {}, listeners: {},
    getAttribute: function (n) { return n in this.attrs ? this.attrs[n] : null; },
    setAttribute: function (n, v) { this.attrs[n] = String(v); },
    addEventListener: function (t, f) { this.listeners[t] = f; },
    classList: {contains: function (c) { return ((attrs || {})["class"] || "").split(" ").indexOf(c) >= 0; }}};
}
var rows = [[5, "a"], [30, "b"], [7, "a"]].map(function (r) {
  var row = element({"data-reason": r[1]});
  row.cells = [element({"data-value": String(r[0])}, String(r[0])), element({}, r[1])];
  return row;
});
var body = {rows: rows.slice(), appendChild: function (row) {
  this.rows.splice(this.rows.indexOf(row), 1); this.rows.push(row); }};
var table = element({id: "g0-fusions"});
table.tBodies = [body];
var heads = [element({"class": "num"}, "score"), element({}, "reason")];
var headRow = element({});
headRow.children = heads;
headRow.parentNode = {parentNode: table};
heads.forEach(function (h) { h.parentNode = headRow; });
var select = element({"class": "reason-filter", "data-table": "g0-fusions"});
var document = {
  querySelectorAll: function (q) { return q === "table.sortable th" ? heads : q === "select.reason-filter" ? [select] : []; },
  getElementById: function (id) { return id === "g0-fusions" ? table : null; }};
"""
CHECK = """
heads[0].listeners.click();
var scores = body.rows.map(function (r) { return r.cells[0].textContent; }).join(",");
if (scores !== "30,7,5") { throw new Error("sorted by score: " + scores); }
heads[0].listeners.click();
scores = body.rows.map(function (r) { return r.cells[0].textContent; }).join(",");
if (scores !== "5,7,30") { throw new Error("sorted back: " + scores); }
select.value = "a";
select.listeners.change();
var shown = body.rows.filter(function (r) { return r.style.display !== "none"; }).length;
if (shown !== 2) { throw new Error("filter shows " + shown); }
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed: the page's script is not run")
def test_page_script_sorts_and_filters(tmp_path):
    text = braze.report(lambda x: x.relu() * 2, rand(8, 8)).html()
    script = re.search(r"<script>(.*?)</script>", text, re.S).group(1)
    path = tmp_path / "page.js"
    path.write_text(FAKE_DOM + script + CHECK)
    done = subprocess.run([NODE, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


# Evaluated in the browser once the page has loaded: per graph section, the kernels of its
# table that are laid out (not hidden) and the kernels its drawing has a cluster for; then a
# click on the score heading of the first fusion table and its filter set to its first reason.
SHOWN_KERNELS = """Array.from(document.querySelectorAll("section"), function (s) {
  var rows = s.querySelectorAll("table[id$='-kernels'] > tbody > tr");
  return {shown: Array.from(rows).filter(function (r) { return r.getClientRects().length > 0; })
                      .map(function (r) { return r.cells[0].textContent; }),
          drawn: Array.from(s.querySelectorAll(".drawing g.cluster > title"), function (t) { return t.textContent; })};
})"""
SORT_AND_FILTER = """(function () {
  var table = document.querySelector("table[id$='-fusions']");
  if (!table) { return null; }
  var col = Array.from(table.tHead.rows[0].cells).findIndex(function (th) { return th.textContent.indexOf("score") === 0; });
  table.tHead.rows[0].cells[col].click();
  var scores = Array.from(table.tBodies[0].rows, function (r) { return parseFloat(r.cells[col].getAttribute("data-value")); });
  var select = document.querySelector("select.reason-filter[data-table='" + table.id + "']");
  select.value = select.options[1].value;
  select.dispatchEvent(new Event("change"));
  var shown = Array.from(table.tBodies[0].rows).filter(function (r) { return r.getClientRects().length > 0; });
  return {table: table.id, scores: scores, reason: select.value,
          shown: shown.map(function (r) { return r.getAttribute("data-reason"); })};
})()"""


@pytest.mark.skipif(BROWSER is None, reason="no chromium, chromium-browser or google-chrome on PATH")
def test_pages_load_in_a_headless_browser(model_report, tmp_path):
    name, report, text = model_report
    path = tmp_path / f"{name}.html"
    path.write_text(text)
    page = load_page(path, [SHOWN_KERNELS, SORT_AND_FILTER], timeout=120)
    errors, (kernels, sorting) = page.errors, page.values
    assert not errors, f"{name}: {errors}"
    assert len(kernels) == len(report.graphs) == len(sections(page.dom))
    for graph, seen in zip(report.graphs, kernels):
        assert seen["shown"] == [k.name for k in graph.kernels], f"{name} {graph.name}: {seen}"
        if DOT and GRAPHVIZ:
            drawn = {k.name for k in graph.kernels if k.nodes}
            assert drawn <= {t.removeprefix("cluster_") for t in seen["drawn"]}, f"{name} {graph.name}: {seen}"
    assert sorting, f"{name}: no fusion table"
    log = report.graphs[int(sorting["table"].split("-")[0][1:])].fusion_log
    assert sorting["scores"] == sorted((float(r.score) for r in log), reverse=True), sorting
    assert sorting["shown"] == [sorting["reason"]] * sum(r.reason.value == sorting["reason"] for r in log), sorting


def test_page_shows_symbolic_sizes_and_guards():
    x = rand(12, 32)
    torch._dynamo.mark_dynamic(x, 0)
    report = braze.report(lambda x: x.softmax(-1) * 2, x)
    graph = report.graphs[0]
    assert graph.sizes is not None and len(report.graphs) == 1
    text = report.html()
    assert_balanced(text)
    assert "Symbolic sizes, guards and run-time checks" in text and "symbols: s" in text
    assert all(f"<td>{k.name}</td>" in text for k in graph.kernels) and graph.kernels
    assert all(k.bytes_read is None for k in graph.kernels)  # sizes are symbols: bytes unknown, no guard added


def test_report_knob_after_a_trace_cache_hit(tmp_path):
    """A graph loaded from the trace cache (no ATen graph) gets its IR rebuilt for its page."""
    def f(x):
        return (x.sin() + 1).softmax(-1)
    x = rand(8, 16)
    with braze.config.patch(graph_cache=True, trace_cache=True, cache_dir=str(tmp_path / "cache")):
        torch.compile(f, backend="braze")(x)
        torch._dynamo.reset()
        out = torch.compile(f, backend="braze", options={"report": str(tmp_path / "pages")})(x)
    torch.testing.assert_close(out, f(x))
    text = (tmp_path / "pages" / "braze-0-0.html").read_text()
    assert "cache hit" in text and "could not be rebuilt" not in text and "sin" in text
    assert_balanced(text)
