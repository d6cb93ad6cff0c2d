"""Render saved sweep results as ``docs/conformance.md``.

Takes: ``{backend: results dict or None}`` (``conformance/results/<backend>.json``).
Gives: markdown: the rules, totals per backend and dtype, every mismatch, failure
and error with its cause, every skip with its reason, and one row per op.
"""
from __future__ import annotations

from conformance import notes

DTYPES = ("float32", "bfloat16", "int64", "bool")
SHORT = {"float32": "f32", "bfloat16": "bf16", "int64": "i64", "bool": "bool"}
OUTCOMES = ("pass", "pass-through", "failed", "mismatch", "error", "skip")
CELL = {"pass": "pass", "pass-through": "through", "failed": "**failed**", "mismatch": "**mismatch**",
        "error": "**ERROR**", "skip": "skip"}
BAD = ("failed", "mismatch", "error")

RULES = """\
## Rules

Each OpInfo entry of `torch.testing._internal.common_methods_invocations.op_db` runs its
sample inputs (`op.sample_inputs("cpu", dtype)`) for float32, bfloat16, int64 and bool where
the op supports the dtype. braze runs non-strict, as users run it: it must fall back, never
raise. Outcome of one (op, dtype), worst sample first:

| outcome | meaning |
|---|---|
| pass | braze compiled every graph; every output agrees with eager (and, for float32 ops with autograd, every gradient) |
| through | pass-through: results agree; some ATen ops ran through ATen because braze has no rule for them (listed as fallbacks) |
| failed | braze failed on a graph and ran it eagerly with a warning (results are eager's; a braze bug) |
| mismatch | an output or gradient differs from eager beyond tolerance |
| ERROR | an exception escaped to the user, or the process died |
| skip | nothing to judge; the reason is listed below |

Comparison (`conformance/compare.py`):

- shapes, dtypes and the structure of results must equal eager's; integer and bool results bit for bit;
- float32: `torch.testing.assert_close` default tolerances (rtol 1.3e-6, atol 1e-5), NaN equals NaN;
  gradients (float32, ops with autograd) with the same tolerances, for a seeded random cotangent;
- bfloat16: the default bf16 tolerances (rtol 1.6e-2, atol 1e-5) against eager's result, or else
  braze's largest error against a float64 run of the same op is at most 2x eager's largest error
  (braze computes in float32 and rounds once on store, eager rounds after every op, so neither
  is exact; NaN/inf positions must still match eager's);
- ops that produce random numbers or uninitialized memory: structure, shapes and dtypes only.

Speed: all samples of one (op, dtype) run in one compiled function (one graph, one C++ build),
forward and backward in the same run; only when that is not clean do the samples run one at a
time, to find the first failing one (and to tell a per-op problem from one only the
batched graph shows, which is noted). Each problem sample is re-run through braze's own
AOTAutograd wiring with ATen executing the graphs: a problem that reproduces there is not
braze's lowering (`skip` for exceptions, noted for mismatches). Ops run in worker processes.
"""


def cell(result) -> str:
    if result is None:
        return "·"
    return CELL[result["outcome"]]


def dtype_cols(backends) -> list:
    return [(b, d) for b in backends for d in DTYPES]


def counts(data, dtype, only=None) -> dict:
    out = {k: 0 for k in OUTCOMES}
    for key, by_dtype in data["ops"].items():
        if only is not None and key not in only:
            continue
        result = by_dtype.get(dtype)
        if result is not None:
            out[result["outcome"]] += 1
    return out


def summary_lines(data, only=None) -> list:
    lines = [f"{'dtype':9} " + " ".join(f"{o:>12}" for o in OUTCOMES) + "   compiled"]
    for dtype in DTYPES:
        c = counts(data, dtype, only)
        total = sum(c.values())
        if not total:
            continue
        lines.append(f"{dtype:9} " + " ".join(f"{c[o]:12d}" for o in OUTCOMES)
                     + f"   {100 * c['pass'] / total:5.1f}%")
    return lines


def totals_section(results) -> list:
    lines = ["## Totals", ""]
    for backend, data in results.items():
        lines += _backend_totals(backend, data)
    return lines


