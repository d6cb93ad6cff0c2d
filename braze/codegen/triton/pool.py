"""Worker processes that compile Triton kernels in parallel.

Takes: compile jobs (a kernel module's file, the function, its signature,
constexprs, options and GPU architecture). Gives: ``submit(job)`` -> a future
that completes when the binary is in Triton's cache, with ``(Triton's hash of
it, None)``, or when the worker failed, with ``("", error text)``; the caller
then loads the binary in-process by its hash. ``start(arch)`` launches the workers
early (the backend calls it when a graph with CUDA inputs arrives): while
AOTAutograd traces, each imports Triton and, given the GPU architecture, compiles
one throwaway kernel, paying the first compile's one-time costs (most of a
second for sm_90) before any real kernel waits for it.

Why processes: Triton's front end is Python and holds the GIL, so threads give
about 1.5x on many kernels. The workers are plain ``python worker.py``
subprocesses (no ``multiprocessing``: nothing re-imports the user's
``__main__``, no fork of a multi-threaded process); each has one thread here
that sends it a job and waits for the answer. A pool that cannot start, or a
worker that dies, is reported as ``unavailable`` and braze compiles in threads.
"""
from __future__ import annotations

import concurrent.futures as futures
import itertools
import os
import queue
import subprocess
import sys
import threading

from braze import config
from braze.codegen.triton import worker

_lock = threading.Lock()
_pool = None


def workers() -> int:
    return config.compile_workers or min(os.cpu_count() or 1, 12)


def start(arch: int | None = None):
    """The pool, started on first use; None where it cannot run (one core, or no Python).
    ``arch`` (e.g. 90): the workers warm up by compiling for it."""
    global _pool
    with _lock:
        if _pool is None and workers() > 1:
            try:
                _pool = _Pool(workers(), arch)
            except OSError:
                _pool = False
        return _pool or None


def submit(job: dict):
    """A future for ``job``, or None when no pool runs."""
    pool = start()
    return pool.submit(job) if pool is not None else None


class _Pool:
    def __init__(self, size: int, arch: int | None):
        self.jobs: queue.Queue = queue.Queue()
        self.ids = itertools.count()
        self.alive = size
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # workers compile for the GPU
        for _ in range(size):
            warm = [str(arch)] if arch else []
            proc = subprocess.Popen([sys.executable, worker.__file__, *warm], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, env=env)
            threading.Thread(target=self._serve, args=(proc,), daemon=True, name="braze-compile-worker").start()

    def submit(self, job: dict):
        future = futures.Future()
        with _lock:
            if not self.alive:
                return None
            self.jobs.put((dict(job, id=next(self.ids)), future))
        return future

    def _serve(self, proc) -> None:
        """Feed one worker, one job at a time. A worker that dies fails its job and
        stops; when the last one does, the jobs still queued fail too."""
        while True:
            job, future = self.jobs.get()
            try:
                worker.write_message(proc.stdin, job)
                answer = worker.read_message(proc.stdout)
            except Exception:  # a broken pipe or a truncated answer: the worker died
                answer = None
            if answer is None:
                future.set_result(("", "compile worker exited"))
                self._retire()
                return
            future.set_result(answer[1:])

    def _retire(self) -> None:
        with _lock:
            self.alive -= 1
            if self.alive:
                return
            while not self.jobs.empty():
                self.jobs.get_nowait()[1].set_result(("", "no compile worker left"))
