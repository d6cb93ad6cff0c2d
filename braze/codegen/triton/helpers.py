"""Triton helper functions that generated kernels call.

Takes: the names of the helpers a kernel uses. Gives: ``helper_source(names)``,
the ``@triton.jit`` text of those helpers and the helpers they call, to be put
in the kernel's module ahead of the kernel (each module stands on its own).

Only Triton builtins are called (no ``tl.sum``, ``tl.zeros_like``, ``tl.cdiv``: those
are ``@triton.jit`` functions created when Triton is imported, which the
interpreter cannot call unless ``TRITON_INTERPRET`` was set before that import).

Numerics follow the C++ prelude (``braze.codegen.cpp.prelude``), which follows
eager PyTorch: Python floor division and modulo, integer division and modulo by
zero give 0 (never trap), ``INT_MIN // -1`` wraps, shifts are defined for every
count, NaN-propagating max/min, argmax/argmin take the first index of the
extreme (NaN is the extreme), Welford partials merge with Chan's formula, and
digamma follows the same series as the C++ one (in float64).
"""
from __future__ import annotations

_HELPERS = {
    # ------------------------------------------------------------ integers
    "py_floordiv_int": ("", '''
@triton.jit
def py_floordiv_int(a, b):
    """Python's a // b on integers; b == 0 gives 0, b == -1 negates (wrapping)."""
    if a.dtype.is_int_signed():
        trivial = (b == 0) | (b == -1)
        d = tl.where(trivial, 1, b)
        q = a // d
        r = a - q * d
        q = tl.where((r != 0) & ((r < 0) != (d < 0)), q - 1, q)
        out = tl.where(b == 0, 0, tl.where(b == -1, 0 - a, q))
    else:
        out = tl.where(b == 0, 0, a // tl.where(b == 0, 1, b))
    return out
'''),
    "c_truncdiv_int": ("", '''
@triton.jit
def c_truncdiv_int(a, b):
    """C's a / b on integers; b == 0 gives 0, b == -1 negates (wrapping)."""
    if a.dtype.is_int_signed():
        trivial = (b == 0) | (b == -1)
        q = a // tl.where(trivial, 1, b)
        out = tl.where(b == 0, 0, tl.where(b == -1, 0 - a, q))
    else:
        out = tl.where(b == 0, 0, a // tl.where(b == 0, 1, b))
    return out
'''),
    "py_mod_int": ("", '''
@triton.jit
def py_mod_int(a, b):
    """Python's a % b on integers (sign of b); b == 0 or -1 gives 0."""
    if a.dtype.is_int_signed():
        trivial = (b == 0) | (b == -1)
        d = tl.where(trivial, 1, b)
        r = a - (a // d) * d
        r = tl.where((r != 0) & ((r < 0) != (d < 0)), r + d, r)
        out = tl.where(trivial, 0, r)
    else:
        d = tl.where(b == 0, 1, b)
        out = tl.where(b == 0, 0, a - (a // d) * d)
    return out
'''),
    "c_fmod_int": ("", '''
@triton.jit
def c_fmod_int(a, b):
    """C's a % b on integers (sign of a); b == 0 or -1 gives 0."""
    if a.dtype.is_int_signed():
        trivial = (b == 0) | (b == -1)
    else:
        trivial = b == 0
    d = tl.where(trivial, 1, b)
    return tl.where(trivial, 0, a - (a // d) * d)
'''),
    "int_pow": ("", '''
@triton.jit
def int_pow(base, exp, BITS: tl.constexpr):
    """base ** exp on integers, wrapping; a negative exponent gives 0 unless |base| == 1."""
    zero = base * 0 + (exp * 0).to(base.dtype)  # the shape of both: the loop keeps its variables' types
    result = zero + 1
    b = base + zero
    if base.dtype.is_int_signed():
        e = tl.where(exp < 0, 0, exp)
    else:
        e = exp
    for _ in range(BITS):
        result = tl.where((e & 1) != 0, result * b, result)
        b = b * b
        e = e >> 1
    if base.dtype.is_int_signed():
        odd = tl.where((exp & 1) != 0, -1, 1)
        negative = tl.where(base == 1, 1, tl.where(base == -1, odd, 0)).to(base.dtype)
        result = tl.where(exp < 0, negative, result)
    return result
'''),
    "shift_left": ("", '''
@triton.jit
def shift_left(a, b, BITS: tl.constexpr):
    """a << b; a count outside [0, BITS) gives 0."""
    inside = (b >= 0) & (b < BITS)
    return tl.where(inside, a << tl.where(inside, b, 0), 0)
'''),
    "shift_right": ("", '''
@triton.jit
def shift_right(a, b, BITS: tl.constexpr):
    """a >> b (arithmetic); a count outside [0, BITS) gives -1 for negative a, else 0."""
    inside = (b >= 0) & (b < BITS)
    shifted = a >> tl.where(inside, b, 0)
    if a.dtype.is_int_signed():
        out = tl.where(inside, shifted, tl.where(a < 0, -1, 0))
    else:
        out = tl.where(inside, shifted, 0)
    return out
'''),
    "index_floordiv": ("", '''
@triton.jit
def index_floordiv(a, b):
    """Floor division of index values (b != 0)."""
    q = a // b
    return tl.where(((a - q * b) != 0) & ((a < 0) != (b < 0)), q - 1, q)
'''),
    "index_mod": ("", '''
@triton.jit
def index_mod(a, b):
    """Floor modulo of index values (b != 0): the result has the sign of b."""
    r = a - (a // b) * b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
'''),
    # ------------------------------------------------------------ floats
    "py_mod_float": ("", '''
@triton.jit
def py_mod_float(a, b):
    """Python's a % b on floats: fmod, moved to the sign of b."""
    m = libdevice.fmod(a, b)
    return tl.where((m != 0) & ((b < 0) != (m < 0)), m + b, m)
'''),
    "true_div": ("", '''
@triton.jit
def true_div(a, b):
    """a / b rounded as IEEE division (float32 '/' is approximate on NVIDIA GPUs)."""
    if a.dtype == tl.float32:
        out = tl.math.div_rn(a, b)
    else:
        out = a / b
    return out
'''),
    "py_floordiv_float": ("true_div", '''
@triton.jit
def py_floordiv_float(a, b):
    """Python's a // b on floats (as eager computes it)."""
    m = libdevice.fmod(a, b)
    d = true_div(a - m, b)
    d = tl.where((m != 0) & ((b < 0) != (m < 0)), d - 1, d)
    f = tl.floor(d)
    f = tl.where(d - f > 0.5, f + 1, f)
    quotient = true_div(a, b)
    f = tl.where(d == 0, libdevice.copysign(tl.full(d.shape, 0.0, d.dtype), quotient), f)
    return tl.where(b == 0, quotient, f)
'''),
    "digamma": ("", '''
@triton.jit
def digamma(value):
    """The digamma function, computed in float64 (reflection, recurrence, series)."""
    x = value.to(tl.float64)
    reflect = x < 0
    frac = x - libdevice.trunc(x)
    shift = tl.where(reflect, 3.141592653589793 / libdevice.tan(3.141592653589793 * frac), 0.0)
    y = tl.where(reflect, 1.0 - x, x)
    result = tl.full(y.shape, 0.0, tl.float64)
    for _ in range(10):
        small = y < 10.0
        result = tl.where(small, result - 1.0 / y, result)
        y = tl.where(small, y + 1.0, y)
    z = 1.0 / (y * y)
    p = 8.33333333333333333333E-2
    p = p * z - 2.10927960927960927961E-2
    p = p * z + 7.57575757575757575758E-3
    p = p * z - 4.16666666666666666667E-3
    p = p * z + 3.96825396825396825397E-3
    p = p * z - 8.33333333333333333333E-3
    p = p * z + 8.33333333333333333333E-2
    series = tl.where(y < 1.0e17, z * p, 0.0)
    out = tl.where(y == 10.0, result + 2.25175258906672110764, result + libdevice.log(y) - 0.5 / y - series)
    out = out - shift
    out = tl.where(reflect & (x == libdevice.trunc(x)), float("nan"), out)
    # -inf at +0.0, +inf at -0.0 (0.0 - y, not -x: Triton's -x is 0 - x, +0.0 for 0.0)
    out = tl.where(x == 0, 0.0 - libdevice.copysign(tl.full(x.shape, float("inf"), tl.float64), x), out)
    return out.to(value.dtype)
'''),
    "fmax": ("", '''
@triton.jit
def fmax(a, b):
    """C's fmax: the larger of a and b, ignoring a NaN (NaN only if both are)."""
    return tl.where(a != a, b, tl.where(b != b, a, tl.maximum(a, b)))
'''),
    "fmin": ("", '''
@triton.jit
def fmin(a, b):
    """C's fmin: the smaller of a and b, ignoring a NaN (NaN only if both are)."""
    return tl.where(a != a, b, tl.where(b != b, a, tl.minimum(a, b)))
'''),
    "negate": ("", '''
@triton.jit
def negate(x):
    """-x on floats by flipping the sign bit, as eager negates: Triton's -x is 0 - x,
    which gives +0.0 for 0.0 and leaves the sign of NaN."""
    if x.dtype == tl.float64:
        out = (x.to(tl.int64, bitcast=True) ^ -9223372036854775808).to(tl.float64, bitcast=True)
    elif x.dtype == tl.float32:
        out = (x.to(tl.int32, bitcast=True) ^ -2147483648).to(tl.float32, bitcast=True)
    else:
        out = (x.to(tl.int16, bitcast=True) ^ tl.full([], -32768, tl.int16)).to(x.dtype, bitcast=True)
    return out
'''),
    "exp2_normal": ("", '''
@triton.jit
def exp2_normal(x):
    """2**x in float32 where the result is a normal float (erf_plus_one's -27 < x <= 0): one
    ``ex2.approx.ftz.f32``, as Triton's exp2 is when libdevice flushes subnormals; without the
    flush (``config.libdevice_ftz`` off) exp2 takes extra instructions to keep subnormal results,
    which a GELU row kernel pays for in time."""
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                     is_pure=True, pack=1)
'''),
    "erf_plus_one": ("exp2_normal", '''
@triton.jit
def erf_plus_one(z):
    """1 + erf(z) in float32 (GELU's 0.5 * x * (1 + erf(x / sqrt(2))) and its derivative): erfc(|z|) as
    2**p(|z|), p of degree 9 fitted by tools/fit_erf_plus_one.py; 1 + erf(z) is 2 - erfc(z) for z >= 0 and
    erfc(-z) below. One path, no branches: about 16 instructions where libdevice's erf takes 34. Largest
    absolute error over float32 (exp2 rounded): 1.2e-7 for z >= 0, 6.2e-8 below (float32 1 + erf(z): 9.2e-8,
    4.6e-8); beyond |z| = 3.92, 2 and 0, as float32 rounds them."""
    t = tl.minimum(tl.abs(z), 3.92)
    p = tl.fma(t, 1.1604773135331925e-05, -0.00015296402852982283)
    p = tl.fma(p, t, 0.0008482331759296358)
    p = tl.fma(p, t, -0.0022747833281755447)
    p = tl.fma(p, t, 8.480287942802534e-05)
    p = tl.fma(p, t, 0.027724478393793106)
    p = tl.fma(p, t, -0.1483079046010971)
    p = tl.fma(p, t, -0.9184429049491882)
    p = tl.fma(p, t, -1.6279072761535645)
    erfc = tl.where(tl.abs(z) >= 3.92, 0.0, exp2_normal(p * t))
    out = tl.where(z < 0, erfc, 2.0 - erfc)
    return tl.where(z != z, z, out)
'''),
    "nextafter_16": ("", '''
@triton.jit
def nextafter_16(a, b):
    """C's nextafter on a 16-bit float (bfloat16, float16): one step of the bit pattern
    from a toward b, as c10's BFloat16 and Half do (libdevice has float32 and float64
    only). Equal values give a, two zeros give b, NaN gives NaN."""
    ia = a.to(tl.int16, bitcast=True).to(tl.int32)
    ib = b.to(tl.int16, bitcast=True).to(tl.int32)
    abs_a = ia & 0x7FFF
    abs_b = ib & 0x7FFF
    down = (abs_a > abs_b) | ((ia < 0) != (ib < 0))
    step = tl.where(abs_a == 0, (ib & -32768) | 1, tl.where(down, ia - 1, ia + 1))
    out = tl.where(ia == ib, a, step.to(tl.int16).to(a.dtype, bitcast=True))
    out = tl.where((abs_a == 0) & (abs_b == 0), b, out)
    wide_a = a.to(tl.float32)
    wide_b = b.to(tl.float32)
    return tl.where((wide_a != wide_a) | (wide_b != wide_b), (wide_a + wide_b).to(a.dtype), out)
'''),
    # ------------------------------------------------------------ reductions
    "maximum_nan": ("", '''
@triton.jit
def maximum_nan(a, b):
    """max(a, b); NaN if either is NaN."""
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
'''),
    "minimum_nan": ("", '''
@triton.jit
def minimum_nan(a, b):
    """min(a, b); NaN if either is NaN."""
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
'''),
    "add": ("", '''
@triton.jit
def add(a, b):
    return a + b
'''),
    "add2": ("", '''
@triton.jit
def add2(a0, a1, b0, b1):
    """Two sums folded by one tree (``rows.tree_sums``)."""
    return a0 + b0, a1 + b1
'''),
    "add3": ("", '''
@triton.jit
def add3(a0, a1, a2, b0, b1, b2):
    """Three sums folded by one tree (``rows.tree_sums``)."""
    return a0 + b0, a1 + b1, a2 + b2
'''),
    "multiply": ("", '''
@triton.jit
def multiply(a, b):
    return a * b
'''),
    "logical_or": ("", '''
@triton.jit
def logical_or(a, b):
    return a | b
'''),
    "logical_and": ("", '''
@triton.jit
def logical_and(a, b):
    return a & b
'''),
    "argmax_combine": ("", '''
@triton.jit
def argmax_combine(a, a_index, b, b_index):
    """The larger of two (value, index) pairs; NaN is largest; ties take the first index."""
    a_nan = a != a
    b_nan = b != b
    first = b_index < a_index
    take = tl.where(a_nan, b_nan & first, b_nan | (b > a) | ((b == a) & first))
    return tl.where(take, b, a), tl.where(take, b_index, a_index)
'''),
    "argmin_combine": ("", '''
@triton.jit
def argmin_combine(a, a_index, b, b_index):
    """The smaller of two (value, index) pairs; NaN is smallest; ties take the first index."""
    a_nan = a != a
    b_nan = b != b
    first = b_index < a_index
    take = tl.where(a_nan, b_nan & first, b_nan | (b < a) | ((b == a) & first))
    return tl.where(take, b, a), tl.where(take, b_index, a_index)
'''),
    "online_sum_exp": ("", '''
@triton.jit
def online_sum_exp(ref, total, x):
    """Adds exp(x - ref) to a lane's total, first moving ref up to x where x is larger
    (the total then rescaled by exp(old ref - x), plus x's own term). One exp per element:
    exp(old ref - x) when ref grows, else exp(x - ref). x's own term is (x - x) + 1: 1, or
    NaN for +inf, as eager's exp(x - max) gives for that row. NaN never moves ref: it
    reaches the total through exp(NaN - ref). While ref is -inf (only -inf seen) the
    terms are exp(x - 0): 0, or NaN for NaN."""
    grow = x > ref
    shift = tl.where(ref == float("-inf"), 0.0, ref)
    e = libdevice.exp(tl.where(grow, ref - x, x - shift)).to(total.dtype)
    own = ((x - x) + 1.0).to(total.dtype)
    return tl.where(grow, x, ref), tl.where(grow, total * e + own, total + e)
'''),
    "online_sum_total": ("", '''
@triton.jit
def online_sum_total(ref, total, largest):
    """A lane's total as a sum of exp(x - largest) (largest: the row's max, >= ref), with
    the exp in the total's dtype. A lane that saw only -inf (ref -inf, total 0) gives 0,
    or NaN when the whole row is -inf (eager's exp(-inf - -inf)); a NaN max gives NaN."""
    return total * libdevice.exp(ref.to(total.dtype) - largest.to(total.dtype))
'''),
    "welford_combine": ("true_div", '''
@triton.jit
def welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    """Chan's formula: the (mean, m2, count) of two partials together."""
    n = n_a + n_b
    delta = mean_b - mean_a
    f = true_div(n_b, tl.where(n == 0, 1.0, n))
    return mean_a + delta * f, m2_a + m2_b + delta * delta * n_a * f, n
'''),
    "welford_step": ("true_div", '''
@triton.jit
def welford_step(mean, m2, weight, x, w, step):
    """Welford's update of a loop's lanes by x (w: 1, or 0 for a lane past the row). A lane
    leaves the row only at its end, so each lane still in it has folded ``step`` elements
    before x: the weights 1 / n and (n - 1) / n are scalars, one division per step instead
    of one per lane (``welford_combine`` with n_b = w)."""
    one = tl.full([], 1.0, mean.dtype)
    n = one * (step + 1)
    f = true_div(one, n)
    delta = (x - mean) * w
    return mean + delta * f, m2 + delta * delta * ((n - 1.0) * f), weight + w
'''),
    # ------------------------------------------------------------ random numbers
    "philox_words": ("", '''
@triton.jit
def philox_words(seed, counter):
    """Philox4x32-10 of counter (counter low, counter high, 0, 0) under key (seed low, seed
    high): its four words, as Triton's tl.randint4x (the C++ prelude's b_philox_pair: the same bits)."""
    seed = seed.to(tl.uint64)
    k0 = (seed & 0xFFFFFFFF).to(tl.uint32)
    k1 = (seed >> 32).to(tl.uint32)
    c0 = counter.to(tl.uint32)
    c1 = (counter >> 32).to(tl.uint32)
    c2 = c0 * 0
    c3 = c2
    for _ in tl.static_range(10):
        a0 = c0
        a2 = c2
        c0 = tl.umulhi(0xCD9E8D57, a2) ^ c1 ^ k0
        c2 = tl.umulhi(0xD2511F53, a0) ^ c3 ^ k1
        c1 = a2 * 0xCD9E8D57
        c3 = a0 * 0xD2511F53
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    return c0, c1, c2, c3
'''),
    "uniform_of_word": ("", '''
@triton.jit
def uniform_of_word(w):
    """A random word to [0, 1) as Triton's uint_to_uniform_float: as int32, negatives folded."""
    x = w.to(tl.int32, bitcast=True)
    x = tl.where(x < 0, ~x, x)
    return x.to(tl.float32) * 4.6566127342e-10
'''),
    "philox_word": ("philox_words", '''
@triton.jit
def philox_word(seed, offset):
    """Word offset % 4 of counter offset // 4. Where a thread holds four aligned neighbouring
    offsets, the compiler sees one counter and computes one Philox."""
    c0, c1, c2, c3 = philox_words(seed, offset >> 2)
    j = offset & 3
    return tl.where(j < 2, tl.where(j == 0, c0, c1), tl.where(j == 2, c2, c3))
'''),
    "philox_rand": ("philox_word uniform_of_word", '''
@triton.jit
def philox_rand(seed, offset):
    """Uniform in [0, 1): the word of ``offset`` (``philox_word``)."""
    return uniform_of_word(philox_word(seed, offset))
'''),
    "philox_bits": ("philox_word", '''
@triton.jit
def philox_bits(seed, offset):
    """The word of ``offset`` (``philox_word``) as an int64 in [0, 2^32)."""
    return philox_word(seed, offset).to(tl.uint64).to(tl.int64, bitcast=True)
'''),
    "philox_randn": ("philox_words uniform_of_word", '''
@triton.jit
def philox_randn(seed, offset):
    """Standard normal: Box-Muller on the pair of words offset % 2 of counter offset // 2."""
    c0, c1, c2, c3 = philox_words(seed, offset >> 1)
    odd = (offset & 1) != 0
    u1 = tl.maximum(uniform_of_word(tl.where(odd, c2, c0)), 1.0e-7)
    th = uniform_of_word(tl.where(odd, c3, c1)) * 6.283185307179586
    return tl.sqrt(-2.0 * tl.log(u1)) * tl.cos(th)
'''),
}

HEADER = '''import triton
import triton.language as tl
from triton.language.extra import libdevice
'''


def helper_source(names) -> str:
    """The text of the helpers ``names`` and those they call (sorted, so equal sets
    give equal text)."""
    wanted: set = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(d for d in _HELPERS[name][0].split() if d)
    return "".join(_HELPERS[name][1] for name in sorted(wanted))


def is_helper(name: str) -> bool:
    return name in _HELPERS
