"""Vectorizable scalar math for generated kernels: exp, log, tanh, erf, sin, ... in float32/64.

PyPI's llvmlite has no SVML, so a kernel loop calling `math.exp` or `math.tanh` keeps a
libm call per element and does not vectorize (DESIGN.md, Codegen). The functions here use
only arithmetic, bit casts and selects, are inlined into the caller (`inline="always"`), and
so let LLVM's loop vectorizer turn a fused loop into SIMD code. `FUNCTIONS[(name, dtype)]`
is the table the kernel generator reads.

Accuracy, measured by tests/codegen/test_mathlib.py over dense sweeps: float32 results are
within 4 ulp of a float64 reference; float64 results within 4 ulp
of an np.longdouble reference (vectorized forms) or of numpy's float64 libm (libm forms).
NaN, ±inf, ±0, overflow, underflow and subnormals behave as numpy's ufuncs do.

# Note [Fused multiply-add]
Kernels compile without fast-math flags (Note [No fast-math in pointwise code] in
kernels.py) and so does this module, so inlined into a kernel every operation here rounds
as written: nothing reassociates a Cody-Waite reduction (`k*C1 + k*C2` into `k*(C1 + C2)`),
turns `(y*s1)*s2` into `y*(s1*s2)` (a subnormal result underflowing to 0) or divides by a
reciprocal estimate (rcpps: 1/inf became NaN after its Newton step), as the fast-math flags
kernels once had did. The one licence taken is `_mul_add`: its multiply and add carry
LLVM's "contract" flag, so the backend fuses them into one FMA instruction where the CPU
has one (one rounding instead of two; the accuracy above holds either way). It computes
the Horner steps of the polynomials (`_polynomial`) and the Cody-Waite reductions, whose
exact products it only helps. Measured at 2^18 float32 (AVX-512 host, one thread), a
tanh-GELU kernel took 0.38 ms with these FMAs, 0.47 ms with separate multiplies and adds.

# Note [Clamp NaN away]
Inputs are clamped with comparisons that send NaN to a finite bound (`x if x > lo else lo`
is `lo` for NaN), so no NaN reaches a float-to-int conversion (LLVM poison); the special
values are restored by selects at the end (`... if x == x else x`).
"""

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

_scalar = njit(inline="always", error_model="numpy")
_CONTRACT = ("contract",)  # Note [Fused multiply-add]


def _bitcast(from_type, to_type, llvm_type):
    def typer(typingctx, value):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], llvm_type)

        return to_type(from_type), codegen

    return intrinsic(typer)


_f32_as_i32 = _bitcast(types.float32, types.int32, ir.IntType(32))
_i32_as_f32 = _bitcast(types.int32, types.float32, ir.FloatType())
_f64_as_i64 = _bitcast(types.float64, types.int64, ir.IntType(64))
_i64_as_f64 = _bitcast(types.int64, types.float64, ir.DoubleType())


@intrinsic
def _mul_add(typingctx, a, b, c):
    """a * b + c, one fused multiply-add where the CPU has one (Note [Fused multiply-add])."""
    if not (a == b == c and isinstance(a, types.Float)):
        return None

    def codegen(context, builder, signature, args):
        product = builder.fmul(args[0], args[1], flags=_CONTRACT)
        return builder.fadd(product, args[2], flags=_CONTRACT)

    return a(a, b, c), codegen


@_scalar
def _polynomial(x, coefficients):
    """coefficients[0] x**n + ... + coefficients[n] by Horner's rule in _mul_add steps."""
    p = coefficients[0]
    for c in coefficients[1:]:
        p = _mul_add(p, x, c)
    return p


_F = np.float32
_D = np.float64

