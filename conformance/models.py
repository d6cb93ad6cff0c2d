"""Real models through braze, compared with eager PyTorch.

Takes: the cases of ``conformance.zoo`` (timm and transformers models built from
configs with random weights) and a mode, ``infer`` or ``train``.
Gives: one result dict per (model, mode): pass/fail, cosine similarities in
float64 against eager (model output; for training also the loss, every
parameter's gradient and every parameter's update after one AdamW step, and the
buffers such as batch-norm running statistics), kernel, extern and fallback
counts read from the compiled graphs, graphs braze ran eagerly, and times.

A float64 copy of the model, run eagerly, is the reference that tells rounding
noise from error (see ``judge``). A case passes when every tensor passes
``judge`` (cosine to eager at least ``THRESHOLD`` in float32), no graph ran
eagerly and nothing raised. "min cos" values are the smallest over all
parameters (a tensor that is zero in both runs counts as 1).

Run everything, one subprocess per case, and write the table::

    python -m conformance.models --out docs/models.md

Each case compiles with a cold braze cache (``cache`` off), so the compile time
includes building every C++ kernel. ``--one NAME:MODE`` runs a single case in
this process and prints its result as JSON.
"""
from __future__ import annotations

import argparse
import collections
import copy
import json
import os
import subprocess
import sys
import time
import traceback

import torch
import torch.utils._pytree as pytree

from braze.backend import Recording
from conformance.zoo import CASES
from conformance.model_table import write_markdown

THRESHOLD = 0.9999
MODES = ("infer", "train")
SEED = 0
LR = 1e-3


