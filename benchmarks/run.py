"""Eager vs Inductor vs braze, side by side, in one run.

Run: ``python -m benchmarks.run --device cpu [--threads N] [--out docs/benchmarks.md]``
(``--only NAME,...``, ``--skip-compile``, ``--budget S`` to narrow or shorten).

Takes: the workloads of ``benchmarks.workloads``, built for one device.
Gives: a markdown report on stdout: the command, machine and versions; per
workload the median run time of eager, Inductor (``torch.compile(fn)``) and
braze (``torch.compile(fn, backend="braze")``) with speed-ups, on GPU the GB/s
and the share of the device-to-device copy bandwidth measured in the same run;
braze's kernel count and whether its results match eager; then compile times
with cold and warm caches, each measured in a fresh process
(``benchmarks.compile_time``). With ``--out FILE`` the report replaces this
run's section of FILE (``cpu-<N>thread`` or ``cuda``); other sections and
hand-written notes stay.

A braze graph that fails and runs eagerly, or a result that differs from
eager's, is flagged in the table and listed under the table: never hidden.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import torch

from benchmarks.measure import (compare, copy_bandwidth, input_set_count, run_on_clone, summarize, sync,
                                time_cpu, time_gpu)
from benchmarks.workloads import WORKLOADS, tensor_bytes

BACKENDS = ("eager", "inductor", "braze")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="eager vs Inductor vs braze")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--out", help="write this run's section (device, threads) into this markdown file")
    parser.add_argument("--only", help="comma-separated workload names (substrings)")
    parser.add_argument("--skip-compile", action="store_true", help="no compile-time subprocesses")
    parser.add_argument("--compile-only", action="store_true",
                        help="only compile times, in their own section (DEVICE-compile)")
    parser.add_argument("--compile-jobs", type=int, default=1,
                        help="compile-time measurements run this many at a time (each its own process)")
    parser.add_argument("--budget", type=float, default=2.0, help="CPU: seconds of timed calls per compiler")
    parser.add_argument("--threads", type=int, help="CPU: torch (and so Inductor and braze) threads")
    parser.add_argument("--section", default="",
                        help="suffix of the results section written (a partial run beside the full table)")
    ns = parser.parse_args(argv)
    device = ns.device
    command = "python -m benchmarks.run " + " ".join(argv if argv is not None else sys.argv[1:])
    workloads = [w for w in WORKLOADS if not ns.only or any(s.strip().lower() in w.name.lower()
                                                            for s in ns.only.split(","))]
    scratch = tempfile.mkdtemp(prefix="braze-bench-")
    try:
        source = _snapshot_braze(scratch)
        private_caches(os.path.join(scratch, "main"))
        if ns.threads:
            torch.set_num_threads(ns.threads)
        section = device if device != "cpu" else f"cpu-{torch.get_num_threads()}thread"
        section += "-compile" if ns.compile_only else ""
        section += f"-{ns.section}" if ns.section else ""
        import braze  # noqa: F401  (after the cache directories are set)
        torch._dynamo.config.cache_size_limit = 64
        load = [os.getloadavg()[0]]
        copy_gbs = copy_bandwidth(device) if device != "cpu" and not ns.compile_only else None
        rows = []
        for w in workloads if not ns.compile_only else []:
            print(f"[run] {w.name} ...", file=sys.stderr, flush=True)
            rows.append(run_workload(w, device, ns.budget, copy_gbs))
        compile_rows = []
        if not ns.skip_compile:
            jobs = [(w.name, backend) for w in workloads for backend in ("inductor", "braze")]
            with ThreadPoolExecutor(max(1, ns.compile_jobs)) as pool:
                compile_rows = list(pool.map(lambda job: compile_times(*job, device, scratch), jobs))
        load.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report = render(section, device, command, rows, compile_rows, copy_gbs, load, source, ns.compile_jobs)
    print(report)
    if ns.out:
        write_section(ns.out, section, report)


def _snapshot_braze(scratch: str) -> str:
    """Copy the braze package aside and import it from there, here and in the compile subprocesses,
    so that edits others make to the working tree during a run cannot mix two versions in one table."""
    origin = importlib.util.find_spec("braze").origin
    src = os.path.join(scratch, "src")
    shutil.copytree(os.path.dirname(origin), os.path.join(src, "braze"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    sys.path.insert(0, src)
    os.environ["BRAZE_BENCH_SRC"] = src
    return source_id(os.path.join(src, "braze"))


def source_id(package_dir: str) -> str:
    """The git commit and a hash of the braze sources in ``package_dir`` (``.py`` files)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(package_dir):
        dirs.sort()
        for name in sorted(f for f in files if f.endswith(".py")):
            with open(os.path.join(root, name), "rb") as f:
                digest.update(os.path.relpath(os.path.join(root, name), package_dir).encode() + f.read())
    return f"{_git_commit()}, sources sha256 {digest.hexdigest()[:12]}"


