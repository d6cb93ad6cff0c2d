"""The C++ text every generated translation unit starts with.

Takes: the kernels' source. Gives: ``prelude(source)``, helper functions whose numerics follow
eager PyTorch: NaN-propagating max/min, Python-style floor division and modulo,
integer division that never traps (a zero divisor gives 0), the run-time checks' report, shifts defined for
every count, bf16 rounding to nearest even, and ``omp declare simd`` lines that
let GCC call glibc's vector math (libmvec) inside SIMD loops, and an exact
vector fmod of floats (AVX2 and AVX-512), the non-temporal stores of ``streams`` and the
float16 block conversions of ``halves`` (F16C where the build has it) in the translation
units that call them.
"""

_TEMPLATE = r"""
#include <stdint.h>
// glibc's C <math.h>, not libstdc++'s wrapper around <cmath>: its templates cost more parsing
// in every translation unit than a small graph's kernels themselves. Generated code
// names each function's float or double variant itself; f_floordiv<float> below calls the
// double floor and copysign, which are exact.
#define _GLIBCXX_INCLUDE_NEXT_C_HEADERS
#include <math.h>
#undef _GLIBCXX_INCLUDE_NEXT_C_HEADERS
#include <omp.h>

#define BRAZE_INLINE static inline __attribute__((always_inline))

{VECTOR_MATH}
typedef uint16_t bf16_t;
typedef uint16_t f16_t;

BRAZE_INLINE float bf16_to_f32(bf16_t x) { return __builtin_bit_cast(float, (uint32_t)x << 16); }
BRAZE_INLINE bf16_t f32_to_bf16(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return (bf16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// IEEE half in integer and float arithmetic only, so that GCC vectorizes the conversions at any
// vector width (it converts _Float16 one element at a time, with or without F16C). Neither
// direction reads a float denormal, so both hold under flush-to-zero and denormals-are-zero.
BRAZE_INLINE float f16_to_f32(f16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu;
  // normal, inf and NaN: exponent rebiased by 112 (by 224 more for inf and NaN, to 255)
  const uint32_t wide = (em << 13) + (em >= 0x7c00u ? 0x70000000u : 0x38000000u);
  // subnormal: 0.5 + em * 2^-24 has em as its mantissa; subtracting 0.5 leaves em * 2^-24 exactly
  const float subnormal = __builtin_bit_cast(float, 0x3f000000u | em) - 0.5f;
  const uint32_t magnitude = em < 0x400u ? __builtin_bit_cast(uint32_t, subnormal) : wide;
  return __builtin_bit_cast(float, magnitude | sign);
}
BRAZE_INLINE f16_t f32_to_f16(float x) {
  const uint32_t bits = __builtin_bit_cast(uint32_t, x), sign = (bits >> 16) & 0x8000u;
  const uint32_t f = bits & 0x7fffffffu;
  // below 2^-14: adding 0.5 rounds |x| to a multiple of 2^-24 (nearest even), the half subnormal
  const uint32_t tiny = __builtin_bit_cast(uint32_t, __builtin_bit_cast(float, f) + 0.5f) - 0x3f000000u;
  // normal: rebias 127 to 15 and round the 13 dropped bits to nearest even
  const uint32_t normal = (f + 0xc8000fffu + ((f >> 13) & 1u)) >> 13;
  const uint32_t large = 0x7c00u | ((uint32_t)(f > 0x7f800000u) << 9);  // inf, or NaN (0x7e00, as eager's)
  // chosen by masks: GCC 12 vectorizes no loop whose selects it narrows to 16 bits
  const uint32_t is_large = 0u - (uint32_t)(f >= 0x47800000u), is_tiny = 0u - (uint32_t)(f < 0x38800000u);
  const uint32_t h = (large & is_large) | (tiny & is_tiny) | (normal & ~(is_large | is_tiny));
  return (f16_t)(h | sign);
}
// A float rounded to the nearest float16 value (ties to even), kept as a float: what
// f16_to_f32(f32_to_f16(x)) gives, bit for bit but in NaN payloads (checked for every float), in
// float arithmetic. Adding c = 2^13 times x's binade (at least 2^-14's: half subnormals; at most
// 2^15's) leaves x's 11 leading bits; taking c away again is exact. Beyond the largest half: inf.
BRAZE_INLINE float round_to_f16(float x) {
  const uint32_t bits = __builtin_bit_cast(uint32_t, x), sign = bits & 0x80000000u, magnitude = bits ^ sign;
  uint32_t binade = magnitude & 0x7f800000u;
  binade = binade < 0x38800000u ? 0x38800000u : binade;
  binade = binade > 0x47000000u ? 0x47000000u : binade;
  const float c = __builtin_bit_cast(float, binade + (13u << 23));
  float r = (__builtin_bit_cast(float, magnitude) + c) - c;
  r = r > 65504.0f ? __builtin_inff() : r;
  return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, r) | sign);
}
// bf16_to_f32(f32_to_bf16(x)) without the 16-bit value between (vectorized loops widen and
// narrow it)
BRAZE_INLINE float round_to_bf16(float f) {
  const uint32_t u = __builtin_bit_cast(uint32_t, f), r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  return __builtin_bit_cast(float, (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : r);
}

// NaN-propagating: a NaN ``a`` is kept; a NaN ``b`` fails the comparison and is taken (one test of
// ``b`` fewer than testing it for NaN, in every max loop of a softmax). The comparison's select
// first, then the NaN one: written as one nested select, GCC 12 vectorizes no loop that chains
// several into one accumulator (a column max over a few rows ran 35x slower)
template <typename T> BRAZE_INLINE T b_max(T a, T b) { const T m = a > b ? a : b; return (a != a) ? a : m; }
template <typename T> BRAZE_INLINE T b_min(T a, T b) { const T m = a < b ? a : b; return (a != a) ? a : m; }
// GCC 13 and later: for float the NaN select is a 32-bit mask, selected from the test and
// applied bitwise. GCC 13.3 left column max loops scalar with the select form (a column max over
// fp16 rows 15x slower, over a channels-last float32 tensor 3.2x), while GCC 12.2 runs the select
// form as fast or faster (the channels-last one 1.6x) and leaves a bf16 column max over a long
// middle axis scalar when the mask is made by arithmetic on the test ("control flow in loop").
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 13
BRAZE_INLINE float b_keep_nan(float a, float m) {
  const int32_t keep = (a != a) ? -1 : 0;
  return __builtin_bit_cast(float, (__builtin_bit_cast(int32_t, a) & keep) | (__builtin_bit_cast(int32_t, m) & ~keep));
}
BRAZE_INLINE float b_max(float a, float b) { return b_keep_nan(a, a > b ? a : b); }
BRAZE_INLINE float b_min(float a, float b) { return b_keep_nan(a, a < b ? a : b); }
#endif
// fmax/fmin: a NaN operand loses to a number. As selects, so GCC vectorizes them (libm's
// fmaxf and fminf are calls, which leave a clamp's loop scalar)
template <typename T> BRAZE_INLINE T b_fmax(T a, T b) { return (b != b || a > b) ? a : b; }
template <typename T> BRAZE_INLINE T b_fmin(T a, T b) { return (b != b || a < b) ? a : b; }
template <typename T> BRAZE_INLINE T i_max(T a, T b) { return a > b ? a : b; }
template <typename T> BRAZE_INLINE T i_min(T a, T b) { return a < b ? a : b; }
template <typename T> BRAZE_INLINE T b_sign(T a) { return (T)((T(0) < a) - (a < T(0))); }
template <typename T> BRAZE_INLINE T i_sign(T a) { return (T)((T(0) < a) - (a < T(0))); }
template <typename T> BRAZE_INLINE T b_sigmoid(T a) { return T(1) / (T(1) + exp(-a)); }
BRAZE_INLINE float b_sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

template <typename T> BRAZE_INLINE T i_floordiv(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return (T)(0 - a);
  T q = a / b;
  return ((a % b != 0) && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;
}
template <typename T> BRAZE_INLINE T i_truncdiv(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return (T)(0 - a);
  return a / b;
}
template <typename T> BRAZE_INLINE T i_mod(T a, T b) {
  if (b == 0 || b == -1) return 0;
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}
template <typename T> BRAZE_INLINE T i_fmod(T a, T b) {
  if (b == 0 || b == -1) return 0;
  return a % b;
}
// fmod of floats without glibc's fmodf (a slow bit loop per call): when |a / b| < 2^28 the
// double quotient truncates to the true one (its error is below 2^-25, and a quotient that is
// not an integer is at least 2^-24 from one), q * b is exact in double (28 + 24 bits), so
// a - q * b is the exact remainder. Huge quotients, zero and non-finite operands take fmodf.
extern "C" float b_libm_fmodf(float, float) __asm__("fmodf");
BRAZE_INLINE float b_fmodf_exact(float a, float b) {
  const double q = trunc((double)a / (double)b);
  if (fabs(q) < 268435456.0 && fabsf(b) < INFINITY) return copysignf((float)((double)a - q * (double)b), a);
  return b_libm_fmodf(a, b);
}
{FLOAT_FMOD}BRAZE_INLINE float b_fmod(float a, float b) { return b_fmodf(a, b); }
BRAZE_INLINE double b_fmod(double a, double b) { return fmod(a, b); }
// Python-style modulo and floor division as selects, not branches, so that loops calling
// them vectorize
template <typename T> BRAZE_INLINE T f_mod(T a, T b) {
  const T m = b_fmod(a, b);
  return ((m != 0) & ((b < 0) != (m < 0))) ? m + b : m;
}
template <typename T> BRAZE_INLINE T f_floordiv(T a, T b) {
  const T m = b_fmod(a, b), q = a / b;
  T d = (a - m) / b;
  d = ((m != 0) & ((b < 0) != (m < 0))) ? d - 1 : d;
  T f = floor(d);
  f = (d - f > T(0.5)) ? f + 1 : f;
  return b == 0 ? q : (d == 0 ? (T)copysign(T(0), q) : f);
}
template <typename T> BRAZE_INLINE T i_pow(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp & 1) ? -1 : 1;
    return 0;
  }
  T result = 1;
  while (exp) { if (exp & 1) result = (T)(result * base); exp >>= 1; base = (T)(base * base); }
  return result;
}
template <typename T> BRAZE_INLINE T i_shl(T a, T b) {
  typedef __typeof__(+a) W;
  if (b < 0 || b >= (T)(sizeof(T) * 8)) return 0;
  return (T)((W)a << (int)b);
}
template <typename T> BRAZE_INLINE T i_shr(T a, T b) {
  if (b < 0 || b >= (T)(sizeof(T) * 8)) return (T)(a < 0 ? -1 : 0);
  return (T)(a >> (int)b);
}
BRAZE_INLINE int64_t idx_floordiv(int64_t a, int64_t b) { int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
BRAZE_INLINE int64_t idx_mod(int64_t a, int64_t b) { int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
BRAZE_INLINE int64_t idx_clamp(int64_t a, int64_t hi) { return a < 0 ? 0 : (a > hi ? hi : a); }
// Run-time checks (IR op CHECK): the first failure to arrive records its site + 1 and the
// offending value in the error record, which the wrapper reads after the call; the code
// goes on with a harmless value (index 0; the divisor itself: a zero one gives 0).
__attribute__((noinline, cold)) static void b_report(int64_t* record, int64_t site, int64_t value) {
  int64_t none = 0;
  if (__atomic_compare_exchange_n(record, &none, site + 1, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    record[1] = value;
}
// An index in [lo, size), lo being -size (negatives wrap) or 0.
BRAZE_INLINE int64_t b_check_index(int64_t i, int64_t lo, int64_t size, int64_t site, int64_t* record) {
  if (__builtin_expect(i >= lo && i < size, 1)) return i < 0 ? i + size : i;
  b_report(record, site, i);
  return 0;
}
template <typename T> BRAZE_INLINE T b_check_divisor(T b, int64_t site, int64_t* record) {
  if (__builtin_expect(b == 0, 0)) b_report(record, site, 0);
  return b;
}

static double b_erfinv(double y) {
  if (y <= -1.0) return y == -1.0 ? -INFINITY : NAN;
  if (y >= 1.0) return y == 1.0 ? INFINITY : NAN;
  static const double a[4] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};
  static const double b[4] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};
  static const double c[4] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};
  static const double d[2] = {3.543889200, 1.637067800};
  double x, z, num, den;
  double y_abs = fabs(y);
  if (y_abs <= 0.7) {
    z = y * y;
    num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];
    den = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0;
    x = y * num / den;
  } else {
    z = sqrt(-log((1.0 - y_abs) / 2.0));
    num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];
    den = (d[1] * z + d[0]) * z + 1.0;
    x = copysign(num, y) / den;
  }
  x = x - (erf(x) - y) / ((2.0 / sqrt(M_PI)) * exp(-x * x));
  x = x - (erf(x) - y) / ((2.0 / sqrt(M_PI)) * exp(-x * x));
  return x;
}
static double b_digamma(double x) {
  if (x == 0) return copysign(INFINITY, -x);
  if (x < 0) {
    if (x == trunc(x)) return NAN;
    double whole;
    double r = modf(x, &whole);
    return b_digamma(1 - x) - M_PI / tan(M_PI * r);
  }
  double result = 0;
  while (x < 10) { result -= 1 / x; x += 1; }
  if (x == 10) return result + 2.25175258906672110764;
  static const double A[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
                             -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
                             8.33333333333333333333E-2};
  double y = 0;
  if (x < 1.0e17) {
    double z = 1.0 / (x * x);
    double p = 0;
    for (int i = 0; i < 7; i++) p = p * z + A[i];
    y = z * p;
  }
  return result + log(x) - (0.5 / x) - y;
}
BRAZE_INLINE double b_lgamma(double x) { int s; return lgamma_r(x, &s); }
BRAZE_INLINE float b_lgamma(float x) { int s; return lgammaf_r(x, &s); }

// Philox4x32-10 as Triton's tl.randint4x: counter (counter low, counter high, 0, 0), key
// (seed low, seed high); the same bits as the Triton kernels draw. b_philox_nine runs the
// first nine rounds (a struct of scalars: arrays would be memory to GCC, whose stores to
// them in an omp simd loop it does not vectorize); the tenth gives words 0 and 1 out of its
// product by 0xCD9E8D57 and words 2 and 3 out of its product by 0xD2511F53.
struct b_philox_state { uint32_t c0, c1, c2, c3, k0, k1; };
BRAZE_INLINE b_philox_state b_philox_nine(int64_t seed, int64_t counter) {
  b_philox_state s = {(uint32_t)counter, (uint32_t)((uint64_t)counter >> 32), 0, 0,
                      (uint32_t)seed, (uint32_t)((uint64_t)seed >> 32)};
  for (int r = 0; r < 9; r++) {
    const uint32_t a0 = s.c0, a2 = s.c2;
    s.c0 = (uint32_t)(((uint64_t)0xCD9E8D57u * a2) >> 32) ^ s.c1 ^ s.k0;
    s.c2 = (uint32_t)(((uint64_t)0xD2511F53u * a0) >> 32) ^ s.c3 ^ s.k1;
    s.c1 = 0xCD9E8D57u * a2;
    s.c3 = 0xD2511F53u * a0;
    s.k0 += 0x9E3779B9u;
    s.k1 += 0xBB67AE85u;
  }
  return s;
}
// One element's pair of words (pair 0: words 0, 1; pair 1: words 2, 3): the last round
// multiplies only the operands of that pair.
BRAZE_INLINE void b_philox_pair(int64_t seed, int64_t counter, uint32_t pair,
                                uint32_t* first, uint32_t* second) {
  const b_philox_state s = b_philox_nine(seed, counter);
  // selects by masks: a branch here is control flow to GCC, which then vectorizes nothing
  const uint32_t low = pair - 1u;  // all ones for pair 0 (words 0, 1), zero for pair 1
  const uint32_t factor = (0xCD9E8D57u & low) | (0xD2511F53u & ~low), operand = (s.c2 & low) | (s.c0 & ~low);
  const uint64_t p = (uint64_t)factor * operand;
  *first = (uint32_t)(p >> 32) ^ (((s.c1 ^ s.k0) & low) | ((s.c3 ^ s.k1) & ~low));
  *second = (uint32_t)p;
}
// The four words of each of N counters from ``counter`` on, in order (a block of lanes
// draws its elements' words here, one Philox per counter: draws.py).
template <int N>
BRAZE_INLINE void b_philox_block(int64_t seed, int64_t counter, uint32_t* words) {
  #pragma omp simd
  for (int j = 0; j < N; j++) {
    const b_philox_state s = b_philox_nine(seed, counter + j);
    const uint64_t p0 = (uint64_t)0xCD9E8D57u * s.c2, p1 = (uint64_t)0xD2511F53u * s.c0;
    words[4 * j] = (uint32_t)(p0 >> 32) ^ s.c1 ^ s.k0;
    words[4 * j + 1] = (uint32_t)p0;
    words[4 * j + 2] = (uint32_t)(p1 >> 32) ^ s.c3 ^ s.k1;
    words[4 * j + 3] = (uint32_t)p1;
  }
}
// A word to [0, 1) as Triton's uint_to_uniform_float: as int32, negatives folded to -x - 1
// (x ^ (x >> 31), not a select, for the same reason)
BRAZE_INLINE float b_uniform(uint32_t w) {
  const int32_t x = (int32_t)w;
  return (float)(x ^ (x >> 31)) * 4.6566127342e-10f;
}
// Box-Muller on a pair of words, as Triton's tl.randn: u1 = max(uniform, 1e-7) by masks, not
// a select (which GCC leaves as control flow before logf's vector call, so the loop would not
// vectorize)
BRAZE_INLINE float b_box_muller(uint32_t first, uint32_t second) {
  const float u = b_uniform(first), th = 6.283185307179586f * b_uniform(second);
  const uint32_t keep = -(uint32_t)(u > 1.0e-7f);
  const float u1 = __builtin_bit_cast(float, (__builtin_bit_cast(uint32_t, u) & keep)
                                             | (__builtin_bit_cast(uint32_t, 1.0e-7f) & ~keep));
  return sqrtf(-2.0f * logf(u1)) * cosf(th);
}
// Word offset % 4 of counter offset / 4 (ir.expr.random): a uniform, or the word itself.
BRAZE_INLINE uint32_t b_word(int64_t seed, int64_t offset) {
  uint32_t first, second;
  b_philox_pair(seed, offset >> 2, ((uint32_t)offset >> 1) & 1u, &first, &second);
  const uint32_t odd = -((uint32_t)offset & 1u);
  return (first & ~odd) | (second & odd);
}
BRAZE_INLINE float b_rand(int64_t seed, int64_t offset) { return b_uniform(b_word(seed, offset)); }
BRAZE_INLINE int64_t b_bits(int64_t seed, int64_t offset) { return (int64_t)b_word(seed, offset); }
// The pair of words offset % 2 of counter offset / 2.
BRAZE_INLINE float b_randn(int64_t seed, int64_t offset) {
  uint32_t first, second;
  b_philox_pair(seed, offset >> 1, (uint32_t)offset & 1u, &first, &second);
  return b_box_muller(first, second);
}
"""

