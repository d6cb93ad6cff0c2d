"""Worker processes for the sweep: ops run in parallel, a crash or a hang costs one op.

Takes: op keys, dtype names, a braze backend name and a number of workers. Gives:
``{op key: {dtype name: result}}`` (results from ``conformance.runner``), and calls
``progress(key, dtype, result)`` per result and ``finished(key, results)`` per op.

Each worker is a fresh ``spawn``ed process that loads the OpInfo database once and
takes ops from a shared queue. It announces which dtype it runs, so when a worker
dies (a crash in generated code) or runs past ``op_timeout``, the parent knows what
it was doing: it records ``error`` for that dtype (``skip`` for a timeout) and
re-queues the dtypes after it.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time

DTYPES = ("float32", "bfloat16", "int64", "bool")


def setup_worker(backend: str) -> None:
    """Quiet worker state; the Triton backend runs in interpreter mode."""
    import logging
    import warnings
    if backend == "triton":
        os.environ["TRITON_INTERPRET"] = "1"
    warnings.filterwarnings("ignore")
    import torch
    torch._logging.set_logs(dynamo=logging.CRITICAL, aot=logging.CRITICAL, inductor=logging.CRITICAL)
    logging.getLogger("torch").setLevel(logging.CRITICAL)
    # Samples that share a signature reuse one compiled graph; should Dynamo recompile
    # anyway, it must never quietly run eagerly after its recompile limit: raise instead.
    torch._dynamo.config.recompile_limit = 64
    torch._dynamo.config.fail_on_recompile_limit_hit = True


def _call(op, *args, **kwargs):
    return op(*args, **kwargs)


def unwrap_seeded_ops() -> None:
    """OpInfo wraps random ops (dropout, SDPA, ...) in ``wrapper_set_seed``, which
    freezes the RNG state in a way Dynamo cannot trace (so Dynamo would run them
    eagerly and braze would never see them). The sweep calls the op itself; it seeds
    the RNG the same way before the eager and the compiled run."""
    import sys
    import torch.testing._utils as testing_utils
    original = testing_utils.wrapper_set_seed
    for name, module in list(sys.modules.items()):
        if name.startswith("torch.testing") and getattr(module, "wrapper_set_seed", None) is original:
            module.wrapper_set_seed = _call


def ops_by_key() -> dict:
    from torch.testing._internal.common_methods_invocations import op_db
    from conformance.runner import op_key
    unwrap_seeded_ops()
    return {op_key(op): op for op in op_db}


def run_op(op, dtype_names, backend: str, announce=None) -> dict:
    """Results of one op for each wanted dtype it supports, braze non-strict."""
    import torch
    import braze
    from conformance.pipeline import braze_fn
    from conformance import runner
    cpu_backend = "cpp" if backend == "cuda" else backend  # (CUDA tensors always take Triton)
    with braze.config.patch(cpu_backend=cpu_backend, strict=False):
        out = runner.run_op(op, dtype_names, braze_fn(cpu_backend), announce=announce,
                            device="cuda" if backend == "cuda" else "cpu")
    torch._dynamo.reset()
    return out


def _worker(wid, tasks, results, backend, stderr_path):
    if stderr_path:
        fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 2)
    setup_worker(backend)
    table = ops_by_key()
    while True:
        task = tasks.get()
        if task is None:
            return
        key, dtype_names = task
        try:
            found = run_op(table[key], dtype_names, backend,
                           announce=lambda name: results.put(("start", wid, key, name)))
        except Exception as exc:  # noqa: BLE001 - a harness problem, reported as such
            if _device_lost(exc):  # the CUDA context is unusable: report, and let a fresh worker go on
                results.put(("done", wid, key, _results(dtype_names, "error", f"the device failed: {exc}")))
                results.close()
                results.join_thread()  # (the message is sent before the process ends)
                os._exit(3)
            found = _results(dtype_names, "skip", f"harness: {type(exc).__name__}: {exc}")
        results.put(("done", wid, key, found))


def _device_lost(exc: Exception) -> bool:
    """A sticky CUDA error (an illegal address, a device-side assertion): every later
    call in this process fails the same way."""
    return "CUDA error" in str(exc) or type(exc).__name__ == "AcceleratorError"


def _results(dtype_names, outcome: str, detail: str) -> dict:
    return {d: {"outcome": outcome, "detail": detail, "samples": 0, "sample": "", "fallbacks": [],
                "notes": [], "grad": False} for d in dtype_names}


class Pool:
    def __init__(self, keys, dtype_names, backend, jobs, op_timeout, stderr_path=None):
        self.ctx = mp.get_context("spawn")
        self.tasks, self.results = self.ctx.Queue(), self.ctx.Queue()
        self.backend, self.stderr_path = backend, stderr_path
        self.keys, self.dtype_names = list(keys), list(dtype_names)
        self.jobs, self.op_timeout = jobs, op_timeout
        self.workers, self.current, self.next_id = {}, {}, 0
        self.previous: dict = {}  # worker id -> the op it finished last
        self.pending = set(self.keys)   # ops without their final "done"
        self.found: dict = {}

    def _spawn(self):
        wid = self.next_id
        self.next_id += 1
        proc = self.ctx.Process(target=_worker, args=(wid, self.tasks, self.results, self.backend,
                                                      self.stderr_path), daemon=True)
        proc.start()
        self.workers[wid] = proc

    def run(self, progress, finished) -> dict:
        for key in self.keys:
            self.tasks.put((key, self.dtype_names))
        for _ in range(min(self.jobs, len(self.keys))):
            self._spawn()
        try:
            while self.pending:
                self._receive(progress, finished)
                self._check_workers(progress)
        finally:
            for _ in self.workers:
                self.tasks.put(None)
            for proc in self.workers.values():
                proc.join(timeout=10)
                if proc.is_alive():
                    proc.kill()
        return self.found

    def _receive(self, progress, finished):
        try:
            message = self.results.get(timeout=1.0)
        except queue.Empty:
            return
        kind, wid, key = message[:3]
        if kind == "start":
            self.current[wid] = (key, message[3], time.monotonic())
            return
        self.current.pop(wid, None)
        for res in message[3].values():
            if res["outcome"] == "error" and wid in self.previous:  # launches are asynchronous
                res["detail"] += f" (the worker ran {self.previous[wid]} before)"
        self.previous[wid] = key
        self.found.setdefault(key, {}).update(message[3])
        for name, res in message[3].items():
            progress(key, name, res)
        self.pending.discard(key)
        finished(key, self.found[key])

    def _check_workers(self, progress):
        for wid, proc in list(self.workers.items()):
            busy = self.current.get(wid)
            timed_out = busy and time.monotonic() - busy[2] > self.op_timeout
            if proc.is_alive() and not timed_out:
                continue
            if timed_out:
                proc.kill()
            proc.join(timeout=5)
            del self.workers[wid]
            self.current.pop(wid, None)
            if busy:
                self._lost(progress, busy, proc.exitcode, timed_out)
            if self.pending:
                self._spawn()

    def _lost(self, progress, busy, exitcode, timed_out):
        key, name, started = busy
        if timed_out:
            res = {"outcome": "skip", "detail": f"timed out after {self.op_timeout} s (worker killed)"}
        else:
            res = {"outcome": "error", "detail": f"the process died (exit code {exitcode}) while running it"}
        res.update({"samples": 0, "sample": "", "fallbacks": [], "notes": [], "grad": False,
                    "seconds": round(time.monotonic() - started, 1)})
        self.found.setdefault(key, {})[name] = res
        progress(key, name, res)
        rest = self.dtype_names[self.dtype_names.index(name) + 1:]
        if rest:
            self.tasks.put((key, rest))
        else:
            self.pending.discard(key)


def sweep(keys, dtype_names, backend, jobs=2, op_timeout=300, progress=None, finished=None,
          stderr_path=None) -> dict:
    pool = Pool(keys, dtype_names, backend, jobs, op_timeout, stderr_path)
    return pool.run(progress or (lambda *a: None), finished or (lambda *a: None))
