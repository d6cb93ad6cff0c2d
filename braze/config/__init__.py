"""Every braze knob, in one place.

Takes: environment variables (read once, at import) and assignments such as
``braze.config.strict = True``.
Gives: module-level attributes that the rest of braze reads at compile time, a
``patch(**knobs)`` context manager / decorator for temporary changes, and
``describe()``, the table of knobs printed by ``python -m braze.config``
(``__main__.py`` beside this file).

Each knob has a name, an environment variable, a default and one line of help.
``torch.compile(fn, backend="braze", options={...})`` patches the same knobs for
the graphs of that one compiled function.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

from braze.cpu_info import last_level_cache_bytes, vector_bits


@dataclass(frozen=True)
class Knob:
    name: str
    env: str
    default: Any
    kind: Callable[[str], Any]
    help: str


def _flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def _names(text: str) -> frozenset:
    return frozenset(t.strip() for t in text.split(",") if t.strip())


def _optional_int(text: str) -> int | None:
    return int(text) if text.strip() else None


def _rounding(text: str) -> str:
    if text not in ("discontinuous", "every_op"):
        raise ValueError("expected 'discontinuous' or 'every_op'")
    return text


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "braze")


KNOBS = (
    # errors and reporting
    Knob("strict", "BRAZE_STRICT", False, _flag,
         "raise on a graph braze cannot compile (naming op, shapes, dtypes) instead of running it eagerly"),
    Knob("strict_ops", "BRAZE_STRICT_OPS", False, _flag,
         "with strict: also raise for a single op braze would run through ATen (no rule, a rule that "
         "declines its arguments, a dtype braze does not generate), not only for a graph it cannot "
         "compile; the ops of fallback_ops and the matrix products and convolutions braze always "
         "hands to ATen are not counted"),
    Knob("runtime_checks", "BRAZE_RUNTIME_CHECKS", True, _flag,
         "raise as eager raises for an index out of range (gather, index, index_select, embedding, "
         "scatters, index_put) and an integer division by zero on the CPU; off is unsafe: such an "
         "index reads or writes a clamped position and a division by zero gives 0, silently"),
    Knob("guards", "BRAZE_GUARDS", True, _flag,
         "check what a compiled graph assumes before running it: a graph with symbolic sizes tests its "
         "size class's guards on each call (another class is compiled on a miss), and a first call "
         "that raises restores the inputs it wrote and reruns eagerly; off is unsafe, a test aid: the "
         "first size class compiled runs for every size (wrong results outside it) and a failing first "
         "call raises"),
    Knob("debug", "BRAZE_DEBUG", 0, int,
         "0 quiet; 1 one line per graph; 2 + kernels and fusion decisions; 3 + generated code "
         "(levels of the 'braze' loggers, on stderr: braze/logs.py)"),
    Knob("debug_dir", "BRAZE_DEBUG_DIR", "", str,
         "if set, each graph writes its FX graph, IR, fusion log and code into a folder here"),
    Knob("report", "BRAZE_REPORT", "", str,
         "if set, a directory: each compiled function writes one self-contained HTML page there "
         "(all its graphs, forward and backward; rewritten as each graph is compiled): the fused "
         "graph drawn, kernels, fusion candidates, IR (braze/debug/html.py)"),
    Knob("progress", "BRAZE_PROGRESS", True, _flag,
         "while a graph's compile runs past 2 s, show kernels built / total on stderr (only when "
         "stderr is a terminal)"),
    # caching
    Knob("cache", "BRAZE_CACHE", True, _flag, "use the on-disk compile cache"),
    Knob("graph_cache", "BRAZE_GRAPH_CACHE", True, _flag,
         "keep whole compiled graphs in the disk cache, keyed by the ATen graph: a later process "
         "loads their kernels without lowering or generating code (off while debugging)"),
    Knob("trace_cache", "BRAZE_TRACE_CACHE", True, _flag,
         "keep inference graphs that AOTAutograd's runtime adds nothing to in the disk cache, keyed by "
         "Dynamo's graph: a later process skips AOTAutograd's trace for them"),
    Knob("cache_dir", "BRAZE_CACHE_DIR", _default_cache_dir(), str,
         "per-user compile cache (created with mode 0700)"),
    # lowering
    Knob("fallback_ops", "BRAZE_FALLBACK_OPS", frozenset(), _names,
         "comma-separated ATen ops to run through ATen even if braze can lower them, e.g. 'aten.exp'"),
    Knob("channels_last_convs", "BRAZE_CHANNELS_LAST_CONVS", "auto", str,
         "4-D convolutions and the ops between them in channels-last: 'auto' (CUDA), 'on', 'off'"),
    Knob("pad_matmul_rows", "BRAZE_PAD_MATMUL_ROWS", "auto", str,
         "store mm/addmm products whose rows are not a multiple of 16 bytes with padded rows, "
         "returned padded as Inductor does: 'auto' (CUDA), 'on', 'off' (eager's strides)"),
    Knob("addmm_bias_in_kernels", "BRAZE_ADDMM_BIAS_IN_KERNELS", True, _flag,
         "run float32 addmm as mm, its bias added in the generated kernels that read the product, where "
         "every reader is one (off: cuBLAS adds the bias)"),
    Knob("libdevice_ftz", "BRAZE_LIBDEVICE_FTZ", False, _flag,
         "GPU: libdevice's math (fmod, exp, log, ...) flushes subnormal inputs and results to zero, "
         "Triton's default (off: kept, as eager keeps them)"),
    Knob("group_matmuls", "BRAZE_GROUP_MATMULS", True, _flag,
         "in inference graphs, run matrix products x @ W1.T, x @ W2.T, ... of one x as one "
         "product with the weights concatenated (q/k/v projections)"),
    Knob("fallback_random", "BRAZE_FALLBACK_RANDOM", False, _flag,
         "run rand, randn, randint, bernoulli, uniform, normal, exponential and dropout through ATen, giving "
         "eager's numbers from the same seed (off: drawn inside the fused kernels by Philox4x32-10, "
         "one counter per four uniforms)"),
    Knob("low_precision_rounding", "BRAZE_LOW_PRECISION_ROUNDING", "discontinuous", _rounding,
         "bf16/fp16 intermediates inside a kernel: 'discontinuous' keeps them in float32 and rounds "
         "one to its dtype where eager's rounding can change a result (round, floor, ceil, trunc, "
         "comparisons, integer division, casts to integer or bool, argmax); 'every_op' rounds after "
         "every op as eager does (bit-for-bit closer, slower)"),
    Knob("symbolic_sizes", "BRAZE_SYMBOLIC_SIZES", True, _flag,
         "compile graphs with symbolic sizes once per size class, sizes passed to the kernels "
         "(off: once per concrete shape)"),
    Knob("max_size_variants", "BRAZE_MAX_SIZE_VARIANTS", 8, int,
         "size classes compiled for one graph with symbolic sizes before it is compiled per shape"),
    Knob("specialize_dynamic", "BRAZE_SPECIALIZE_DYNAMIC", True, _flag,
         "compile graphs with symbolic sizes once per concrete shape at run time"),
    # inlining and fusion
    Knob("inline_max_ops", "BRAZE_INLINE_MAX_OPS", 24, int,
         "a buffer read more than once is recomputed in its readers only if it costs at most this many ops"),
    Knob("inline_max_loads", "BRAZE_INLINE_MAX_LOADS", 3, int,
         "a buffer read more than once is stored if its expression loads more buffers of its size than this"),
    Knob("inline_max_body", "BRAZE_INLINE_MAX_BODY", 400, int,
         "a buffer whose expression has grown past this many ops is stored, whatever its readers"),
    Knob("fuse", "BRAZE_FUSE", True, _flag, "fuse buffers into shared kernels (off: one kernel per stored buffer)"),
    Knob("single_op_kernels", "BRAZE_SINGLE_OP_KERNELS", True, _flag,
         "generate kernels that compute one lone ATen op (off: such an op runs through ATen; lone: "
         "every value the kernel computes comes from one node of the ATen graph, views, loads, stores "
         "and copies not counted; ops that write into their arguments are kept)"),
    Knob("one_kernel_per_op", "BRAZE_ONE_KERNEL_PER_OP", False, _flag,
         "bisecting: no inlining, no fusion, no foreach: every IR node is stored by a kernel of its "
         "own (one per ATen op; an op lowered to several nodes, as var_mean, gets one per node)"),
    Knob("fuse_horizontal", "BRAZE_FUSE_HORIZONTAL", True, _flag,
         "fuse siblings that read the same input but do not depend on each other"),
    Knob("fuse_reductions", "BRAZE_FUSE_REDUCTIONS", True, _flag,
         "fuse pointwise prologues/epilogues and sibling reductions into reduction kernels"),
    Knob("foreach", "BRAZE_FOREACH", True, _flag,
         "launch consecutive independent pointwise kernels as one (optimizer steps over many tensors)"),
    # backends
    Knob("cpu_backend", "BRAZE_CPU_BACKEND", "cpp", str,
         "code generator for CPU tensors: 'cpp' (OpenMP + SIMD) or 'triton' (TRITON_INTERPRET=1, for tests)"),
    Knob("cxx", "BRAZE_CXX", "g++", str, "C++ compiler for the cpp backend"),
    Knob("cxx_flags", "BRAZE_CXX_FLAGS",
         "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -fwrapv -ffp-contract=off "
         "-fno-strict-aliasing -fno-builtin-sin -fno-builtin-cos -fno-builtin-sinf -fno-builtin-cosf",
         str, "flags for the cpp backend (shared-library flags are added; -fno-trapping-math (no FP "
              "exception traps, results unchanged) lets GCC vectorize floor/ceil/trunc/round and a "
              "division under a select; the -fno-builtin flags stop GCC from merging sin and cos into a "
              "scalar sincos call that does not vectorize)"),
    Knob("cpp_math_vector_bits", "BRAZE_CPP_MATH_VECTOR_BITS", vector_bits(), int,
         "vector width of cpp kernels that call glibc's vector math (sin, exp, erf, ...): default the "
         "CPU's widest registers, so that an AVX-512 CPU calls libmvec's 16-lane variants even where the "
         "compiler's tuning prefers 256-bit vectors (recent Intel Xeons); 0: that tuning, as every other "
         "kernel has"),
    Knob("num_threads", "BRAZE_NUM_THREADS", None, _optional_int,
         "OpenMP threads for cpp kernels (default: torch.get_num_threads() of the calling thread, "
         "read at each call)"),
    Knob("host_cache_mb", "BRAZE_HOST_CACHE_MB", 512, int,
         "CPU: MB of freed CPU buffers braze keeps for reuse by the next call (0: off): intermediates, "
         "gradients and saved activations, not the outputs the user holds; a training step then writes "
         "into memory already faulted in"),
    Knob("host_cache_min_kb", "BRAZE_HOST_CACHE_MIN_KB", 256, int,
         "CPU: smallest buffer, in KB, that goes through braze's buffer cache (smaller ones stay "
         "with ATen's allocator)"),
    Knob("huge_pages", "BRAZE_HUGE_PAGES", True, _flag,
         "CPU: back fresh buffers of 4 MB and more with transparent huge pages (madvise), so that "
         "writing them faults once per 2 MB instead of once per 4 KB (runtime/pages.py)"),
    Knob("cpp_lanes", "BRAZE_CPP_LANES", 16, int, "accumulator lanes of a cpp reduction (SIMD width in elements)"),
    Knob("cpp_reduce_lanes_max", "BRAZE_CPP_REDUCE_LANES_MAX", max(16, 4 * vector_bits() // 32), int,
         "most accumulator lanes of a long reduce loop in a cpp row or split kernel: more than cpp_lanes, "
         "up to four float32 vectors of the CPU's widest registers (64 with AVX-512, 32 with AVX2), "
         "are independent chains that hide each fold's latency; set to cpp_lanes for one width"),
    Knob("cpp_call_lanes", "BRAZE_CPP_CALL_LANES", 0, int,
         "lanes of each glibc vector-math call in a row kernel's loop of calls (simdlen; 0: GCC's choice, "
         "the widest vectors for a block of 16): 8 calls the 256-bit variants twice a block"),
    Knob("cpp_half_blocks", "BRAZE_CPP_HALF_BLOCKS", True, _flag,
         "cpp kernels widen the float16 they read along their innermost loop, and narrow what they store, "
         "a block of lanes at a time (F16C where the build has it; off: per element, in bit arithmetic)"),
    Knob("cpp_stream_min_bytes", "BRAZE_CPP_STREAM_MIN_BYTES", last_level_cache_bytes(), int,
         "cpp pointwise and row kernels that move at least this many bytes (default: the last-level "
         "cache size) write their outputs with non-temporal stores, so no line is read before it is "
         "overwritten (x86 only; 0: every such kernel; negative: never)"),
    Knob("autotune", "BRAZE_AUTOTUNE", False, _flag, "triton: try a few launch configurations per kernel, cached"),
    Knob("foreach_max_parts", "BRAZE_FOREACH_MAX_PARTS", 8, int,
         "triton: most tensors one foreach kernel updates (its compile time grows faster than that); "
         "longer runs are split into kernels of about equal length"),
    Knob("cudagraphs", "BRAZE_CUDAGRAPHS", False, _flag, "triton: replay compiled graphs through CUDA graphs"),
    Knob("cudagraph_shapes", "BRAZE_CUDAGRAPH_SHAPES", 8, int,
         "triton, cudagraphs: a graph with symbolic sizes keeps captures for this many concrete shapes "
         "(the least recently used dropped with its memory)"),
    Knob("triton_compile_check", "BRAZE_TRITON_COMPILE_CHECK", 0, int,
         "triton on CPU tensors (the interpreter): also compile each kernel for this GPU architecture "
         "(90: sm_90) without a GPU, so that a program Triton's compiler rejects but its interpreter "
         "runs fails here too (a test aid; 0: off)"),
    Knob("triton_bounds_check", "BRAZE_TRITON_BOUNDS_CHECK", False, _flag,
         "triton on CPU tensors (the interpreter): raise when a load or store that its mask lets "
         "through reaches outside every tensor the kernel was given (on a GPU such an access reads "
         "a neighbour's memory or faults with an illegal address; a test aid)"),
    Knob("native_launch", "BRAZE_NATIVE_LAUNCH", True, _flag,
         "triton on a GPU: launch kernels through braze's one C launcher (built once with the cxx "
         "compiler) instead of Triton's, which compiles a launcher per kernel signature; kernels it "
         "cannot serve use Triton's either way"),
    Knob("compile_workers", "BRAZE_COMPILE_WORKERS", 0, int,
         "triton: worker processes that compile kernels in parallel (0: one per core, at most 12; "
         "1: compile in the calling thread)"),
)

_BY_NAME = {k.name: k for k in KNOBS}


def _read_env(knob: Knob) -> Any:
    text = os.environ.get(knob.env)
    if text is None:
        return knob.default
    try:
        return knob.kind(text)
    except ValueError as exc:
        raise ValueError(f"braze: environment variable {knob.env}={text!r} is not valid: {exc}") from None


def _load() -> None:
    module = sys.modules[__name__]
    for knob in KNOBS:
        setattr(module, knob.name, _read_env(knob))


def _check_name(name: str) -> None:
    if name not in _BY_NAME:
        close = [k for k in _BY_NAME if name.split("_")[0] in k]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise AttributeError(f"braze.config has no knob {name!r}{hint}; see braze.config.describe()")


def snapshot() -> dict:
    """The current value of every knob."""
    module = sys.modules[__name__]
    return {k.name: getattr(module, k.name) for k in KNOBS}


@contextlib.contextmanager
def _patched(changes: dict):
    module = sys.modules[__name__]
    for name in changes:
        _check_name(name)
    saved = {name: getattr(module, name) for name in changes}
    try:
        for name, value in changes.items():
            setattr(module, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


class patch:
    """Temporarily change knobs: ``with braze.config.patch(fuse=False): ...`` or as a decorator."""

    def __init__(self, **changes: Any):
        self.changes = changes
        self._ctx = None

    def __enter__(self):
        self._ctx = _patched(self.changes)
        return self._ctx.__enter__()

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _patched(self.changes):
                return fn(*args, **kwargs)
        return wrapper


def describe(width: int = 100) -> str:
    """Every knob: name, environment variable and current value on one line (a long value
    wrapped onto the lines below, whole), then its help, wrapped and indented."""
    lines = [f"{'knob':26} {'environment':30} value", ""]
    for knob, value in zip(KNOBS, snapshot().values()):
        shown = repr(value) if not isinstance(value, frozenset) else ",".join(sorted(value)) or "-"
        values = textwrap.wrap(shown, max(20, width - 58), break_on_hyphens=False) or [""]
        lines.append(f"{knob.name:26} {knob.env:30} {values[0]}")
        lines += [f"{'':57} {more}" for more in values[1:]]
        lines += textwrap.wrap(knob.help, width, initial_indent="    ", subsequent_indent="    ")
    return "\n".join(lines)


_load()