# ---------------------------------------------------------------- float32, float32 arithmetic
_F_ZERO, _F_HALF, _F_ONE, _F_TWO = _F(0), _F(0.5), _F(1), _F(2)
_F_INF, _F_NAN = _F(np.inf), _F(np.nan)
_F_EXP_LO, _F_EXP_HI = _F(-104.0), _F(89.0)  # exp rounds to 0 below, to inf above
_F_LOG2E = _F(1.44269504088896341)
_F_LN2_HI, _F_LN2_LO = _F(0.693359375), _F(-2.12194440e-4)  # Cephes expf/logf split
_F_EXP_P = tuple(
    _F(c)
    for c in (
        1.9875691500e-4,
        1.3981999507e-3,
        8.3334519073e-3,
        4.1665795894e-2,
        1.6666665459e-1,
        5.0000001201e-1,
    )
)
_F_LOG_P = tuple(
    _F(c)
    for c in (
        7.0376836292e-2,
        -1.1514610310e-1,
        1.1676998740e-1,
        -1.2420140846e-1,
        1.4249322787e-1,
        -1.6668057665e-1,
        2.0000714765e-1,
        -2.4999993993e-1,
        3.3333331174e-1,
    )
)
_F_TANH_P = tuple(
    _F(c)
    for c in (
        -5.70498872745e-3,
        2.06390887954e-2,
        -5.37397155531e-2,
        1.33314422036e-1,
        -3.33332819422e-1,
    )
)
_F_SQRT_HALF = _F(0.707106781186547524)
_F_MIN_NORMAL, _F_TWO23 = _F(2.0**-126), _F(2.0**23)
_F_TANH_SMALL, _F_IDENTITY = _F(0.625), _F(2.0**-12)


@_scalar
def _scale_f32(y, k):
    """y * 2**k for |k| <= 150, in two exact steps so subnormal results round once."""
    ki = np.int32(k)
    k1 = np.int32(ki >> 1)
    s1 = _i32_as_f32(np.int32((k1 + 127) << 23))
    s2 = _i32_as_f32(np.int32((ki - k1 + 127) << 23))
    return y * s1 * s2


@_scalar
def exp_f32(x):
    """e**x in float32 (vectorized). Cephes expf: Cody-Waite reduction x = k ln2 + r with a
    two-part ln2, exp(r) by a degree-7 polynomial (S. L. Moshier, Cephes Math Library)."""
    xc = x if x > _F_EXP_LO else _F_EXP_LO  # Note [Clamp NaN away]
    xc = xc if xc < _F_EXP_HI else _F_EXP_HI
    k = np.floor(_mul_add(xc, _F_LOG2E, _F_HALF))
    r = _mul_add(k, -_F_LN2_HI, xc)
    r = _mul_add(k, -_F_LN2_LO, r)
    p = _polynomial(r, _F_EXP_P)
    y = _mul_add(p, r * r, r) + _F_ONE
    return _scale_f32(y, k) if x == x else x


@_scalar
def log_f32(x):
    """Natural log in float32 (vectorized). Cephes logf: x = m 2**e with m in
    [sqrt(1/2), sqrt(2)), log(m) = f - f**2/2 + f**3 P(f) with f = m - 1, plus e ln2 split
    in two parts. log(0) = -inf, log(x < 0) = nan, log(inf) = inf."""
    tiny = x < _F_MIN_NORMAL  # subnormals are scaled to normals first
    bits = _f32_as_i32(x * _F_TWO23 if tiny else x)
    e = ((bits >> 23) & 0xFF) - (149 if tiny else 126)
    m = _i32_as_f32(np.int32((bits & 0x007FFFFF) | 0x3F000000))  # [0.5, 1)
    low = m < _F_SQRT_HALF
    fe = _F(e - 1 if low else e)
    f = (m + m if low else m) - _F_ONE
    z = f * f
    p = _polynomial(f, _F_LOG_P)
    y = _mul_add(fe, _F_LN2_LO, p * f * z)
    y = f + (y - _F_HALF * z)
    y = _mul_add(fe, _F_LN2_HI, y)
    y = _F_NAN if x < _F_ZERO else y
    y = -_F_INF if x == _F_ZERO else y
    return y if x < _F_INF else x