_UNARY = ["exp", "log", "sin", "cos", "tan", "exp2", "expm1", "log2", "log10", "log1p", "asin", "acos",
          "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc"]
_BINARY = ["pow", "atan2", "hypot"]
VECTOR_MATH = frozenset(_UNARY + _BINARY)  # the functions GCC may call in libmvec's vector forms


def _vector_math() -> str:
    lines = []
    for name in _UNARY + _BINARY:
        args_f = "float, float" if name in _BINARY else "float"
        args_d = "double, double" if name in _BINARY else "double"
        lines += ["#pragma omp declare simd notinbranch", f'extern "C" float {name}f({args_f});',
                  "#pragma omp declare simd notinbranch", f'extern "C" double {name}({args_d});']
    return "\n".join(lines)


_SCALAR_FMOD = "BRAZE_INLINE float b_fmodf(float a, float b) { return b_fmodf_exact(a, b); }\n"
_VECTOR_FMOD = r"""#if defined(__AVX2__) && defined(__FMA__) && !defined(__clang__)
// 8 lanes at a time. GCC vectorizes a loop only if its calls are to builtins with vector
// variants, so fmodf (a builtin) is declared with one and renamed: SIMD loops call
// `_ZGVdN8vv_b_fmodf_scalar` below (the x86 vector ABI's name for 8 lanes of AVX2), scalar
// code `b_fmodf_scalar`; glibc's fmodf stays reachable as b_libm_fmodf.
#pragma omp declare simd notinbranch simdlen(8)
extern "C" float fmodf(float, float) __asm__("b_fmodf_scalar");
extern "C" __attribute__((visibility("hidden"))) float b_fmodf_scalar(float a, float b) { return b_fmodf_exact(a, b); }
typedef float b_v8f __attribute__((vector_size(32)));
typedef int b_v8i __attribute__((vector_size(32)));
// In float: below 2^23 the rounded quotient truncates to the true one or one past it (never
// short of it), and a - t * b in one fused step is exact; one past leaves a remainder of the
// wrong sign, and adding |b| with a's sign corrects it, exactly. Larger quotients, zero or
// non-finite b take b_fmodf_exact (160M random pairs bit for bit against glibc's fmodf).
extern "C" __attribute__((visibility("hidden"))) b_v8f _ZGVdN8vv_b_fmodf_scalar(b_v8f a, b_v8f b) {
  const b_v8i sign = (b_v8i)a & (int)0x80000000, magnitude_b = (b_v8i)b & 0x7fffffff;
  const b_v8f q = a / b;
  const b_v8i covered = (((b_v8i)q & 0x7fffffff) < 0x4b000000) & (magnitude_b < 0x7f800000);
  const b_v8f whole = __builtin_convertvector(__builtin_convertvector(q, b_v8i), b_v8f);
  b_v8f r = __builtin_ia32_vfmaddps256(-whole, b, a);
  const b_v8i past = (((b_v8i)r ^ sign) < 0) & (((b_v8i)r & 0x7fffffff) != 0);
  r = past ? r + (b_v8f)(magnitude_b | sign) : r;
  r = (b_v8f)(((b_v8i)r & 0x7fffffff) | sign);
  const int uncovered = __builtin_ia32_movmskps256((b_v8f)~covered);
  if (__builtin_expect(uncovered != 0, 0))
    for (int i = 0; i < 8; i++) if (uncovered >> i & 1) r[i] = b_fmodf_exact(a[i], b[i]);
  return r;
}
#if defined(__AVX512F__)
// With AVX-512 GCC calls the 'e' variant (8 floats are still one 256-bit register in that ABI):
// the same function under that name. Only the variant of the best ISA enabled is ever called.
extern "C" __attribute__((visibility("hidden"), alias("_ZGVdN8vv_b_fmodf_scalar")))
b_v8f _ZGVeN8vv_b_fmodf_scalar(b_v8f a, b_v8f b);
#endif
BRAZE_INLINE float b_fmodf(float a, float b) { return fmodf(a, b); }
#else
""" + _SCALAR_FMOD + "#endif\n"
_STREAM = r"""
// Non-temporal stores (codegen/cpp/streams.py): the 32-byte-aligned chunks of a block go
// around the cache, without the read of each line a plain store makes first; the unaligned
// head and tail are copied. b_stream_fence orders a thread's streamed stores before the
// loop's barrier.
#if defined(__AVX__)
typedef long long b_v4q __attribute__((vector_size(32)));
typedef long long b_v4q_u __attribute__((vector_size(32), aligned(1)));
BRAZE_INLINE void b_stream(void* dst, const void* src, int64_t bytes) {
  char* d = (char*)dst;
  const char* s = (const char*)src;
  int64_t k = (int64_t)(-(uintptr_t)d & 31);
  k = k < bytes ? k : bytes;
  if (k) __builtin_memcpy(d, s, k);
  for (; k + 32 <= bytes; k += 32) __builtin_ia32_movntdq256((b_v4q*)(d + k), *(const b_v4q_u*)(s + k));
  if (k < bytes) __builtin_memcpy(d + k, s + k, bytes - k);
}
BRAZE_INLINE void b_stream_fence() { __builtin_ia32_sfence(); }
#else
BRAZE_INLINE void b_stream(void* dst, const void* src, int64_t bytes) { __builtin_memcpy(dst, src, bytes); }
BRAZE_INLINE void b_stream_fence() {}
#endif
"""
_HALF_BLOCKS = r"""
// n float16 values widened into floats, n floats narrowed into float16, and n floats rounded
// through float16 (codegen/cpp/halves.py): 16 at a time by AVX-512's and 8 at a time by F16C's
// vcvtph2ps / vcvtps2ph where the build has them (GCC 12 turns no loop of conversions into
// them), the rest and builds without F16C by f16_to_f32 and f32_to_f16. All ways are exact
// and agree bit for bit but in NaN payloads (eager's own differ by position); the
// instructions read no MXCSR state here: the immediate 0 rounds to nearest even, and they
// ignore DAZ and FTZ.
#if defined(__F16C__)
typedef short b_h8_u __attribute__((vector_size(16), aligned(2)));
typedef float b_f8_u __attribute__((vector_size(32), aligned(4)));
BRAZE_INLINE b_f8_u b_widen8(const f16_t* src) { return __builtin_ia32_vcvtph2ps256(*(const b_h8_u*)src); }
BRAZE_INLINE b_h8_u b_narrow8(const float* src) { return __builtin_ia32_vcvtps2ph256(*(const b_f8_u*)src, 0); }
#endif
#if defined(__AVX512F__)
typedef short b_h16_u __attribute__((vector_size(32), aligned(2)));
typedef float b_f16_u __attribute__((vector_size(64), aligned(4)));
BRAZE_INLINE b_f16_u b_widen16(b_h16_u h) { return __builtin_ia32_vcvtph2ps512_mask(h, (b_f16_u){}, 0xffff, 4); }
BRAZE_INLINE b_h16_u b_narrow16(const float* src) {
  return __builtin_ia32_vcvtps2ph512_mask(*(const b_f16_u*)src, 0, (b_h16_u){}, 0xffff);
}
#endif
BRAZE_INLINE void b_widen_f16(const f16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) *(b_f16_u*)(dst + i) = b_widen16(*(const b_h16_u*)(src + i));
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) *(b_f8_u*)(dst + i) = b_widen8(src + i);
#endif
  for (; i < n; i++) dst[i] = f16_to_f32(src[i]);
}
BRAZE_INLINE void b_narrow_f16(const float* src, f16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) *(b_h16_u*)(dst + i) = b_narrow16(src + i);
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) *(b_h8_u*)(dst + i) = b_narrow8(src + i);
#endif
  for (; i < n; i++) dst[i] = f32_to_f16(src[i]);
}
// x.half() of a float32 input, read on as float32
BRAZE_INLINE void b_round_f16(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) *(b_f16_u*)(dst + i) = b_widen16(b_narrow16(src + i));
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) *(b_f8_u*)(dst + i) = __builtin_ia32_vcvtph2ps256(b_narrow8(src + i));
#endif
  for (; i < n; i++) dst[i] = f16_to_f32(f32_to_f16(src[i]));
}
"""
_HEAD = _TEMPLATE.replace("{VECTOR_MATH}", _vector_math())
_FLOAT_FMOD_USERS = ("b_fmodf(", "f_mod(", "f_floordiv(")


