"""braze's messages through Python's logging (``braze/logs.py``): ``BRAZE_DEBUG`` levels as logger
levels, the user's own levels and handlers, ``TORCH_LOGS``; a graph run eagerly is logged and its
warning says "an inference graph"; progress on stderr for a long compile (``braze/progress.py``),
only on a terminal and unless turned off; ``python -m braze.config`` without runpy's warning and
with every value whole; the note on PyTorch's native fast path."""
import io
import logging
import os
import subprocess
import sys
import threading
import warnings

import pytest
import torch

import braze
from braze import logs, progress


def _compile_once(fn=lambda x: (x.sin() + 1).sum(1), *args):
    args = args or (torch.randn(8, 16),)
    out = torch.compile(fn, backend="braze")(*args)
    torch.testing.assert_close(out, fn(*args))


def _braze_records(caplog) -> list:
    return [r for r in caplog.records if r.name.startswith("braze")]


@pytest.fixture(autouse=True)
def knob_levels_restored():
    """Each test leaves the braze loggers as it found them (the knob back at 0)."""
    yield
    with braze.config.patch(debug=0):
        logs.follow_debug_knob()


def test_quiet_by_default(caplog):
    """The knob at 0 and no level set on a braze logger: the root's WARNING lets nothing through."""
    with braze.config.patch(debug=0):
        _compile_once()
    assert logging.getLogger("braze").level == logging.NOTSET
    assert _braze_records(caplog) == []


@pytest.mark.parametrize("level", [1, 2, 3])
def test_debug_knob_maps_onto_logger_levels(caplog, level):
    with braze.config.patch(debug=level):
        _compile_once()
    records = _braze_records(caplog)
    summaries = [r for r in records if r.name == "braze.compiler" and r.levelno == logging.INFO]
    assert len(summaries) == 1 and summaries[0].getMessage().startswith("braze graph")
    assert "(inference): 1 kernels" in summaries[0].getMessage()
    fusion = [r.getMessage() for r in records if r.name == "braze.fuse"]
    code = [r.getMessage() for r in records if r.name.startswith("braze.codegen")]
    assert bool(fusion) == (level >= 2)
    assert any("kernel0 [cpp" in m for m in fusion) == (level >= 2)
    assert any("def call(args)" in m for m in code) == (level >= 3)
    assert logging.getLogger("braze").level == (logging.INFO if level == 1 else logging.DEBUG)


def test_knob_back_at_zero_leaves_levels_to_the_user():
    with braze.config.patch(debug=2):
        logs.follow_debug_knob()
        assert logging.getLogger("braze").level == logging.DEBUG
    logs.follow_debug_knob()
    assert logging.getLogger("braze").level == logging.NOTSET
    assert logging.getLogger("braze.codegen").level == logging.NOTSET


def test_standard_levels_work_without_the_knob(caplog):
    caplog.set_level(logging.DEBUG, logger="braze.fuse")
    with braze.config.patch(debug=0):
        _compile_once()
    fusion = [r.getMessage() for r in _braze_records(caplog) if r.name == "braze.fuse"]
    assert any("kernel0 [cpp row]" in m for m in fusion), fusion
    assert not any(r.name == "braze.codegen" for r in _braze_records(caplog))


def test_a_graph_run_eagerly_is_logged_and_warned_with_its_article(caplog):
    from braze.lower import LOWERINGS
    caplog.set_level(logging.INFO, logger="braze")
    op = torch.ops.aten.exp.default
    original = LOWERINGS[op]
    LOWERINGS[op] = lambda ctx, x: 1 / 0  # a broken rule
    try:
        with braze.config.patch(strict=False), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _compile_once(lambda x: x.exp() + 1)
    finally:
        LOWERINGS[op] = original
    logged = [r.getMessage() for r in _braze_records(caplog) if r.name == "braze.backend"]
    assert len(logged) == 1 and logged[0].startswith("braze: running an inference graph eagerly: aten.exp")
    assert [str(w.message) for w in caught if str(w.message).startswith("braze:")] == logged