def private_caches(root: str) -> dict:
    """Fresh Inductor, Triton and braze cache directories under ``root``; set in os.environ."""
    env = {var: os.path.join(root, sub) for var, sub in
           (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton"), ("BRAZE_CACHE_DIR", "braze"))}
    for path in env.values():
        os.makedirs(path, mode=0o700, exist_ok=True)
    os.environ.update(env)
    import braze.config  # read its environment at import, which may have happened already
    braze.config.cache_dir = env["BRAZE_CACHE_DIR"]
    return env


# --- run time -------------------------------------------------------------------------

def run_workload(w, device: str, budget: float, copy_gbs) -> dict:
    import braze
    case = w.build(device)
    row = {"name": w.name, "shape": case.shape, "note": w.note}
    with braze.backend.Recording() as recording:
        fns = {"eager": case.fn, "inductor": torch.compile(case.fn),
               "braze": torch.compile(case.fn, backend="braze")}
        first = case.make_inputs(0)
        expected = run_on_clone(case, case.fn, first)
        row["check"] = {}
        for name in ("inductor", "braze"):
            try:
                actual = run_on_clone(case, fns[name], first)
                want = case.reference(first, actual) if case.reference else expected
                row["check"][name] = compare(actual, want)
            except Exception as exc:  # a crash is a result too: report it, time the others
                row["check"][name] = (False, float("inf"), f"crashed: {type(exc).__name__}: {exc}"[:300])
                fns.pop(name)
        row["bytes"] = None if case.no_gbs else (case.bytes_moved or tensor_bytes(first) + tensor_bytes(expected))
        calls = {name: (lambda args, f=f: case.run(f, args)) for name, f in fns.items()}
        if torch.device(device).type == "cuda":
            row["times"] = {name: {"median": time_gpu(call, first)} for name, call in calls.items()}
            row["sets"] = 1
        else:
            sets = [first] + [case.make_inputs(s) for s in range(1, input_set_count(tensor_bytes(first)))]
            row["sets"] = len(sets)
            row["times"] = {name: summarize(t) for name, t in time_cpu(calls, sets, budget).items()}
        sync(device)
    graphs, failures = recording.graphs, [f[1:] for f in recording.failures]
    row["kernels"] = sum(len(g.kernels) for g in graphs)
    row["graphs"] = len(graphs)
    row["fallbacks"] = sorted({f for g in graphs for f in g.fallbacks})
    row["fallback_calls"] = sum(len(g.fallbacks) for g in graphs)
    row["externs"] = sum(len(g.externs) for g in graphs)
    row["failures"] = failures
    row["copy_gbs"] = copy_gbs
    return row


# --- compile time ---------------------------------------------------------------------

def compile_times(name: str, backend: str, device: str, scratch: str) -> dict:
    """Cold cache: fresh directories and process; warm: the same directories, a new process."""
    root = tempfile.mkdtemp(dir=scratch, prefix="compile-")
    env = dict(os.environ)
    env.update(private_caches(root))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = str(torch.get_num_threads())  # the same threads as the run-time measurements
    result = {"name": name, "backend": backend}
    print(f"[compile] {name} / {backend} ...", file=sys.stderr, flush=True)
    for state in ("cold", "warm"):
        cmd = [sys.executable, "-m", "benchmarks.compile_time", "--workload", name, "--backend", backend,
               "--device", device]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
            result[state] = json.loads(line) if proc.returncode == 0 and line.startswith("{") else \
                {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
        except subprocess.TimeoutExpired:
            result[state] = {"error": "timed out after 900 s"}
    return result


# --- report ---------------------------------------------------------------------------

def render(section: str, device: str, command: str, rows: list, compile_rows: list, copy_gbs, load: list,
           source: str, compile_jobs: int = 1) -> str:
    gpu = torch.device(device).type == "cuda"
    out = [f"<!-- results:{section} start -->", f"## Results: {section}", "",
           f"Command: `{command}`  ", f"Machine: {machine(device)}  ",
           f"Software: torch {torch.__version__}, triton {version_of('triton')}, Python {platform.python_version()}, "
           f"braze {source}  ",
           f"Date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}; load average {load[0]:.2f} at start, "
           f"{load[-1]:.2f} at end (the machine is shared: read small differences as noise)", ""]
    if rows:
        out += _time_table(rows, gpu, copy_gbs)
    if compile_rows:
        out += _compile_table(compile_rows, gpu, compile_jobs)
    out.append(f"<!-- results:{section} end -->")
    return "\n".join(out)


def _time_table(rows: list, gpu: bool, copy_gbs) -> list:
    out = []
    if gpu:
        out += [f"Device-to-device copy bandwidth in this run: **{copy_gbs:.0f} GB/s** (bytes read + written). "
                "Times: `triton.testing.do_bench` median (L2 cleared before each call).", ""]
    else:
        out += [f"Times: median wall clock per call over interleaved rounds (n calls per compiler in the table), "
                f"after warm-up, {_threads()} for all three; inputs rotate over several sets "
                "(column 'sets') so that consecutive calls do not find their inputs in the 32 MiB L3. "
                "'IQR' is the widest interquartile range of the three, relative to its median; 'min' is the fastest "
                "call, less disturbed by other processes than the median.", ""]
    head = ["workload", "shape", "eager ms", "Inductor ms", "braze ms", "Inductor ×", "braze ×",
            "braze / Inductor"]
    head += ["GB/s eager · Ind · braze", "% of copy (braze)"] if gpu else ["min ms eager · Ind · braze", "IQR", "n",
                                                                          "sets"]
    head += ["braze kernels + ATen calls", "check vs eager"]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        t = {k: v["median"] for k, v in r["times"].items()}
        speed = {k: t["eager"] / t[k] if k in t else None for k in BACKENDS}
        cells = [r["name"], r["shape"], ms_text(t.get("eager")), ms_text(t.get("inductor")), ms_text(t.get("braze")),
                 _x(speed["inductor"]), _x(speed["braze"]),
                 _x(t["inductor"] / t["braze"]) if "inductor" in t and "braze" in t else "—"]
        if gpu:
            gbs = {k: r["bytes"] / (v * 1e-3) / 1e9 for k, v in t.items()} if r["bytes"] else {}
            cells += [" · ".join(f"{gbs[k]:.0f}" if k in gbs else "—" for k in BACKENDS),
                      f"{100 * gbs['braze'] / copy_gbs:.0f}%" if "braze" in gbs else "—"]
        else:
            iqr = max((v["p75"] - v["p25"]) / v["median"] for v in r["times"].values())
            cells += [" · ".join(ms_text(r["times"][k]["min"]) if k in r["times"] else "—" for k in BACKENDS),
                      f"{100 * iqr:.0f}%", str(min(v["n"] for v in r["times"].values())), str(r["sets"])]
        cells += [_kernels(r), _check(r)]
        out.append("| " + " | ".join(cells) + " |")
    return out + [""] + _problems(rows) + _notes(rows)


def _compile_table(compile_rows: list, gpu: bool, jobs: int) -> list:
    caches = "TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR, BRAZE_CACHE_DIR"
    out = ["", "### Compile time", "",
           f"Each number comes from its own fresh process: 'cold' with empty {caches}, 'warm' in a new process "
           "reusing the directories the cold run filled. Compile time = the first compiled call minus one eager "
           "call (for the training step the first forward+backward, so the backward graph is included); imports "
           "of torch, Inductor and braze are outside the clock. 'braze own' is the sum of "
           "`CompiledGraph.timings` over braze's graphs: braze's share after Dynamo and AOTAutograd."
           + (f" {jobs} measurements ran at a time (so each process had fewer idle cores)." if jobs > 1 else ""), "",
           "| workload | Inductor cold s | braze cold s | Inductor warm s | braze warm s | braze own cold ms | "
           "braze own warm ms | braze graphs (warm cache hits) |", "|---|---|---|---|---|---|---|---|"]
    by = {}
    for r in compile_rows:
        by.setdefault(r["name"], {})[r["backend"]] = r
    errors = []
    for name, pair in by.items():
        ind, brz = pair.get("inductor", {}), pair.get("braze", {})
        cells = [name]
        for res, state in ((ind, "cold"), (brz, "cold"), (ind, "warm"), (brz, "warm")):
            m = res.get(state, {})
            cells.append(f"{m['compile_ms'] / 1000:.2f}" if "compile_ms" in m else "error")
            if "error" in m:
                errors.append(f"- {name} / {res.get('backend')} / {state}: {m['error']}")
        for state in ("cold", "warm"):
            m = brz.get(state, {})
            cells.append(f"{m['braze_ms']:.0f}" if "braze_ms" in m else "—")
        warm = brz.get("warm", {})
        cells.append(f"{warm.get('graphs', '—')} ({warm.get('cache_hits', '—')})")
        for state in ("cold", "warm"):
            if brz.get(state, {}).get("failures"):
                errors.append(f"- **{name}: braze ran a graph eagerly ({state})**: {brz[state]['failures'][0]}")
        out.append("| " + " | ".join(cells) + " |")
    return out + ([""] + errors if errors else [])


def _problems(rows: list) -> list:
    lines = []
    for r in rows:
        for kind, message in r["failures"]:
            lines.append(f"- **{r['name']}: braze failed and ran the {kind} graph eagerly**: {message}")
        for name, (ok, err, message) in r["check"].items():
            if not ok:
                lines.append(f"- **{r['name']}: {name} result differs from eager**: {message}")
    return (["**Problems:**", ""] + lines + [""]) if lines else []


def _notes(rows: list) -> list:
    lines = [f"- {r['name']}: {r['note']}" for r in rows if r["note"]]
    lines += [f"- {r['name']}: braze has no lowering for {', '.join(r['fallbacks'])}: {r['fallback_calls']} "
              "call(s) run through ATen ('fallback' in the kernels column)" for r in rows if r["fallbacks"]]
    return (["Notes:", ""] + lines + [""]) if lines else []


def _kernels(r: dict) -> str:
    if r["failures"]:
        return "**ran eagerly**"
    text = str(r["kernels"])
    if r["externs"]:
        text += f" + {r['externs']} ATen"
    if r["fallback_calls"]:
        text += f" + {r['fallback_calls']} fallback"
    return text


def _check(r: dict) -> str:
    ok, err, _ = r["check"].get("braze", (False, float("inf"), ""))
    if "braze" not in r["times"]:
        return "**crashed**"
    return f"ok ({err:.0e})" if ok else f"**MISMATCH ({err:.1e})**"


def _threads() -> str:
    n = torch.get_num_threads()
    return f"{n} thread" + ("s" if n != 1 else "")


def ms_text(v) -> str:
    return "—" if v is None else (f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.0f}")


def _x(v) -> str:
    return "—" if v is None else f"{v:.2f}×"


def machine(device: str) -> str:
    if torch.device(device).type == "cuda":
        p = torch.cuda.get_device_properties(0)
        return f"{p.name}, {p.multi_processor_count} SMs, {p.total_memory / 2**30:.0f} GiB"
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}"


def version_of(module: str) -> str:
    try:
        return __import__(module).__version__
    except Exception:
        return "not installed"


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "braze"], capture_output=True, text=True, timeout=10)
        commit = out.stdout.strip() or "unknown (no git checkout)"
        return commit + (" with uncommitted changes under braze/" if dirty.stdout.strip() else "")
    except Exception:
        return "unknown"


def write_section(path: str, section: str, report: str) -> None:
    """Replace the ``results:<section>`` section of ``path`` (append it if absent)."""
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    pattern = re.compile(rf"<!-- results:{re.escape(section)} start -->.*?<!-- results:{re.escape(section)} end -->",
                         re.S)
    text = pattern.sub(lambda _: report, text) if pattern.search(text) else text.rstrip() + "\n\n" + report + "\n"
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