class GraphRecorder(Recording):
    """Collects braze's compiled graphs and the graphs it ran eagerly (failures)."""

    def mark(self):
        """Graphs compiled after this call are recompilations (a second call with the
        same shapes should compile nothing)."""
        self._marked = len(self.graphs) + len(self.failures)

    def summary(self) -> dict:
        kernels = collections.Counter(g.kind for g in self.graphs for _ in g.kernels)
        fallbacks = collections.Counter(str(f) for g in self.graphs for f in g.fallbacks)
        return {
            "graphs": collections.Counter(g.kind for g in self.graphs),
            "kernels": sum(kernels.values()), "kernels_by_kind": dict(kernels),
            "externs": sum(len(g.externs) for g in self.graphs),
            "fallbacks": dict(fallbacks),
            "eager_graphs": [f"{kind}: {message}" for _, kind, message in self.failures],
            "braze_ms": round(sum(sum(g.timings.values()) for g in self.graphs), 1),
            "recompiled": len(self.graphs) + len(self.failures) - getattr(self, "_marked", 0),
        }


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity in float64; 1.0 when both are all zeros."""
    a, b = a.detach().double().flatten(), b.detach().double().flatten()
    na, nb = a.norm(), b.norm()
    if na == 0 and nb == 0:
        return 1.0
    if na == 0 or nb == 0 or not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return 0.0
    return float(torch.dot(a, b) / (na * nb))


def _build(case):
    """The model, a float64 copy (the reference) and the input generator."""
    torch.manual_seed(SEED)
    model = case.build()
    return model, copy.deepcopy(model).double(), torch.Generator().manual_seed(SEED + 1)


def _double(kwargs: dict) -> dict:
    return pytree.tree_map(lambda t: t.double() if isinstance(t, torch.Tensor) and t.is_floating_point()
                           else t, kwargs)


def run_infer(case) -> dict:
    model, model64, gen = _build(case)
    model.eval(), model64.eval()
    kwargs = case.inputs(gen, False)
    compiled = torch.compile(copy.deepcopy(model), backend="braze")
    with torch.no_grad():
        expected = case.call(model, kwargs)
        eager_s = _warm_time(lambda: case.call(model, kwargs))
        reference = case.call(model64, _double(kwargs))
        with GraphRecorder() as rec:
            actual, first_s = _timed(lambda: case.call(compiled, kwargs))
            rec.mark()
            again_s = _warm_time(lambda: case.call(compiled, kwargs))
    out = [{"output": case.output(r)} for r in (actual, expected, reference)]
    return _result({"output": judge(*out)}, rec, first_s, again_s, eager_s,
                   max_abs=_max_abs(case.output(actual), case.output(expected)))


def run_train(case) -> dict:
    model, model64, gen = _build(case)
    for m in (model, model64):
        m.train()
    kwargs = case.inputs(gen, True)
    braze_model = copy.deepcopy(model)
    compiled = torch.compile(braze_model, backend="braze")
    eager = _Stepper(case, model, model, kwargs)
    reference = _Stepper(case, model64, model64, _double(kwargs))
    braze_run = _Stepper(case, braze_model, compiled, kwargs)
    eager.step()
    reference.step()
    with GraphRecorder() as rec:
        first_s = _timed(braze_run.step)[1]
        rec.mark()
        again_s = _warm_time(braze_run.time_only)
    eager_s = _warm_time(eager.time_only)
    runs = (braze_run, eager, reference)
    groups = {"output": [{"output": r.output} for r in runs], "loss": [{"loss": r.loss} for r in runs],
              "grad": [r.grads for r in runs], "params": [r.params for r in runs],
              "buffers": [r.buffers for r in runs], "update": [r.updates for r in runs]}
    verdicts = {k: judge(*v) for k, v in groups.items()}
    verdicts["update"]["informational"] = True
    return _result(verdicts, rec, first_s, again_s, eager_s,
                   max_abs=_max_abs(braze_run.output, eager.output),
                   loss=[float(braze_run.loss), float(eager.loss)])


def judge(actual: dict, expected: dict, reference: dict) -> dict:
    """Per tensor: braze vs eager cosine >= THRESHOLD. A tensor that eager float32
    itself gets wrong (cosine to the float64 run < THRESHOLD: a gradient that is
    zero in exact arithmetic, an AdamW step on such a gradient) is rounding noise;
    cosine says nothing there, so braze passes it when its distance to the float64
    run is at most twice eager's."""
    worst, noise, failed = 1.0, [], []
    for name, e in expected.items():
        a, r = actual[name], reference[name]
        c = cosine(a, e)
        if cosine(e, r) < THRESHOLD:
            noise.append(name)
            if _distance(a, r) > 2 * _distance(e, r) + 1e-30:
                failed.append(f"{name} (noise-level; braze {_distance(a, r):.3g} vs eager "
                              f"{_distance(e, r):.3g} from float64)")
            continue
        worst = min(worst, c)
        if c < THRESHOLD:
            failed.append(f"{name} (cos {c:.6f})")
    return {"min_cos": worst, "noise": len(noise), "failed": failed, "tensors": len(expected)}


def _distance(a, b) -> float:
    return float((a.detach().double() - b.detach().double()).norm())


class _Stepper:
    """One training step (forward, loss, backward, AdamW step) on one model copy;
    keeps the output, loss, gradients, parameter updates and buffers of step 1."""

    def __init__(self, case, module, call_target, kwargs):
        self.case, self.module, self.target, self.kwargs = case, module, call_target, kwargs
        self.optimizer = torch.optim.AdamW(module.parameters(), lr=LR)

    def _one(self):
        out = self.case.call(self.target, self.kwargs)
        loss = self.case.loss(out, self.kwargs)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        return out, loss

    def step(self):
        params = dict(self.module.named_parameters())
        before = {n: p.detach().clone() for n, p in params.items()}
        out, loss = self._one()
        self.output, self.loss = self.case.output(out).detach().clone(), loss.detach().clone()
        self.grads = {n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p))
                      for n, p in params.items()}
        self.optimizer.step()
        self.params = {n: p.detach().clone() for n, p in params.items()}
        self.updates = {n: params[n].detach() - before[n] for n in params}
        self.buffers = {n: b.detach().clone() for n, b in self.module.named_buffers()
                        if b.dtype.is_floating_point}

    def time_only(self):
        """A second step, timed by the caller (no recompilation expected)."""
        self._one()
        self.optimizer.step()