_TRANSPOSE = r"""
// Tile transposes (codegen/cpp/tiles.py) of 4-byte elements, 8x8 blocks in registers: two
// rounds of interleaves and one of half swaps, as GCC vector shuffles (unpck/shuf/perm2f128
// on AVX, pairs of 128-bit shuffles without it). dst[c][r] = src[r][c] for r < rows, c < cols;
// both arrays are `edge` elements wide.
typedef uint32_t b_v8u __attribute__((vector_size(32)));
typedef int32_t b_v8s __attribute__((vector_size(32)));
typedef uint32_t b_v8u_u __attribute__((vector_size(32), aligned(4)));
BRAZE_INLINE void b_transpose8(const uint32_t* src, int64_t ss, uint32_t* dst, int64_t ds) {
  b_v8u r[8], t[8];
  for (int i = 0; i < 8; i++) r[i] = *(const b_v8u_u*)(src + i * ss);
  for (int i = 0; i < 8; i += 2) {  // pairs of rows interleaved, element by element
    t[i] = __builtin_shuffle(r[i], r[i + 1], (b_v8s){0, 8, 1, 9, 4, 12, 5, 13});
    t[i + 1] = __builtin_shuffle(r[i], r[i + 1], (b_v8s){2, 10, 3, 11, 6, 14, 7, 15});
  }
  for (int i = 0; i < 8; i += 4)  // then by pairs of elements
    for (int j = 0; j < 2; j++) {
      r[i + 2 * j] = __builtin_shuffle(t[i + j], t[i + j + 2], (b_v8s){0, 1, 8, 9, 4, 5, 12, 13});
      r[i + 2 * j + 1] = __builtin_shuffle(t[i + j], t[i + j + 2], (b_v8s){2, 3, 10, 11, 6, 7, 14, 15});
    }
  for (int i = 0; i < 4; i++) {  // then by halves
    *(b_v8u_u*)(dst + i * ds) = __builtin_shuffle(r[i], r[i + 4], (b_v8s){0, 1, 2, 3, 8, 9, 10, 11});
    *(b_v8u_u*)(dst + (i + 4) * ds) = __builtin_shuffle(r[i], r[i + 4], (b_v8s){4, 5, 6, 7, 12, 13, 14, 15});
  }
}
BRAZE_INLINE void b_transpose_tile32(const void* from, void* to, int64_t edge, int64_t rows, int64_t cols) {
  const uint32_t* src = (const uint32_t*)from;
  uint32_t* dst = (uint32_t*)to;
  const int64_t whole_rows = rows & ~7, whole_cols = cols & ~7;
  for (int64_t r = 0; r < whole_rows; r += 8)
    for (int64_t c = 0; c < whole_cols; c += 8) b_transpose8(src + r * edge + c, edge, dst + c * edge + r, edge);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = r < whole_rows ? whole_cols : 0; c < cols; c++) dst[c * edge + r] = src[r * edge + c];
}
"""


def prelude(kernels_source: str) -> str:
    """The prelude for these kernels: the vector float fmod (a noticeable share of a
    build's compile time), streaming stores, float16 blocks and tile transposes only where
    they call them."""
    uses = any(name in kernels_source for name in _FLOAT_FMOD_USERS)
    head = _HEAD.replace("{FLOAT_FMOD}", _VECTOR_FMOD if uses else _SCALAR_FMOD)
    head += _STREAM if "b_stream(" in kernels_source else ""
    head += _HALF_BLOCKS if any(f"b_{way}_f16(" in kernels_source for way in ("widen", "narrow", "round")) else ""
    return head + _TRANSPOSE if "b_transpose_tile32(" in kernels_source else head