@_scalar
def tanh_f32(x):
    """tanh in float32 (vectorized). Cephes tanhf: x + x**3 P(x**2) for |x| < 0.625,
    else 1 - 2 / (exp(2|x|) + 1) with the sign of x."""
    ax = abs(x)
    z = x * x
    small = _mul_add(x * z, _polynomial(z, _F_TANH_P), x)
    small = x if ax < _F_IDENTITY else small  # keeps ±0 and subnormals exact
    big = _F_ONE - _F_TWO / (exp_f32(ax + ax) + _F_ONE)
    return small if ax < _F_TANH_SMALL else math.copysign(big, x)


@_scalar
def sigmoid_f32(x):
    """1 / (1 + e**-x) in float32 (vectorized), that formula as eager (scipy's expit) and
    PyTorch compute it: below x = -88.7, e**-x overflows and the result is 0, not the
    subnormal e**x / (1 + e**x) would give."""
    return _F_ONE / (_F_ONE + exp_f32(-x))


@_scalar
def sqrt_f32(x):
    """sqrt in float32: LLVM's sqrt intrinsic (vsqrtps), correctly rounded."""
    return np.sqrt(x)


@_scalar
def rsqrt_f32(x):
    """1 / sqrt(x) in float32, correctly rounded sqrt and division (no rsqrtps estimate)."""
    return _F_ONE / np.sqrt(x)


# ---------------------------------------------------------------- float64
_D_ZERO, _D_HALF, _D_ONE, _D_TWO = _D(0), _D(0.5), _D(1), _D(2)
_D_INF, _D_NAN = _D(np.inf), _D(np.nan)
_D_EXP_LO, _D_EXP_HI = _D(-746.0), _D(710.0)  # exp rounds to 0 below, to inf above
_D_INVLN2 = _D(1.44269504088896338700e00)
_D_LN2_HI, _D_LN2_LO = _D(6.93147180369123816490e-01), _D(1.90821492927058770002e-10)
_D_EXP_P = (  # P5 ... P1
    _D(4.13813679705723846039e-08),
    _D(-1.65339022054652515390e-06),
    _D(6.61375632143793436117e-05),
    _D(-2.77777777770155933842e-03),
    _D(1.66666666666666019037e-01),
)
# fdlibm's Lg1 ... Lg7, odd and even ones apart (highest first) for the two polynomials in w
_D_LOG_ODD = (
    _D(1.479819860511658591e-01),
    _D(1.818357216161805012e-01),
    _D(2.857142874366239149e-01),
    _D(6.666666666666735130e-01),
)
_D_LOG_EVEN = (
    _D(1.531383769920937332e-01),
    _D(2.222219843214978396e-01),
    _D(3.999999999940941908e-01),
)
_D_SQRT_HALF = _D(0.70710678118654752440)
_D_MIN_NORMAL, _D_TWO54 = _D(2.0**-1022), _D(2.0**54)


@_scalar
def _scale_f64(y, k):
    """y * 2**k for |k| <= 1100, in two exact steps so subnormal results round once."""
    ki = np.int64(k)
    k1 = ki >> 1
    s1 = _i64_as_f64((k1 + 1023) << 52)
    s2 = _i64_as_f64((ki - k1 + 1023) << 52)
    return y * s1 * s2


@_scalar
def exp_f64(x):
    """e**x in float64 (vectorized). fdlibm e_exp.c (Sun, 1993): x = k ln2 + r with a
    two-part ln2, exp(r) = 1 + r + r c(r) / (2 - c(r)) with a degree-10 Remez polynomial c."""
    xc = x if x > _D_EXP_LO else _D_EXP_LO  # Note [Clamp NaN away]
    xc = xc if xc < _D_EXP_HI else _D_EXP_HI
    k = np.floor(_mul_add(xc, _D_INVLN2, _D_HALF))
    hi = _mul_add(k, -_D_LN2_HI, xc)
    lo = k * _D_LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * _polynomial(t, _D_EXP_P)
    y = _D_ONE - ((lo - r * c / (_D_TWO - c)) - hi)
    return _scale_f64(y, k) if x == x else x