def _backend_totals(backend, data) -> list:
    f32 = counts(data, "float32")
    n = sum(f32.values())
    ok = f32["pass"] + f32["pass-through"]
    bad = sum(f32[k] for k in BAD)
    judged = n - f32["skip"]
    errors = sum(counts(data, d)["error"] for d in DTYPES)
    minutes = f"{data['sweep_seconds'] / 60:.1f} min with {data.get('jobs')} workers" \
        if data.get("sweep_seconds") else "n/a"
    lines = [f"### Backend `{backend}` (torch {data['torch']}, {data['date']}, full sweep {minutes})", "",
             f"- float32: **{100 * ok / n:.1f} %** of the {n} ops that support float32 pass "
             f"(compiled or passed through; skips count as not passing), "
             f"{100 * ok / max(judged, 1):.1f} % of the {judged} judged ones;",
             f"- compiled by braze (pass, nothing through ATen): **{100 * f32['pass'] / n:.1f} %** of all, "
             f"{100 * f32['pass'] / max(ok, 1):.1f} % of the passing ones;",
             f"- float32 failed + mismatch: {bad}; **errors, all dtypes: {errors}**.", "",
             "| dtype | ops | pass | through | failed | mismatch | error | skip | compiled |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for dtype in DTYPES:
        c = counts(data, dtype)
        total = sum(c.values())
        if total:
            lines.append(f"| {dtype} | {total} | " + " | ".join(str(c[o]) for o in OUTCOMES)
                         + f" | {100 * c['pass'] / total:.1f} % |")
    return lines + [""]


def problems_section(results) -> list:
    lines = ["## Every mismatch, failure and error, with its cause", "",
             "| op | backend | dtype | outcome | first failing sample | what | cause / tracking |",
             "|---|---|---|---|---|---|---|"]
    for backend, data in results.items():
        for key, by_dtype in data["ops"].items():
            for dtype in DTYPES:
                r = by_dtype.get(dtype)
                if r is None or r["outcome"] not in BAD:
                    continue
                lines.append(f"| `{key}` | {backend} | {SHORT[dtype]} | {r['outcome']} | {_esc(r.get('sample', ''))} "
                             f"| {_esc(r.get('detail', ''))} | {_esc(notes.cause(key, dtype, backend)) or 'untriaged'} |")
    return lines + [""]


def skips_section(results) -> list:
    lines = ["## Skips, with their reasons", "", "| op | backend | dtypes | reason |", "|---|---|---|---|"]
    for backend, data in results.items():
        for key, by_dtype in data["ops"].items():
            reasons: dict = {}
            for dtype in DTYPES:
                r = by_dtype.get(dtype)
                if r is not None and r["outcome"] == "skip":
                    reasons.setdefault(r.get("detail", ""), []).append(SHORT[dtype])
            for reason, dts in reasons.items():
                lines.append(f"| `{key}` | {backend} | {', '.join(dts)} | {_esc(reason)} |")
    return lines + [""]


def ops_section(results) -> list:
    cols = dtype_cols(results)
    head = "| op | " + " | ".join(f"{b} {SHORT[d]}" for b, d in cols) + " | grad | fallbacks / notes |"
    lines = ["## Every op", "", "`·`: the op does not support the dtype on CPU. grad: float32 gradients "
             "checked.", "", head, "|---|" + "---|" * len(cols) + "---|---|"]
    keys = sorted({k for data in results.values() for k in data["ops"]})
    for key in keys:
        row = [results[b]["ops"].get(key, {}).get(d) for b, d in cols]
        grad = any(r and r.get("grad") for r in row)
        lines.append(f"| `{key}` | " + " | ".join(cell(r) for r in row) + f" | {'yes' if grad else ''} | "
                     + _esc(_row_notes(row)) + " |")
    return lines + [""]


def _row_notes(row) -> str:
    fallbacks = sorted({f.replace("aten.", "") for r in row if r for f in r.get("fallbacks", [])})
    parts = [f"through: {', '.join(fallbacks)}"] if fallbacks else []
    seen = set()
    for r in row:
        for note in (r or {}).get("notes", []):
            if note not in seen:
                seen.add(note)
                parts.append(note)
    return "; ".join(parts)


def _esc(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(results) -> str:
    results = {b: d for b, d in results.items() if d}
    lines = ["# braze conformance: PyTorch's OpInfo database", "",
             "Generated by `python -m conformance.opinfo --out docs/conformance.md` "
             "(`--backend triton` for the Triton backend, `--backend cuda` for the samples on a GPU); do not edit by hand. "
             "Known problems of real models: `conformance/model_bugs.md`.", ""]
    if "triton" not in results:
        lines += ["The Triton backend has not been swept (through Triton's interpreter the sweep takes "
                  "hours here; CI runs its kernel shapes and numerics instead): "
                  "`python -m conformance.opinfo --backend triton --out docs/conformance.md` adds its columns.", ""]
    lines += RULES.splitlines() + [""]
    lines += totals_section(results) + problems_section(results) + skips_section(results) + ops_section(results)
    return "\n".join(lines)
