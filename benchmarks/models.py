"""Whole models: eager PyTorch, Inductor and braze side by side, inference and a training step.

Run: ``python -m benchmarks.models --device cuda --out docs/benchmarks.md``
(``--only gpt2,llama,bert,resnet50,vit``, ``--modes infer,train``, ``--tiny``
for a CPU smoke test, ``--budget-s S``, ``--no-warm``).

Takes: the models and steps of ``benchmarks.model_zoo`` (random weights).
Gives: on stdout, one markdown table row per (model, mode) as soon as it is
measured, then the whole report; with ``--out FILE`` the report replaces the
``models-cuda`` (or ``models-cpu``) section of FILE, rewritten after every row
so that a run stopped at a time limit keeps what it measured. Per row: median
run time of eager, Inductor (``torch.compile(m)``) and braze
(``torch.compile(m, backend="braze")``) on the same module and inputs, and
speed-ups, taken in interleaved rounds once both compilers have compiled; cold
compile time (first compiled call minus one eager call; the
Inductor, Triton and braze caches are fresh empty directories made at start,
Dynamo is reset before each compile, and the process's first-use costs are paid
before, on a one-op function); cosine to eager of the output in float32 and,
for train, of all gradients concatenated (the loss by relative difference;
a training row a compiler fails is run again in float64 to show how far
eager itself lands from the exact answer);
braze's ATen fallbacks, graphs run eagerly and recompilations. Then new
processes compile GPT-2 inference on the warm caches (warm start): braze,
Inductor, and Dynamo alone (the part no backend can skip).

An exception in one (model, compiler, mode) is printed and recorded as
"error: ..."; the run goes on. Rows start until ``--budget-s`` (less the warm
start's share) is spent; a row still running then is stopped (SIGALRM).
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import gc
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import torch
from torch.utils import _pytree as pytree

from benchmarks import model_zoo
from benchmarks.measure import sync, time_cpu, time_gpu
from benchmarks.run import machine, ms_text, private_caches, version_of, source_id, write_section
from conformance.models import GraphRecorder, cosine

COMPILERS = ("inductor", "braze")
MODES = ("infer", "train")
COS_OK = 0.999
LOSS_OK = 1e-3  # relative difference of the training loss
TIMING_ROUNDS = 3  # interleaved rounds of eager, Inductor and braze per row
WARM_RESERVE_S = 90  # of the budget, kept for the warm-start subprocesses
WARM_BACKENDS = {"braze": "braze", "inductor": "Inductor", "eager": "Dynamo alone (backend 'eager')"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAD = ["model", "mode", "batch", "eager ms", "Inductor ms (× eager)", "braze ms (× eager)",
        "Inductor cold compile s", "braze cold compile s", f"min cos braze · Inductor (✓ ≥ {COS_OK})",
        "braze fallbacks"]


class OverBudget(BaseException):
    """The rows' time is spent (a BaseException, so that torch's ``except Exception`` lets it through)."""


def main(argv=None) -> None:
    ns = _parse(argv)
    if ns.warm_child:
        print(json.dumps(warm_child(ns.warm_child, ns.device, ns.tiny)), flush=True)
        return
    end = time.monotonic() + ns.budget_s
    command = "python -m benchmarks.models " + " ".join(argv if argv is not None else sys.argv[1:])
    section = f"models-{torch.device(ns.device).type}"
    scratch = tempfile.mkdtemp(prefix="braze-models-")
    try:
        private_caches(scratch)  # before braze, Inductor and Triton read them: every compile is cold
        import braze
        head = _header(command, ns.device, source_id(os.path.dirname(braze.__file__)))
        print("\n".join(head + _table_head()), flush=True)

        def written(rows):
            if ns.out:
                with _alarm_held():  # never stop in the middle of writing the file
                    write_section(ns.out, section, render(section, head, rows, None))
        rows = run_rows(ns, end - (WARM_RESERVE_S if ns.warm else 0), written)
        warm = warm_start(ns, rows, end) if ns.warm else None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report = render(section, head, rows, warm)
    print("\n" + report, flush=True)
    if ns.out:
        write_section(ns.out, section, report)


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--only", default=",".join(model_zoo.MODELS), help="comma-separated model names")
    parser.add_argument("--modes", default=",".join(MODES), help="infer, train or both")
    parser.add_argument("--tiny", action="store_true", help="tiny configs, batch 2 (a CPU smoke test)")
    parser.add_argument("--out", help="write the models-<device> section of this markdown file")
    parser.add_argument("--budget-s", type=float, default=500,
                        help=f"seconds for the whole run; rows stop {WARM_RESERVE_S} s earlier (the warm start's)")
    parser.add_argument("--warm", action=argparse.BooleanOptionalAction, default=True,
                        help="compile GPT-2 inference again in a new process with the warm caches")
    parser.add_argument("--warm-child", choices=list(WARM_BACKENDS), help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    ns.models = [m.strip() for m in ns.only.split(",") if m.strip()]
    ns.modes = [m.strip() for m in ns.modes.split(",") if m.strip()]
    for bad in set(ns.models) - set(model_zoo.MODELS) | set(ns.modes) - set(MODES):
        parser.error(f"unknown model or mode {bad!r}; models: {', '.join(model_zoo.MODELS)}; modes: infer, train")
    ns.models = [m for m in model_zoo.MODELS if m in ns.models]  # the most valuable first
    return ns


# --- measuring --------------------------------------------------------------------------

def time_ms(step, fn) -> float:
    if torch.device(step.device).type == "cuda":
        return time_gpu(lambda _: step(fn), None)
    return statistics.median(time_cpu({"step": lambda _: step(fn)}, [None], budget_s=0.5, rounds=2,
                                      min_calls=10)["step"])


def eager(step) -> tuple:
    """(eager's result to compare with, eager's median ms)."""
    step(step.model)  # first-use costs (cuBLAS, cuDNN) stay out of everything measured
    out, loss = step(step.model)
    expected = (out.to(torch.float32, copy=True), loss, step.grads() if loss is not None else None)
    return expected, time_ms(step, step.model)


def first_call(step, fn, expected: tuple, eager_ms: float) -> dict:
    """The first call of a compiled ``fn``: compile time and accuracy."""
    sync(step.device)
    start = time.perf_counter()
    out, loss = step(fn)
    sync(step.device)
    result = {"compile_s": time.perf_counter() - start - eager_ms / 1000}
    out_e, loss_e, grads_e = expected
    result["cos"] = cosine(out.float(), out_e)
    if loss is not None:
        result["cos"] = min(result["cos"], cosine(step.grads(), grads_e))
        result["loss_rel"] = abs(float(loss) - float(loss_e)) / max(abs(float(loss_e)), 1e-30)
    result["ok"] = result["cos"] >= COS_OK and result.get("loss_rel", 0.0) <= LOSS_OK
    if not result["ok"] and loss is not None:  # kept for the float64 reference (``float64_floor``)
        result["_got"] = (out.float(), step.grads())
    return result


def float64_floor(row: dict, step, expected: tuple) -> None:
    """For a training row a compiler failed: each result's cosine to the same step run in float64
    (a copy of the model), eager's included: how far float32 itself lands from the exact answer."""
    got = {c: row[c].pop("_got") for c in COMPILERS if "_got" in row.get(c, {})}
    if not got:
        return
    _progress(f"{row['model']} {row['mode']}: float64 reference")
    model64 = copy.deepcopy(step.model).double()
    step64 = model_zoo.Step(step.case, model64, step.mode, step.device)
    step64.kwargs = pytree.tree_map(lambda t: t.double() if t.is_floating_point() else t, step.kwargs)
    with torch.backends.cudnn.flags(allow_tf32=False):
        out64, _ = step64(model64)
    grads64 = step64.grads()
    del model64, step64
    row["float64_cos"] = {name: min(cosine(out, out64), cosine(grads, grads64))
                          for name, (out, grads) in {"eager": expected[::2], **got}.items()}