@_scalar
def log_f64(x):
    """Natural log in float64 (vectorized). fdlibm e_log.c (Sun, 1993): x = m 2**e with m in
    [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f), log(m) = f - f**2/2 + s (f**2/2 + R(s))
    with a degree-14 Remez polynomial R, plus e ln2 split in two parts."""
    tiny = x < _D_MIN_NORMAL  # subnormals are scaled to normals first
    bits = _f64_as_i64(x * _D_TWO54 if tiny else x)
    e = ((bits >> 52) & 0x7FF) - (1076 if tiny else 1022)
    m = _i64_as_f64((bits & 0x000FFFFFFFFFFFFF) | 0x3FE0000000000000)  # [0.5, 1)
    low = m < _D_SQRT_HALF
    dk = _D(e - 1 if low else e)
    f = (m + m if low else m) - _D_ONE
    s = f / (_D_TWO + f)
    z = s * s
    w = z * z
    r = z * _polynomial(w, _D_LOG_ODD) + w * _polynomial(w, _D_LOG_EVEN)
    hfsq = _D_HALF * f * f
    y = f - (hfsq - _mul_add(s, hfsq + r, dk * _D_LN2_LO))
    y = _mul_add(dk, _D_LN2_HI, y)
    y = _D_NAN if x < _D_ZERO else y
    y = -_D_INF if x == _D_ZERO else y
    return y if x < _D_INF else x


@_scalar
def sigmoid_f64(x):
    """1 / (1 + e**-x) in float64 (vectorized), as sigmoid_f32 with exp_f64 (0 below
    x = -709.8, as eager and PyTorch)."""
    return _D_ONE / (_D_ONE + exp_f64(-x))


@_scalar
def sqrt_f64(x):
    """sqrt in float64: LLVM's sqrt intrinsic (vsqrtpd), correctly rounded."""
    return np.sqrt(x)


@_scalar
def rsqrt_f64(x):
    """1 / sqrt(x) in float64, correctly rounded sqrt and division."""
    return _D_ONE / np.sqrt(x)


# float64 functions below call scalar libm (numba lowers math.* to libm calls): a loop that
# uses them does not vectorize, but float64 is rare in the models we compile and libm gives
# numpy's results exactly.
@_scalar
def expm1_f64(x):
    """e**x - 1 in float64: libm expm1 (scalar, not vectorized)."""
    return math.expm1(x)


@_scalar
def log1p_f64(x):
    """log(1 + x) in float64: libm log1p (scalar, not vectorized)."""
    return math.log1p(x)


@_scalar
def tanh_f64(x):
    """tanh in float64: libm tanh (scalar, not vectorized)."""
    return math.tanh(x)


@_scalar
def erf_f64(x):
    """erf in float64: libm erf (scalar, not vectorized)."""
    return math.erf(x)


@_scalar
def sin_f64(x):
    """sin in float64: libm sin (scalar, not vectorized; exact argument reduction)."""
    return math.sin(x)


@_scalar
def cos_f64(x):
    """cos in float64: libm cos (scalar, not vectorized; exact argument reduction)."""
    return math.cos(x)


@_scalar
def pow_f64(x, y):
    """x**y in float64 for a float exponent: libm pow (scalar, not vectorized)."""
    return math.pow(x, y)