def _tty() -> io.StringIO:
    stream = io.StringIO()
    stream.isatty = lambda: True
    return stream


def test_progress_on_a_terminal_after_the_delay(monkeypatch):
    stream = _tty()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    _compile_once(lambda x: (x.sin() + 1).sum(1) + x.cos().sum(1), torch.randn(8, 16))
    text = stream.getvalue()
    assert text.startswith("\r\x1b[K") and text.endswith("\n"), repr(text)
    final = text.rsplit("\r\x1b[K", 1)[1]
    assert final.startswith("braze graph") and " (inference): 1/1 kernels built, " in final, repr(final)


def test_progress_redraws_while_the_compile_runs(monkeypatch):
    stream = _tty()
    monkeypatch.setattr(progress, "DELAY_S", 0.05)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.02)
    monkeypatch.setattr(sys, "stderr", stream)
    with progress.tracking("graph9 (forward)"):
        progress.total(4)
        progress.built(3)
        progress.stage("g++ compiling one library")
        threading.Event().wait(0.3)
        seen = stream.getvalue()
        progress.built(1)
    assert "braze graph9 (forward): 3/4 kernels built, g++ compiling one library, " in seen
    assert seen.count("\r\x1b[K") >= 2  # redrawn in place
    final = stream.getvalue().rsplit("\r\x1b[K", 1)[1]
    assert final.startswith("braze graph9 (forward): 4/4 kernels built, ") and final.endswith(" s\n")


@pytest.mark.parametrize("why", ["not a terminal", "knob off"])
def test_no_progress(monkeypatch, why):
    stream = io.StringIO() if why == "not a terminal" else _tty()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    with braze.config.patch(progress=why != "knob off"):
        _compile_once()
        with progress.tracking("graph9 (forward)"):
            progress.total(1)
    assert stream.getvalue() == ""


def test_describe_prints_every_value_whole():
    text = braze.config.describe()
    assert "".join(text.split()).count("".join(repr(braze.config.cxx_flags).split())) == 1
    assert repr(braze.config.cache_dir) in text.replace("\n" + " " * 58, "")
    assert all(knob.env in text for knob in braze.config.KNOBS)


@pytest.mark.slow
def test_python_m_braze_config_prints_no_warning():
    env = dict(os.environ, BRAZE_CXX_FLAGS="-O2 " + "-fno-builtin-sinf " * 12)
    proc = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "braze.config"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    assert "".join(proc.stdout.split()).count("-fno-builtin-sinf") == 12


@pytest.mark.slow
def test_torch_logs_selects_braze():
    script = "import torch, braze\nf = torch.compile(lambda x: (x.sin() + 1).sum(1), backend='braze')\n" \
             "f(torch.randn(8, 16))\n"
    env = dict(os.environ, TORCH_LOGS="+braze.fuse", BRAZE_GRAPH_CACHE="0", BRAZE_TRACE_CACHE="0")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "kernel0 [cpp row] aten.sin.default, aten.add.Tensor, aten.sum.dim_IntList" in proc.stderr
    assert "braze graph" not in proc.stderr  # braze.compiler's summary: not asked for


def test_native_fast_path_is_noted_and_turning_it_off_gives_kernels():
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    x = torch.randn(2, 6, 32)
    with torch.no_grad():
        report = braze.explain(layer, x)
        assert len(report.kernels) == 0 and "aten._transformer_encoder_layer_fwd.default" in report.fallbacks
        (note,) = report.notes
        assert "native fast path of nn.TransformerEncoderLayer" in note
        assert "torch.backends.mha.set_fastpath_enabled(False)" in note and "train mode" in note
        assert "note: aten._transformer_encoder_layer_fwd.default" in str(report)
        enabled = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            torch._dynamo.reset()
            report = braze.explain(layer, x)
            out = torch.compile(layer, backend="braze")(x)
            expected = layer(x)
        finally:
            torch.backends.mha.set_fastpath_enabled(enabled)
    assert len(report.kernels) > 0 and report.notes == [] and report.fallbacks == []
    torch.testing.assert_close(out, expected)