def _warm_time(fn, calls: int = 2) -> float:
    """The fastest of the calls after the first (the second call can still be warming up)."""
    return min(_timed(fn)[1] for _ in range(calls))


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _max_abs(actual, expected) -> float:
    return float((actual.detach().double() - expected.detach().double()).abs().max())


def _result(verdicts, rec, first_s, again_s, eager_s, **extra) -> dict:
    info = rec.summary()
    if info["recompiled"]:
        extra["detail"] = f"{info['recompiled']} graph(s) compiled again on the second call"
    ok = not any(v["failed"] and not v.get("informational") for v in verdicts.values()) \
        and not info["eager_graphs"]
    return {"status": "pass" if ok else "FAIL", "verdicts": verdicts,
            "cosines": {k: v["min_cos"] for k, v in verdicts.items()}, **info,
            "first_call_s": round(first_s, 2), "compile_s": round(max(first_s - again_s, 0.0), 2),
            "braze_s": round(again_s, 3), "eager_s": round(eager_s, 3), **extra}


def run_case(name: str, mode: str) -> dict:
    """One case in this process; never raises (an exception becomes status 'error')."""
    import braze  # noqa: F401  (registers the backend)
    case = CASES[name]
    base = {"model": name, "mode": mode, "torch": torch.__version__}
    if not case.available():
        return {**base, "status": "not installed", "detail": f"needs {case.library}"}
    torch._dynamo.reset()
    try:
        with braze.config.patch(cache=False):
            result = (run_infer if mode == "infer" else run_train)(case)
    except Exception as exc:  # report it, with where it came from
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return {**base, "status": "error",
                "detail": f"{type(exc).__name__}: {str(exc)[:500]} ({tb.filename}:{tb.lineno})"}
    return {**base, **result}


def run_isolated(name: str, mode: str, timeout: float) -> dict:
    """One case in a fresh interpreter (a crash or a hang stays in its own row)."""
    cmd = [sys.executable, "-m", "conformance.models", "--one", f"{name}:{mode}"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    except subprocess.TimeoutExpired:
        return {"model": name, "mode": mode, "status": "error", "detail": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"model": name, "mode": mode, "status": "error",
                "detail": f"exit code {proc.returncode}: {' | '.join(tail)}"}
    return json.loads(lines[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the markdown table here")
    parser.add_argument("--json", help="also write the raw results here")
    parser.add_argument("--models", default=",".join(CASES), help="comma-separated model names")
    parser.add_argument("--modes", default=",".join(MODES), help="infer, train or both")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per case")
    parser.add_argument("--one", help="NAME:MODE: run one case here and print JSON")
    args = parser.parse_args(argv)
    if args.one:
        name, mode = args.one.split(":")
        print(json.dumps(run_case(name, mode), default=_jsonable))
        return 0
    results = []
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            result = run_isolated(name, mode, args.timeout)
            results.append(result)
            print(_one_line(result), flush=True)
    if args.out:
        write_markdown(results, args.out, " ".join(["python -m conformance.models"] + (argv or sys.argv[1:])))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=_jsonable)
    return 0 if all(r["status"] in ("pass", "not installed") for r in results) else 1


def _jsonable(value):
    if isinstance(value, collections.Counter):
        return dict(value)
    return str(value)


def _one_line(r: dict) -> str:
    cos = " ".join(f"{k}={v:.6f}" for k, v in r.get("cosines", {}).items())
    return (f"{r['model']:18} {r['mode']:5} {r['status']:6} {cos} kernels={r.get('kernels', '-')} "
            f"fallbacks={sum(r.get('fallbacks', {}).values())} compile={r.get('compile_s', '-')}s "
            f"{r.get('detail', '')}")


if __name__ == "__main__":
    sys.exit(main())