def _compile(model, compiler: str):
    return torch.compile(model, backend="braze") if compiler == "braze" else torch.compile(model)


def run_row(row: dict, case, model, device: str) -> None:
    """Compile with each compiler (cold compile, accuracy), then time eager and the compiled
    steps in interleaved rounds: a drift of the host's speed during the row reaches all three."""
    step = model_zoo.Step(case, model, row["mode"], device)
    expected, eager_ms = eager(step)
    calls = {"eager": step.model}
    torch._dynamo.reset()
    try:
        with GraphRecorder() as rec:  # records braze's graphs only
            for compiler in COMPILERS:  # Dynamo keeps one cache entry per backend: both stay compiled
                _progress(f"{row['model']} {row['mode']}: {compiler}")
                try:
                    fn = _compile(step.model, compiler)
                    row[compiler] = first_call(step, fn, expected, eager_ms)
                    calls[compiler] = fn
                except Exception as exc:
                    row[compiler] = {"error": _error(exc, f"{row['model']} {row['mode']} / {compiler}")}
            rec.mark()
            float64_floor(row, step, expected)
            _progress(f"{row['model']} {row['mode']}: timing, {TIMING_ROUNDS} rounds")
            times = interleaved_ms(step, calls, row)
        row["eager_ms"] = times.pop("eager", eager_ms)
        for compiler, ms in times.items():
            row[compiler]["ms"] = ms
        if "braze" in calls:
            info = rec.summary()
            row["braze"].update({k: info[k] for k in ("fallbacks", "eager_graphs", "recompiled", "kernels",
                                                      "braze_ms")})
    finally:
        torch._dynamo.reset()
        _free(device)


