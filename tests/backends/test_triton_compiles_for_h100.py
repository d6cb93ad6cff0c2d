"""Tier 2b: the Triton kernels braze generates also compile for an H100 (sm_90), checked
on a machine without a GPU (``config.triton_compile_check``): Triton's interpreter, which
runs the CI's Triton tests, accepts programs its compiler rejects (``int_pow`` of a 0-d
base and a block of exponents can change a loop variable from scalar to block: the
``__rpow__`` int64 samples then fail to compile on the H100 and run eagerly). Each program
runs through the interpreter against eager as well. Sizes are small; each family of
kernels (pointwise, tiled, row, looped row, column, split, scan, scatter, foreach,
random numbers, integer helpers) appears at least once."""
import pytest
import torch
import torch.nn.functional as F

import braze
from helpers import TRITON_ONLY, check

pytestmark = TRITON_ONLY


@pytest.fixture(autouse=True)
def compile_for_sm90():
    with braze.config.patch(triton_compile_check=90):
        yield


def _adam_like(ps, gs):
    for p, g in zip(ps, gs):
        p.mul_(0.9).add_(g, alpha=-0.1)


PROGRAMS = {
    "pointwise": (lambda x: (x.sin() * 2 + 1, torch.erf(x), x.exp2().rsqrt()), [(33, 17)]),
    "tiled": (lambda x: x.t().contiguous() * 2, [(96, 80)]),
    "row": (lambda x: (torch.softmax(x, -1), F.layer_norm(x, (x.shape[-1],))), [(6, 300)]),
    "row_loop": (lambda x: F.layer_norm(x, (x.shape[-1],)), [(2, 20000)]),
    "column": (lambda x: (x.sum(0), x.amax(0)), [(200, 48)]),
    "split": (lambda x: (x.sum(), x.argmax(), torch.var_mean(x)), [(70000,)]),
    "scan": (lambda x: (x.exp().cumsum(1), x.cumprod(0)), [(30, 50)]),
    "gather_scatter": (lambda x, i: (x[i] * 2, torch.zeros(10, 5).index_add(0, i, x[:6])), [(10, 5), "index"]),
    "int_ops": (lambda a, b: (a // b, a % b, a ** b.abs(), a << (b.abs() % 8), (a.float() * 1.5).to(torch.int32)),
                ["int", "int"]),
    "int_pow_scalar_base": (lambda e, s: (s ** e, e ** s), ["int", "scalar"]),
    "bf16": (lambda x: (x.bfloat16() * 2).float().tanh(), [(40, 7)]),  # (exact in bf16: one rounding)
}


def _make(spec):
    if spec == "index":
        return torch.tensor([0, 3, 3, 9, 1, 2])
    if spec == "int":
        return torch.randint(-20, 20, (6, 7)) + (torch.arange(42).reshape(6, 7) % 3 == 0)
    if spec == "scalar":
        return torch.tensor(3)
    return torch.randn(*spec)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_kernels_compile_for_sm90(name):
    fn, specs = PROGRAMS[name]
    args = [_make(s) for s in specs]
    if name == "int_ops":
        args[1] = args[1].abs() + 1  # divisors and exponents that eager accepts
    check(fn, *args)


def test_gradients_and_random_numbers_compile_for_sm90():
    x = torch.randn(16, 64, requires_grad=True)
    w = torch.randn(64, requires_grad=True)
    check(lambda x, w: F.gelu(F.layer_norm(x, (64,), w)).sum(1), x, w, grad=True)
    compiled = torch.compile(lambda x: F.dropout(x, 0.5, training=True) * 2, backend="braze")
    out = compiled(torch.ones(1000))
    assert set(out.unique().tolist()) <= {0.0, 4.0}


def test_foreach_kernels_compile_for_sm90():
    ps = [torch.randn(s) for s in [(30, 7), (5,), (64,)]]
    gs = [torch.randn_like(p) for p in ps]
    expected = [p.clone() for p in ps]
    _adam_like(expected, gs)
    torch.compile(_adam_like, backend="braze")(ps, gs)
    for a, e in zip(ps, expected):
        torch.testing.assert_close(a, e)


def test_split_reductions_over_a_symbolic_length_compile_for_sm90():
    """A split reduction's chunk follows a symbolic length (computed in the kernel), and its
    split count is the compiled call's: one kernel serves lengths of one class."""
    def reduce_all(x):
        return x.sum(), torch.var_mean(x), x.argmax()

    def reduce_columns(x):
        return x.sum(0), x.amax(0)
    for fn, shapes in ((reduce_all, [(70000,), (91013,)]), (reduce_columns, [(30000, 64), (41000, 64)])):
        compiled = torch.compile(fn, backend="braze", dynamic=True)
        for shape in shapes:
            x = torch.randn(shape)
            torch.testing.assert_close(compiled(x), fn(x), rtol=1e-4, atol=1e-3)


def _row_copy_loads(signature_size: str) -> str:
    """The PTX of a row copy ``out[x, r] = 2 * in[x, r]`` whose row length is an argument of
    type ``signature_size``, compiled for sm_90."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from braze.codegen.triton.worker import ast_source

    def row_copy(in0, out0, n, RBLOCK: tl.constexpr):
        r = tl.arange(0, RBLOCK)
        mask = r < n
        tl.store(out0 + (r + tl.program_id(0) * n), 2 * tl.load(in0 + (r + tl.program_id(0) * n), mask), mask)
    with triton.knobs.runtime.scope():  # compiled, whatever TRITON_INTERPRET says
        triton.knobs.runtime.interpret = False
        row_copy = triton.jit(row_copy)
    signature = {"in0": "*fp32", "out0": "*fp32", "n": signature_size, "RBLOCK": "constexpr"}
    compiled = triton.compile(ast_source(row_copy, signature, {"RBLOCK": 1024}), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": 4})
    return compiled.asm["ptx"]


def test_a_size_compiled_as_a_multiple_of_16_vectorizes_loads_along_it():
    """A symbolic row length of unknown alignment makes Triton load one element at a time;
    marked a multiple of 16 (``worker.DIVISIBLE``), 4 at a time."""
    assert "ld.global.v4" not in _row_copy_loads("i32")
    assert "ld.global.v4" in _row_copy_loads("i32:16")


def _dropout_row_multiplies(folder, aligned: bool) -> int:
    """The ``mul.hi`` count in the PTX of a row dropout ``out[x, r] = keep(x*n + r) * in[x, r]``
    (braze's Philox helpers) whose row length ``n`` is an argument marked a multiple of 16,
    compiled for sm_90 with the kernel's ``ALIGNED`` on or off."""
    import importlib.util
    import triton
    from triton.backends.compiler import GPUTarget
    from braze.codegen.triton.helpers import HEADER, helper_source
    from braze.codegen.triton.kernel import alignment_lines
    from braze.codegen.triton.worker import ast_source
    from braze.ir.symbols import Context, deciding
    with deciding(Context({"s0": 4096}, {"s0": (2, 1 << 20)}, names=["s0"])):
        _, assumptions = alignment_lines(interpreted=False)
    assert assumptions == ["    if ALIGNED:", "        tl.assume(s0 % 16 == 0)"]
    lines = ["@triton.jit", "def row_dropout(in0, seed, out0, s0, ALIGNED: tl.constexpr, RBLOCK: tl.constexpr):",
             *assumptions,
             "    r = tl.arange(0, RBLOCK)",
             "    offset = (r + tl.program_id(0) * s0).to(tl.int64)",
             "    keep = philox_rand(tl.load(seed + 0), offset) < 0.9",
             "    x = tl.load(in0 + (r + tl.program_id(0) * s0), r < s0)",
             "    tl.store(out0 + (r + tl.program_id(0) * s0), tl.where(keep, x, 0.0), r < s0)"]
    path = folder / f"row_dropout_{aligned}.py"
    path.write_text(HEADER + helper_source({"philox_rand"}) + "\n\n" + "\n".join(lines) + "\n")
    with triton.knobs.runtime.scope():  # compiled, whatever TRITON_INTERPRET says
        triton.knobs.runtime.interpret = False
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    signature = {"in0": "*fp32", "seed": "*i64", "out0": "*fp32", "s0": "i32:16", "ALIGNED": "constexpr",
                 "RBLOCK": "constexpr"}
    compiled = triton.compile(ast_source(module.row_dropout, signature, {"ALIGNED": aligned, "RBLOCK": 4096}),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    return compiled.asm["ptx"].count("mul.hi")


def test_sizes_the_launcher_checked_let_a_dropout_share_its_philox_counters(tmp_path):
    """Four neighbouring elements share one Philox counter (``offset >> 2``). With a
    symbolic row length LLVM sees that only through ``tl.assume(s0 % 16 == 0)``
    (``kernel.alignment_lines``): without it each element computes its own Philox."""
    assert _dropout_row_multiplies(tmp_path, aligned=True) * 2 < _dropout_row_multiplies(tmp_path, aligned=False)
