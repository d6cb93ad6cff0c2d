"""A stand-in for ``libdevice`` under Triton's interpreter (``TRITON_INTERPRET=1``).

Takes: nothing. Gives: ``libdevice``, a namespace with the libdevice functions
generated kernels call, computing on the interpreter's NumPy arrays with
PyTorch's CPU kernels (``fmod`` with NumPy's: torch's vectorized one is not exact);
like libdevice it takes float32 and float64 only (a bfloat16 array holds bit
patterns, which it would misread). Triton's interpreter
runs ``tl.*`` itself but leaves ``triton.language.extra.libdevice`` as stubs that
return ``None``; a kernel module loaded for the interpreter gets this namespace
as its ``libdevice``.

It also gives ``install``, fixes to the interpreter's own faults, and a check the
GPU does not make: with ``config.triton_bounds_check`` every load, store and atomic
update is checked against the storages of the kernel's arguments (the interpreter
reads and writes host memory wherever a pointer points). It converts to bfloat16 by
truncating float32 and by taking integers as bit patterns (GPUs round to nearest
even), and from bfloat16 it changes subnormals; it types a comparison's result with
its operands' dtype instead of ``int1``, so a scalar comparison broadcast to a block
becomes floats and a following ``&``/``|``/``^`` fails in NumPy; and it folds
``tl.reduce`` with a user combine function one element at a time in Python (minutes
for a few thousand rows); braze's combine helpers are associative and elementwise, so their
reductions are run as a vectorized tree instead; and it rounds a float32
``tl.fma`` twice (the product, then the sum), where the GPU rounds once.

This is test support only: on a GPU the same kernel text calls the real
libdevice and Triton's own reductions, and this module is never used.
"""
from __future__ import annotations

import types

import numpy as np
import torch
import triton.language as tl