# ---------------------------------------------------------------- float32 through float64
# These float32 functions evaluate in float64 (4 lanes instead of 8 per AVX2 register) and
# round once at the end: simpler than float32 forms at equal accuracy, still vectorized.
_D_EXPM1_SMALL = _D(0.5)
_D_EXPM1_TAYLOR = tuple(_D(1.0 / math.factorial(n)) for n in range(12, 1, -1))  # 1/12! ...
_D_LOG1P_IDENTITY = _D(2.0**-29)  # below, log1p(x) rounds to x in float32
_D_ERF_T = (
    _D(9.60497373987051638749e0),
    _D(9.00260197203842689217e1),
    _D(2.23200534594684319226e3),
    _D(7.00332514112805075473e3),
    _D(5.55923013010394962768e4),
)
_D_ERF_U = (  # monic
    _D(1.0),
    _D(3.35617141647503099647e1),
    _D(5.21357949780152679795e2),
    _D(4.59432382970980127987e3),
    _D(2.26290000613890934246e4),
    _D(4.92673942608635921086e4),
)
_D_ERFC_P = (
    _D(2.46196981473530512524e-10),
    _D(5.64189564831068821977e-1),
    _D(7.46321056442269912687e0),
    _D(4.86371970985681366614e1),
    _D(1.96520832956077098242e2),
    _D(5.26445194995477358631e2),
    _D(9.34528527171957607540e2),
    _D(1.02755188689515710272e3),
    _D(5.57535335369399327526e2),
)
_D_ERFC_Q = (  # monic
    _D(1.0),
    _D(1.32281951154744992508e1),
    _D(8.67072140885989742329e1),
    _D(3.54937778887819891062e2),
    _D(9.75708501743205489753e2),
    _D(1.82390916687909736289e3),
    _D(2.24633760818710981792e3),
    _D(1.65666309194161350182e3),
    _D(5.57535340817727675546e2),
)
_D_ERF_SATURATE = _D(4.0)  # erf(x) rounds to ±1 in float32 for |x| >= 3.92


def _two_over_pi_bits(count: int, bits: int = 29) -> tuple:
    """The first `count * bits` bits of the fraction of 2/pi, as `count` integers of `bits`
    bits (float64s, exact), from pi computed exactly by Machin's formula in integers."""
    precision = count * bits + 64  # guard bits against the series' truncation
    one = 1 << precision

    def arctan_of_inverse(n: int) -> int:  # arctan(1/n) * one
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term, k, sign = term // (n * n), k + 2, -sign
        return total

    two_over_pi = 2 * one * one // (16 * arctan_of_inverse(5) - 4 * arctan_of_inverse(239))
    mask = (1 << bits) - 1
    return tuple(_D((two_over_pi >> (precision - bits * (i + 1))) & mask) for i in range(count))


# 2/pi = sum of _D_TWO_OVER_PI_BITS[i] * 2**(-29 (i + 1)): 203 bits, what a float32 of
# exponent up to 127 needs (Note [Exact argument reduction])
_D_TWO_OVER_PI_BITS = _two_over_pi_bits(7)
_D_PIO2 = _D(math.pi / 2)
# (-1)**n / (2n+1)! and (-1)**n / (2n)!, highest n first
_D_SIN_TAYLOR = tuple(_D((-1) ** n / math.factorial(2 * n + 1)) for n in range(7, 0, -1))
_D_COS_TAYLOR = tuple(_D((-1) ** n / math.factorial(2 * n)) for n in range(8, 0, -1))
_D_QUARTER, _D_THREE = _D(0.25), _D(3)


@_scalar
def expm1_f32(x):
    """e**x - 1 in float32 (vectorized, float64 inside): Taylor series to x**12 for
    |x| < 0.5 (truncation < 3e-12 relative), else exp_f64(x) - 1."""
    xd = _D(x)
    small = _mul_add(xd * xd, _polynomial(xd, _D_EXPM1_TAYLOR), xd)
    big = exp_f64(xd) - _D_ONE
    y = _F(small if abs(xd) < _D_EXPM1_SMALL else big)
    return x if x == _F_ZERO else y