def interleaved_ms(step, calls: dict, row: dict) -> dict:
    """Median over ``TIMING_ROUNDS`` rounds of each call's median ms; a round times every call once."""
    per_round = {name: [] for name in calls}
    for _ in range(TIMING_ROUNDS):
        for name in list(per_round):
            try:
                per_round[name].append(time_ms(step, calls[name]))
            except Exception as exc:
                row[name] = {"error": _error(exc, f"{row['model']} {row['mode']} / {name}, timing")}
                del per_round[name]
    return {name: statistics.median(ms) for name, ms in per_round.items()}


def run_rows(ns, end: float, written) -> list:
    """Every (model, mode) of the run, most valuable first, until ``end`` (time.monotonic)."""
    rows = []
    try:
        with _alarm(end):
            _warm_up(ns.device, COMPILERS)
            for name in ns.models:
                run_model(name, ns, rows, written)
    except OverBudget:
        if rows and not rows[-1].get("done"):
            rows[-1]["stopped"] = f"stopped when the budget of {ns.budget_s:.0f} s was spent"
            print(_table_row(rows[-1]), flush=True)
    started = {(r["model"], r["mode"]) for r in rows}
    rows += [_new_row(name, mode, ns.tiny, skipped=f"not run: the budget of {ns.budget_s:.0f} s was spent")
             for name in ns.models for mode in ns.modes if (name, mode) not in started]
    written(rows)
    return rows


def run_model(name: str, ns, rows: list, written) -> None:
    torch._dynamo.reset()
    case, model = model_zoo.case(name, ns.tiny), None
    try:
        for mode in ns.modes:
            row = _new_row(name, mode, ns.tiny, skipped=None if case.available() else f"needs {case.library}")
            rows.append(row)
            if not row["skipped"]:
                _progress(f"{name} {mode}: eager")
                try:
                    model = model if model is not None else model_zoo.build(case, ns.device)
                    run_row(row, case, model, ns.device)
                except Exception as exc:
                    row["error"] = _error(exc, f"{name} {mode}")
            row["done"] = True
            print(_table_row(row), flush=True)
            written(rows)
    finally:
        del model
        torch._dynamo.reset()
        _free(ns.device)


def _new_row(name: str, mode: str, tiny: bool, skipped=None) -> dict:
    return {"model": name, "mode": mode, "batch": model_zoo.batch(name, tiny), "skipped": skipped}


def _one_op(x):
    return torch.sin(x) * 2


def _warm_up(device: str, compilers) -> None:
    """Pay the process's first-use costs (imports, Dynamo, AOTAutograd, worker pools) before any clock."""
    x = torch.randn(64, device=device, requires_grad=True)
    for compiler in compilers:
        torch._dynamo.reset()
        fn = _compile(_one_op, compiler)
        fn(x).sum().backward()
        with torch.no_grad():
            fn(x)
    torch._dynamo.reset()


def _free(device: str) -> None:
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


@contextlib.contextmanager
def _alarm(at: float):
    """Raise OverBudget in the main thread at ``at`` (time.monotonic)."""
    def fire(signum, frame):
        raise OverBudget()
    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(at - time.monotonic(), 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _alarm_held():
    """Hold SIGALRM back (it is delivered on leaving)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGALRM])


def _error(exc: Exception, where: str) -> str:
    """One line for the table; the traceback's end on stderr."""
    message = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:400]
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    print(f"[models] error in {where}: {message}\n{trace[-3000:]}", file=sys.stderr, flush=True)
    return message