_UNARY = {
    "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log, "log2": torch.log2,
    "log10": torch.log10, "log1p": torch.log1p, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh,
    "tanh": torch.tanh, "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh,
    "erf": torch.erf, "erfc": torch.erfc, "erfinv": torch.erfinv, "lgamma": torch.lgamma,
    "nearbyint": torch.round, "trunc": torch.trunc, "floor": torch.floor, "ceil": torch.ceil,
    "rsqrt": torch.rsqrt,
}
def _c_fmod(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C's fmod, exact as libdevice's: torch's vectorized CPU fmod gives NaN where a / b
    overflows (fmod(-3e38, 1e-30) in blocks of 16 float32; one at a time it is right)."""
    with np.errstate(all="ignore"):
        return torch.from_numpy(np.fmod(a.numpy(), b.numpy()))


_BINARY = {
    "pow": torch.pow, "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign,
    "nextafter": torch.nextafter, "mul_rn": torch.mul, "fmod": _c_fmod,
}


def _data(x):
    return x.handle.data if isinstance(x, tl.tensor) else np.asarray(x)


def _wrap(result: np.ndarray, like: tl.tensor, dtype=None) -> tl.tensor:
    from triton.runtime.interpreter import TensorHandle
    scalar = dtype or like.type.scalar
    ty = tl.block_type(scalar, list(result.shape)) if like.type.is_block() else scalar
    return tl.tensor(TensorHandle(result, scalar), ty)


def _elementwise(name, fn, *args):
    tensors = [a for a in args if isinstance(a, tl.tensor)]
    for t in tensors:  # as on a GPU, where libdevice has no 16-bit float versions
        if t.type.scalar.is_floating() and t.type.scalar not in (tl.float32, tl.float64):
            raise TypeError(f"libdevice.{name} takes float32 or float64, not {t.type.scalar}")
    like = next((t for t in tensors if t.type.is_block()), tensors[0])
    shape = np.broadcast_shapes(*(np.shape(_data(a)) for a in args))
    arrays = [np.broadcast_to(_data(a), shape) for a in args]
    out = fn(*(torch.from_numpy(np.array(a)) for a in arrays))
    return _wrap(out.numpy().astype(_data(like).dtype, copy=False), like)


def _signbit(x):
    return _wrap(np.signbit(_data(x)).astype(np.int32), x, tl.int32)


def _make() -> types.SimpleNamespace:
    functions = {}
    for name, fn in {**_UNARY, **_BINARY}.items():
        functions[name] = (lambda name, fn: lambda *args, **_: _elementwise(name, fn, *args))(name, fn)
    functions["signbit"] = lambda x, **_: _signbit(x)
    return types.SimpleNamespace(**functions)


libdevice = _make()


# ----------------------------------------------------------------------------- reductions

def _tree_reduce(reduce_op, inputs):
    """``tl.reduce`` of braze's combine helpers, vectorized: halves of the block are
    combined pairwise until one element is left (the interpreter's own fallback calls
    the combine function once per element, in Python)."""
    axis = reduce_op.axis
    arrays = [t.handle.data for t in inputs]
    dtypes = [t.dtype for t in inputs]
    if axis is None:
        arrays, axis = [a.reshape(-1) for a in arrays], 0
    while arrays[0].shape[axis] > 1:
        n = arrays[0].shape[axis]
        half = n // 2
        first = [reduce_op.to_tensor(np.take(a, range(half), axis), d) for a, d in zip(arrays, dtypes)]
        second = [reduce_op.to_tensor(np.take(a, range(half, 2 * half), axis), d) for a, d in zip(arrays, dtypes)]
        out = reduce_op.combine_fn.fn(*first, *second)
        out = out if isinstance(out, tuple) else (out,)
        merged = [np.asarray(o.handle.data).reshape(f.handle.data.shape) for o, f in zip(out, first)]
        if n % 2:
            merged = [np.concatenate([m, np.take(a, [n - 1], axis)], axis) for m, a in zip(merged, arrays)]
        arrays = [m.astype(a.dtype, copy=False) for m, a in zip(merged, arrays)]
    results = []
    for a, d in zip(arrays, dtypes):
        if not reduce_op.keep_dims:
            a = np.squeeze(a, axis) if reduce_op.axis is not None else a.reshape(())
        results.append(reduce_op.to_tensor(a, d))
    return results


def _cast_to_bf16(builder_cls):
    """Round to bfloat16 to nearest even, as the GPU's ``cvt.rn.bf16`` does (the
    interpreter truncates float32, and takes the bits of float64 values and the
    values of integers and bools as bfloat16 bit patterns). Integers go through
    float32, as eager converts them. From bfloat16 to float32 the bits are shifted
    into place (the interpreter turned the subnormal 1.001e-38 into 8.27e-39)."""
    from triton.runtime.interpreter import TensorHandle
    original = builder_cls.cast_impl

    def cast_impl(self, src, dst_type):
        source = src.dtype.scalar
        if source == tl.bfloat16 and dst_type.scalar == tl.float32:  # exact, subnormals too
            bits = np.asarray(src.data).astype(np.uint32) << 16
            return TensorHandle(bits.view(np.float32), dst_type.scalar)
        if dst_type.scalar == tl.bfloat16 and (source in (tl.float32, tl.float64) or source.is_int()):
            values = torch.from_numpy(np.array(src.data))
            values = values if source.is_floating() else values.to(torch.float32)
            rounded = values.to(torch.bfloat16).view(torch.int16)
            return TensorHandle(rounded.numpy().view(np.uint16), dst_type.scalar)
        return original(self, src, dst_type)
    builder_cls.cast_impl = cast_impl


def _compare_to_int1(builder_cls):
    """Comparisons give ``int1`` values, as compiled Triton's do. The interpreter keeps
    the operands' dtype on the result (its data is NumPy bool), and ``tl.broadcast``
    of a scalar converts the data to that dtype: ``(scalar != 0.0) & (block != 0.0)``
    then meets float32 0.0/1.0 and NumPy's ``bitwise_and`` refuses it. The kernel
    text is right (GPUs run it); only the interpreter's bookkeeping is wrong."""
    from triton.runtime.interpreter import TensorHandle

    def typed(original):
        return lambda self, lhs, rhs: TensorHandle(original(self, lhs, rhs).data, tl.int1)
    for name in dir(builder_cls):
        if name.startswith(("create_icmp", "create_fcmp")):
            setattr(builder_cls, name, typed(getattr(builder_cls, name)))


def _fused_fma(builder_cls):
    """``tl.fma`` as the GPU's ``fma.rn``: float32 operands are multiplied and added in
    float64, where their product is exact (the interpreter rounds the product to float32
    first), then rounded to float32: one rounding wherever the float64 sum is exact (a
    remainder ``a - q * b`` that float32 holds); else float64's comes first, one float32
    ulp off in rare halfway cases. Float64 operands keep two roundings."""
    from triton.runtime.interpreter import TensorHandle
    original = builder_cls.create_fma

    def create_fma(self, x, y, z):
        if z.dtype.scalar != tl.float32:
            return original(self, x, y, z)
        wide = x.data.astype(np.float64) * y.data.astype(np.float64) + z.data.astype(np.float64)
        return TensorHandle(wide.astype(np.float32), z.dtype.scalar)
    builder_cls.create_fma = create_fma