@_scalar
def log1p_f32(x):
    """log(1 + x) in float32 (vectorized, float64 inside): log_f64(1 + x), where 1 + x is
    exact in float64 for |x| >= 2**-29; below that log1p(x) rounds to x."""
    xd = _D(x)
    y = _F(log_f64(_D_ONE + xd))
    return x if abs(xd) < _D_LOG1P_IDENTITY else y


@_scalar
def erf_f32(x):
    """erf in float32 (vectorized, float64 inside). Cephes ndtr.c (Moshier): x T(x**2) /
    U(x**2) for |x| < 1, else 1 - exp(-x**2) P(|x|) / Q(|x|) with the sign of x."""
    xd = _D(x)
    ax = abs(xd)
    z = xd * xd
    small = xd * _polynomial(z, _D_ERF_T) / _polynomial(z, _D_ERF_U)
    a = ax if ax < _D_ERF_SATURATE else _D_ERF_SATURATE  # Note [Clamp NaN away]
    a = a if a > _D_ONE else _D_ONE
    num, den = _polynomial(a, _D_ERFC_P), _polynomial(a, _D_ERFC_Q)
    big = _D_ONE - exp_f64(-a * a) * num / den
    y = _F(small if ax < _D_ONE else math.copysign(big, xd))
    return y if x == x else x


# Note [Exact argument reduction]
# sin and cos of a float32 x reduce it to x = q pi/2 + r, |r| <= pi/4, exactly enough for
# every finite x (Payne-Hanek, as numpy's libm; a Cody-Waite reduction by a rounded pi/2
# loses all accuracy past |x| ~ 1e6: sin(3.4e38) came out 1.0 where numpy gives -0.52).
# Write |x| = m 2**e (m < 2**24 an integer) and 2/pi = sum c_i 2**(-29 (i + 1)) (29-bit
# integers c_i). A term m c_i 2**(e - 29 (i + 1)) that is a multiple of 4 does not change
# |x| 2/pi mod 4, so the sum starts at the first chunk i0 whose term is not: three terms
# from there (the first two taken mod 4 exactly) and a fourth, each a 53-bit product
# (exact in float64), leave the fraction f = |x| 2/pi - q to about 2**-54, and the
# truncation of 2/pi below 2**-62 (three terms left 2**-33 when 2**e ~ 2**30). Only
# arithmetic, bit casts and selects: it vectorizes like the rest of the library.

@_scalar
def _pick(i, a, b, c, d):
    return a if i == 0 else (b if i == 1 else (c if i == 2 else d))


