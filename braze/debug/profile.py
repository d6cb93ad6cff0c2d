"""Per-kernel times of a compiled function, for ``braze.profile``.

Takes: the ``CompiledGraph``s ``braze.explain`` recorded and ``again``, a callable that runs
the compiled function once more (and its backward). Gives: ``Profile``: for each kernel of
each graph its time per run, calls per run, bytes it moves (``KernelInfo.bytes_read`` +
``bytes_written``, each buffer counted once per call), achieved GB/s and, on a GPU, its share
of the device's copy bandwidth (``copy_bandwidth``: ``dst.copy_(src)`` of 256 MiB, bytes read
and written); ``Profile.table()`` prints it.

How kernels are timed: each graph's wrapper calls its kernels by name from its globals
(``runtime/wrapper.py``: ``kernel0(...)``), so while ``measure`` runs each name is bound to a
timing shim around the loaded kernel (a C++ function, or a Triton launcher) and restored
after. On the CPU the shim takes wall time (``time.perf_counter``; C++ kernels and the
Triton interpreter return when done). On a GPU it records a pair of CUDA events on the
current stream around the launch (the stream braze launches on), read after one
synchronize at the end, so the timing adds no synchronization between kernels. Extern
calls (matrix products, convolutions) and the wrapper's own work are the rest of a run's
time (``Profile.runs_ms`` minus the kernels).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from braze.debug.explain import human_bytes

MIN_RUNS, MAX_RUNS, BUDGET_S = 3, 50, 0.25  # runs timed: at least 3, until 0.25 s, at most 50
_COPY: dict = {}  # device -> GB/s of a copy


@dataclass
class KernelTime:
    graph: str
    kernel: str
    ms: float  # per run, all its calls together
    calls: float  # calls per run
    bytes: int | None  # per call (None: symbolic sizes)
    copy_gbs: float | None = None  # the device's copy bandwidth (GPU only)

    @property
    def gbs(self) -> float | None:
        if self.bytes is None or self.ms <= 0:
            return None
        return self.bytes * self.calls / (self.ms * 1e-3) / 1e9

    @property
    def copy_share(self) -> float | None:
        """Percent of the device's copy bandwidth this kernel achieved."""
        gbs = self.gbs
        return None if gbs is None or not self.copy_gbs else 100 * gbs / self.copy_gbs


@dataclass
class Profile:
    device: str
    runs: int
    run_ms: float  # one whole run (the compiled function, and its backward), mean
    kernels: list = field(default_factory=list)  # KernelTime
    copy_gbs: float | None = None

    def of(self, graph: str, kernel: str) -> KernelTime | None:
        return next((k for k in self.kernels if k.graph == graph and k.kernel == kernel), None)

    def table(self) -> str:
        gpu = self.copy_gbs is not None
        lines = [f"braze profile on {self.device}: {self.runs} runs, {self.run_ms:.3f} ms per run, "
                 f"{sum(k.ms for k in self.kernels):.3f} ms in kernels"
                 + (f"; copy bandwidth {self.copy_gbs:.0f} GB/s" if gpu else ""),
                 f"  {'graph':8} {'kernel':10} {'time/run':>12} {'calls':>5} {'bytes/call':>11} {'GB/s':>8}"
                 + (f" {'% copy':>7}" if gpu else "")]
        for k in sorted(self.kernels, key=lambda k: -k.ms):
            gbs, share = k.gbs, k.copy_share
            lines.append(f"  {k.graph:8} {k.kernel:10} {_time(k.ms):>12} {k.calls:>5g} {human_bytes(k.bytes):>11} "
                         f"{f'{gbs:.1f}' if gbs is not None else '?':>8}"
                         + (f" {f'{share:.0f} %' if share is not None else '?':>7}" if gpu else ""))
        return "\n".join(lines)


def _time(ms: float) -> str:
    return f"{ms * 1000:.1f} us" if ms < 1 else f"{ms:.3f} ms"


def measure(graphs: list, again) -> Profile:
    """Run ``again`` (once to warm up, then timed) with every kernel of ``graphs`` timed."""
    device = graphs[0].device if graphs else torch.device("cpu")
    gpu = device.type == "cuda"
    again()  # a warm-up: first-call work (a lazily compiled backward, caches) stays out of the times
    with _Timers(graphs, gpu) as timers:
        runs, total, start = 0, 0.0, time.perf_counter()
        while runs < MIN_RUNS or (runs < MAX_RUNS and time.perf_counter() - start < BUDGET_S):
            total += _timed_run(again, gpu)
            runs += 1
    copy = copy_bandwidth(device) if gpu else None
    kernels = [KernelTime(g.name, k.name, ms / runs, timers.calls[(id(g), k.name)] / runs,
                          _bytes_of(k), copy)
               for g in graphs for k in g.kernels
               for ms in [timers.elapsed_ms((id(g), k.name))] if timers.calls[(id(g), k.name)]]
    return Profile(str(device), runs, total / runs, kernels, copy)


def _timed_run(again, gpu: bool) -> float:
    if not gpu:
        t = time.perf_counter()
        again()
        return (time.perf_counter() - t) * 1000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    again()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _bytes_of(kernel) -> int | None:
    if kernel.bytes_read is None or kernel.bytes_written is None:
        return None
    return kernel.bytes_read + kernel.bytes_written


class _Timers:
    """Binds each kernel name in its graph's wrapper globals to a timing shim; restores them."""

    def __init__(self, graphs: list, gpu: bool):
        self.graphs, self.gpu = graphs, gpu
        self.calls: dict = {}
        self.wall: dict = {}  # CPU: key -> seconds
        self.events: dict = {}  # GPU: key -> [(start, end)]
        self.saved: list = []  # (globals, name, the kernel)

    def __enter__(self):
        for g in self.graphs:
            env = getattr(g.run, "__globals__", None)
            for k in g.kernels:
                key = (id(g), k.name)
                self.calls[key], self.wall[key], self.events[key] = 0, 0.0, []
                if env is not None and k.name in env:
                    self.saved.append((env, k.name, env[k.name]))
                    env[k.name] = self._shim(key, env[k.name])
        return self

    def __exit__(self, *exc) -> None:
        for env, name, kernel in reversed(self.saved):
            env[name] = kernel
        if self.gpu:
            torch.cuda.synchronize()

    def _shim(self, key: tuple, kernel):
        calls, wall, events = self.calls, self.wall, self.events[key]
        if self.gpu:
            def timed(*args):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                result = kernel(*args)
                end.record()
                events.append((start, end))
                calls[key] += 1
                return result
        else:
            def timed(*args):
                t = time.perf_counter()
                result = kernel(*args)
                wall[key] += time.perf_counter() - t
                calls[key] += 1
                return result
        return timed

    def elapsed_ms(self, key: tuple) -> float:
        if self.gpu:
            return sum(start.elapsed_time(end) for start, end in self.events[key])
        return self.wall[key] * 1000


def copy_bandwidth(device, nbytes: int = 256 << 20) -> float:
    """GB/s of ``dst.copy_(src)`` on a CUDA device (bytes read and written), measured once
    per device with CUDA events (as ``benchmarks/measure.copy_bandwidth``)."""
    device = torch.device(device)
    if device not in _COPY:
        src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        reps = 10
        start.record()
        for _ in range(reps):
            dst.copy_(src)
        end.record()
        end.synchronize()
        _COPY[device] = 2 * nbytes / (start.elapsed_time(end) / reps * 1e-3) / 1e9
        del src, dst
    return _COPY[device]