def _ex2_assembly(builder_cls):
    """The one inline assembly braze's helpers use, ``ex2.approx.ftz.f32`` (``exp2_normal``),
    as float32 exp2 (the interpreter runs no assembly)."""
    from triton.runtime.interpreter import TensorHandle
    original = builder_cls.create_inline_asm

    class Call:
        def __init__(self, handle):
            self.handle = handle

        def get_result(self, index):
            return self.handle

    def create_inline_asm(self, asm, constraints, values, types, is_pure, pack):
        if not asm.startswith("ex2.approx.ftz.f32"):
            return original(self, asm, constraints, values, types, is_pure, pack)
        x = values[0]
        return Call(TensorHandle(np.exp2(x.data.astype(np.float32)).astype(np.float32), tl.float32))
    builder_cls.create_inline_asm = create_inline_asm


def install() -> None:
    """Once per process: route ``tl.reduce`` calls whose combine function is a braze
    helper through ``_tree_reduce`` (other Triton code keeps the interpreter's own
    path), convert floats and integers to bfloat16 as GPUs do, type comparisons as
    ``int1``, round a float32 ``tl.fma`` once and run ``exp2_normal``'s assembly."""
    from triton.runtime import interpreter
    ops = interpreter.ReduceOps
    if getattr(ops, "_braze_fast", False):
        return
    original = ops.generic_reduce

    def generic_reduce(self, input):
        module = getattr(getattr(self.combine_fn, "fn", None), "__module__", "") or ""
        if module.startswith("braze_triton_"):
            return _tree_reduce(self, input)
        return original(self, input)
    ops.generic_reduce = generic_reduce
    ops._braze_fast = True
    _cast_to_bf16(interpreter.InterpreterBuilder)
    _compare_to_int1(interpreter.InterpreterBuilder)
    _fused_fma(interpreter.InterpreterBuilder)
    _ex2_assembly(interpreter.InterpreterBuilder)
    _bounds_check(interpreter)


class OutOfBounds(RuntimeError):
    """A kernel's load, store or atomic update reached outside the storages it was given."""


_extents: list = []  # [(first byte, byte after the last)] of the running kernel's storages
_running: list = [""]  # the running kernel's name


def _bounds_check(interpreter) -> None:
    """Under ``config.triton_bounds_check``: record the storages a launch passes (the
    interpreter's host copies, which the pointers point into) and check each load, store
    and atomic update's addresses where its mask is true against them."""
    from braze import config
    executor, builder = interpreter.GridExecutor, interpreter.InterpreterBuilder
    init_args = executor._init_args_hst

    def init_args_hst(self, args_dev, kwargs):
        args, kwargs_hst = init_args(self, args_dev, kwargs)
        if config.triton_bounds_check:
            storages = [a.untyped_storage() for a in list(args) + list(kwargs_hst.values())
                        if isinstance(a, torch.Tensor)]
            _extents[:] = [(st.data_ptr(), st.data_ptr() + st.nbytes()) for st in storages]
            _running[0] = getattr(self.fn, "__name__", "")
        return args, kwargs_hst

    def checked(original, what: str, ptrs_at: int, mask_at: int):
        def method(self, *args):
            if config.triton_bounds_check:
                _check(args[ptrs_at], args[mask_at], what)
            return original(self, *args)
        return method
    executor._init_args_hst = init_args_hst
    builder.create_masked_load = checked(builder.create_masked_load, "load", 0, 1)
    builder.create_masked_store = checked(builder.create_masked_store, "store", 0, 2)
    builder.create_atomic_rmw = checked(builder.create_atomic_rmw, "atomic update", 1, 3)  # a scatter's add


def _check(ptrs, mask, what: str) -> None:
    from triton.runtime.interpreter import _get_np_dtype
    size = np.dtype(_get_np_dtype(ptrs.get_element_ty())).itemsize
    addresses = np.broadcast_to(ptrs.data, np.broadcast_shapes(ptrs.data.shape, mask.data.shape))
    wanted = addresses[np.broadcast_to(mask.data, addresses.shape).astype(bool)].astype(np.int64)
    inside = np.zeros(wanted.shape, dtype=bool)
    for first, end in _extents:
        inside |= (wanted >= first) & (wanted + size <= end)
    if not inside.all():
        bad = wanted[~inside]
        offsets = [min((int(a) - first for first, _ in _extents), key=abs) for a in bad[:3]]
        article = "an" if what[0] in "aeiou" else "a"
        raise OutOfBounds(f"{_running[0]}: {article} {what} reaches outside its tensors at {bad.size} of "
                          f"{wanted.size} active lanes (byte offsets from the nearest tensor: {offsets})")