@_scalar
def _reduce_half_pi_f32(x):
    """(q, r) with |x| = q pi/2 + r, q in {0, 1, 2, 3} (a float64), |r| <= pi/4 (within
    rounding), r to about 2**-54 absolute, for a finite float32 x (Note [Exact argument
    reduction])."""
    bits = _f32_as_i32(x)
    biased = (bits >> 23) & 0xFF
    m = _D((bits & 0x7FFFFF) | (0x800000 if biased != 0 else 0))  # subnormals: no hidden bit
    e = (biased if biased != 0 else 1) - 150  # |x| = m 2**e
    i0 = max((e - 2) // 29, 0)  # the terms of chunks before i0 are multiples of 4
    scale = _i64_as_f64(np.int64(e - 29 * (i0 + 1) + 1023) << 52)  # 2**(e - 29 (i0 + 1))
    c = _D_TWO_OVER_PI_BITS
    t0 = m * _pick(i0, c[0], c[1], c[2], c[3]) * scale
    t1 = m * _pick(i0, c[1], c[2], c[3], c[4]) * (scale * _D(2.0**-29))
    t2 = m * _pick(i0, c[2], c[3], c[4], c[5]) * (scale * _D(2.0**-58))
    t3 = m * _pick(i0, c[3], c[4], c[5], c[6]) * (scale * _D(2.0**-87))
    t0 = t0 - _D(4) * np.floor(t0 * _D_QUARTER)  # exact: mod 4 of an exact product
    t1 = t1 - _D(4) * np.floor(t1 * _D_QUARTER)
    q = np.floor(t0 + t1 + t2 + _D_HALF)
    f = (((t0 - q) + t1) + t2) + t3  # |t0 - q + t1| < 1: rounds only below 2**-53
    return q - _D(4) * np.floor(q * _D_QUARTER), f * _D_PIO2


@_scalar
def _sin_cos_quadrant(x, shift):
    """sin(|x| + shift * pi/2) for a finite float32 x, in float64: the reduction of Note
    [Exact argument reduction], then sin, cos of r by Taylor series to r**15, r**16
    (truncation < 1e-16 for |r| <= pi/4)."""
    q, r = _reduce_half_pi_f32(x)
    q = q + shift
    quadrant = q - _D(4) * np.floor(q * _D_QUARTER)
    z = r * r
    sin_r = _mul_add(r * z, _polynomial(z, _D_SIN_TAYLOR), r)
    cos_r = _mul_add(z, _polynomial(z, _D_COS_TAYLOR), _D_ONE)
    odd = (quadrant == _D_ONE) | (quadrant == _D_THREE)
    v = cos_r if odd else sin_r
    return -v if quadrant >= _D_TWO else v


@_scalar
def sin_f32(x):
    """sin in float32 (vectorized, float64 inside); within 4 ulp for every finite x (Note
    [Exact argument reduction]). sin(±inf) = nan."""
    finite = abs(x) < _F_INF
    v = _sin_cos_quadrant(x if finite else _F_ZERO, _D_ZERO)
    y = _F(-v if x < _F_ZERO else v)
    y = y if finite else _F_NAN
    y = x if x == _F_ZERO else y
    return y if x == x else x


@_scalar
def cos_f32(x):
    """cos in float32 (vectorized, float64 inside); accuracy as sin_f32. cos(±inf) = nan."""
    finite = abs(x) < _F_INF
    y = _F(_sin_cos_quadrant(x if finite else _F_ZERO, _D_ONE))
    y = y if finite else _F_NAN
    return y if x == x else x


@_scalar
def pow_f32(x, y):
    """x**y in float32 for a float exponent (vectorized, float64 inside): exp_f64(y *
    log_f64(|x|)) with C99 Annex F's special cases (pow(x, ±0) = 1, pow(1, y) = 1,
    pow(-1, ±inf) = 1, odd integer y keeps the sign of x, x < 0 with non-integer y is nan).
    Integer exponents (x**2, x**3) are expanded to products by the caller."""
    xd, yd = _D(x), _D(y)
    ax = abs(xd)
    magnitude = exp_f64(yd * log_f64(ax))
    integral = np.floor(yd) == yd
    half = yd * _D_HALF
    odd = integral & (np.floor(half) != half)
    negative = _f32_as_i32(x) < 0  # sign bit: -0.0 and -inf count
    r = -magnitude if negative & odd else magnitude
    r = _D_NAN if (xd < _D_ZERO) & (ax < _D_INF) & (np.floor(yd) != yd) else r
    r = _D_ONE if (yd == _D_ZERO) | (xd == _D_ONE) else r
    r = _D_ONE if (xd == -_D_ONE) & (abs(yd) == _D_INF) else r
    return _F(r)


FUNCTIONS = {
    (name, np.dtype(dtype)): globals()[f"{name}_{suffix}"]
    for name in (
        "exp",
        "expm1",
        "log",
        "log1p",
        "tanh",
        "sigmoid",
        "erf",
        "sin",
        "cos",
        "pow",
        "sqrt",
        "rsqrt",
    )
    for dtype, suffix in ((np.float32, "f32"), (np.float64, "f64"))
}
"""`FUNCTIONS[(name, dtype)]` is the njit scalar function computing `name` in `dtype`;
`pow` takes (base, exponent), the others one argument."""
