"""Progress of a long compile, on stderr.

Takes: the compiler's calls: ``tracking(label)`` around one graph's compile, ``total(n)``
kernels to build, ``built(n)`` kernels done, ``stage(text)`` what runs now (the C++
compiler, say). Gives: one line on stderr, redrawn in place,
``braze graph3 (forward): 12/40 kernels built, Triton compiling, 3.1 s``, once the graph's
compile has run ``DELAY_S`` seconds, and finished with its final count when the compile
ends. Only when stderr is a terminal and ``config.progress`` is on; otherwise nothing is
started and every call here returns at once.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time

from braze import config

DELAY_S = 2.0  # a compile shorter than this shows nothing
INTERVAL_S = 0.25  # redraw period after that

_active = threading.local()


class Progress:
    """One graph's compile: counts, drawn by a ticker thread after ``DELAY_S``."""

    def __init__(self, label: str, stream):
        self.label, self.stream = label, stream
        self.kernels = self.done = 0
        self.stage = ""
        self.start = time.perf_counter()
        self.shown = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="braze-progress", daemon=True)
        self._ticker.start()

    def line(self) -> str:
        counts = f"{self.done}/{self.kernels} kernels built" if self.kernels else "planning kernels"
        stage = f", {self.stage}" if self.stage else ""
        return f"braze {self.label}: {counts}{stage}, {time.perf_counter() - self.start:.1f} s"

    def close(self) -> None:
        self._stop.set()
        self._ticker.join()
        if self.shown or time.perf_counter() - self.start >= DELAY_S:
            self.stage = ""
            self._draw("\n")

    def _tick(self) -> None:
        if self._stop.wait(DELAY_S):
            return
        while not self._stop.is_set():
            self._draw("")
            self._stop.wait(INTERVAL_S)

    def _draw(self, end: str) -> None:
        with self._lock:
            self.stream.write("\r\x1b[K" + self.line() + end)
            self.stream.flush()
            self.shown = True


def _wanted(stream) -> bool:
    if not config.progress:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@contextlib.contextmanager
def tracking(label: str):
    """Track one graph's compile (an inner one, while a graph is tracked, adds to it)."""
    stream = sys.stderr
    if getattr(_active, "progress", None) is not None or not _wanted(stream):
        yield
        return
    _active.progress = Progress(label, stream)
    try:
        yield
    finally:
        progress, _active.progress = _active.progress, None
        progress.close()


def total(n: int) -> None:
    """The graph has ``n`` kernels to build (a backend may restate it in its own units)."""
    progress = getattr(_active, "progress", None)
    if progress is not None:
        progress.kernels, progress.done = n, min(progress.done, n)


def built(n: int = 1) -> None:
    progress = getattr(_active, "progress", None)
    if progress is not None:
        progress.done = min(progress.done + n, progress.kernels)


def stage(text: str) -> None:
    progress = getattr(_active, "progress", None)
    if progress is not None:
        progress.stage = text