def _progress(text: str) -> None:
    print(f"[models] {text}", file=sys.stderr, flush=True)


# --- warm start -------------------------------------------------------------------------

def warm_start(ns, rows: list, end: float) -> dict:
    """GPT-2 inference compiled in a new process that finds this run's caches, by braze, by Inductor
    and by Dynamo alone (a backend that compiles nothing: the floor any backend starts from)."""
    gpt2 = next((r for r in rows if r["model"] == "gpt2" and r["mode"] == "infer"), {})
    if "compile_s" not in gpt2.get("braze", {}):
        return {"skipped": "GPT-2 inference was not compiled by braze in this run"}
    results = {}
    for backend in WARM_BACKENDS:
        timeout = end - time.monotonic()
        if timeout < 5:
            results[backend] = {"error": "the budget was spent"}
            continue
        _progress(f"warm start: gpt2 infer / {backend} in a new process")
        results[backend] = _warm_process(ns, backend, timeout)
    return results


def _warm_process(ns, backend: str, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.models", "--warm-child", backend, "--device", ns.device] + \
        (["--tiny"] if ns.tiny else [])
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        return {"error": f"exit code {proc.returncode}: " + " | ".join(proc.stderr.strip().splitlines()[-3:])}
    return {**json.loads(lines[-1]), "process_s": time.perf_counter() - start}


def warm_child(backend: str, device: str, tiny: bool) -> dict:
    import braze  # noqa: F401  (registers the backend; the parent set the cache directories)
    case = model_zoo.case("gpt2", tiny)
    step = model_zoo.Step(case, model_zoo.build(case, device), "infer", device)
    _warm_up(device, [backend if backend != "eager" else "braze"])
    expected, eager_ms = eager(step)
    fn = torch.compile(step.model, backend="eager") if backend == "eager" else _compile(step.model, backend)
    with GraphRecorder() as rec:
        result = first_call(step, fn, expected, eager_ms)
    info = rec.summary()
    return {"compile_s": result["compile_s"], "cos": result["cos"], "graphs": len(rec.graphs),
            "cache_hits": sum(bool(g.cache_hit) for g in rec.graphs), "braze_ms": info["braze_ms"],
            "eager_graphs": info["eager_graphs"]}


# --- report -----------------------------------------------------------------------------

def _header(command: str, device: str, braze_source: str) -> list:
    versions = ", ".join(f"{m} {version_of(m)}" for m in ("torch", "triton", "transformers", "timm", "torchvision"))
    return [f"Command: `{command}`  ", f"Device: {machine(device)}  ",
            f"Software: {versions}, Python {platform.python_version()}  ", f"braze: {braze_source}  ",
            f"Date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}", ""]


def _table_head() -> list:
    return ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]


def _table_row(r: dict) -> str:
    if r.get("skipped") or r.get("error"):
        cells = ["skipped" if r.get("skipped") else "error"] + ["—"] * (len(HEAD) - 4)
        return "| " + " | ".join([r["model"], r["mode"], r["batch"]] + cells) + " |"
    cells = [r["model"], r["mode"], r["batch"], ms_text(r.get("eager_ms"))]
    cells += [_run_cell(r, c) for c in COMPILERS]
    cells += [_compile_cell(r.get(c)) for c in COMPILERS]
    cells += [_cos_cell(r), _fallback_cell(r.get("braze", {}))]
    return "| " + " | ".join(cells) + " |"


def _run_cell(r: dict, compiler: str) -> str:
    m = r.get(compiler)
    if m is None:
        return "—"
    if "error" in m:
        return "error"
    return f"{ms_text(m['ms'])} ({r['eager_ms'] / m['ms']:.2f}×)" if "ms" in m else "—"


def _compile_cell(m) -> str:
    return "—" if m is None else "error" if "error" in m else f"{m['compile_s']:.1f}"


def _cos_cell(r: dict) -> str:
    def one(m):
        return "—" if not m or "cos" not in m else f"{m['cos']:.5f}" + (" ✓" if m["ok"] else " **✗**")
    return f"{one(r.get('braze'))} · {one(r.get('inductor'))}"


def _fallback_cell(m: dict) -> str:
    if "fallbacks" not in m:
        return "—"
    text = f"{sum(m['fallbacks'].values())} ({len(m['fallbacks'])} ops)" if m["fallbacks"] else "0"
    return text + (" **ran eagerly**" if m["eager_graphs"] else "")


def render(section: str, head: list, rows: list, warm) -> str:
    out = [f"<!-- results:{section} start -->", f"## Results: {section}", ""] + head
    timing = ("`triton.testing.do_bench` median (L2 cleared before each call)" if section.endswith("cuda")
              else "median wall clock of at least 10 calls after warm-up")
    out += [f"Times: {timing}, then the median of {TIMING_ROUNDS} rounds that time eager, Inductor and braze in "
            "turn (both compiled steps stay loaded); × = speed-up over eager. Cold compile: the first compiled call "
            "(train: forward and backward) minus one eager call; the Inductor, Triton and braze caches are empty at the start of the run "
            "(a later row may find a kernel an earlier row compiled). Accuracy: cosine to eager of the output in "
            "float32 and, for train, of all gradients concatenated; train also needs the loss within "
            f"{LOSS_OK:g} of eager's. fp32 matmul precision: {torch.get_float32_matmul_precision()}.", ""]
    out += _table_head() + [_table_row(r) for r in rows] + [""]
    out += _notes(rows) + _warm_lines(warm)
    out.append(f"<!-- results:{section} end -->")
    return "\n".join(out)


def _notes(rows: list) -> list:
    lines = []
    for r in rows:
        name = f"{r['model']} {r['mode']}"
        for reason in (r.get("skipped"), r.get("stopped"), r.get("error") and f"error: {r['error']}"):
            if reason:
                lines.append(f"- {name}: {reason}")
        for compiler in COMPILERS:
            m = r.get(compiler, {})
            if "error" in m:
                lines.append(f"- **{name} / {compiler}: error: {m['error']}**")
            elif m and not m["ok"]:
                loss = f", loss differs by {m['loss_rel']:.1e}" if "loss_rel" in m else ""
                lines.append(f"- **{name} / {compiler}: differs from eager (cos {m['cos']:.6f}{loss})**")
        if r.get("float64_cos"):
            cos = ", ".join(f"{k} {v:.6f}" for k, v in r["float64_cos"].items())
            lines.append(f"- {name}: cosine to the same step in float64 (TF32 off): {cos}")
        m = r.get("braze", {})
        for message in m.get("eager_graphs", []):
            lines.append(f"- **{name}: braze ran a graph eagerly**: {message}")
        if m.get("fallbacks"):
            ops = ", ".join(f"{op} ×{n}" for op, n in sorted(m["fallbacks"].items()))
            lines.append(f"- {name}: braze ran through ATen (no lowering): {ops}")
        if m.get("recompiled"):
            lines.append(f"- {name}: braze compiled {m['recompiled']} graph(s) again on the second call")
        if "kernels" in m:
            lines.append(f"- {name}: braze {m['kernels']} kernels; its own share of the cold compile "
                         f"{m['braze_ms'] / 1000:.1f} s (after Dynamo and AOTAutograd)")
    return (["Notes:", ""] + lines + [""]) if lines else []


def _warm_lines(warm) -> list:
    if warm is None:
        return []
    head = "Warm start (GPT-2 inference, a new process with this run's caches; first compiled call minus one eager call)"
    if "skipped" in warm:
        return [f"{head}: {warm['skipped']}", ""]
    lines = [head + ":", ""]
    for backend, label in WARM_BACKENDS.items():
        w = warm.get(backend, {})
        if "compile_s" not in w:
            lines.append(f"- {label}: {w.get('error', 'not run')}")
            continue
        detail = [f"cos {w['cos']:.5f}", f"the whole process, imports included, {w['process_s']:.1f} s"]
        if backend == "braze":
            detail[:0] = [f"braze's own share {w['braze_ms'] / 1000:.2f} s",
                          f"{w['graphs']} graph(s), {w['cache_hits']} from the cache"]
            if w["eager_graphs"]:
                detail.append(f"**ran {len(w['eager_graphs'])} graph(s) eagerly**")
        lines.append(f"- {label}: **{w['compile_s']:.2f} s** ({'; '.join(detail)})")
    return lines + [""]

if __name__ == "__main__":
    main()
