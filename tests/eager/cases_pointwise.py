"""Op cases for unary math, binary math, selections, comparisons and activations.

Input ranges keep gradcheck away from non-differentiable points (|x| kinks, clamp
bounds, remainder jumps) and from the poles of log/sqrt/reciprocal; semantics at those
points are tested in test_pointwise.py against values measured in PyTorch.
"""

import math

import numpy as np
from scipy import special

import jitgrad as jg
from tests.eager.op_table import Arg, OpCase

A = Arg((3, 4))
ROW = Arg((4,))
COL = Arg((3, 1))
SCALAR = Arg(())
POSITIVE = Arg((3, 4), 0.5, 2.0)
POSITIVE_ROW = Arg((4,), 0.5, 2.0)
TRANSPOSED = Arg((3, 4), layout="transposed")
STRIDED = Arg((3, 4), layout="strided")
MASK = Arg((3, 4), kind="bool")
MASK_ROW = Arg((4,), kind="bool")
INTS = Arg((3, 4), -3, 4, kind="int")
INTS_ROW = Arg((4,), -3, 4, kind="int")
BOOLS = Arg((3, 4), kind="bool")


def _quiet(ref):
    """A numpy reference that produces NaN/inf on purpose, without RuntimeWarnings."""
    def run(*arrays):
        with np.errstate(all="ignore"):
            return ref(*arrays)
    return run


def _gelu_ref(a):
    return 0.5 * a * (1 + special.erf(a * math.sqrt(0.5)))


def _gelu_tanh_ref(a):
    return 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))


def _softplus_ref(a, beta=1.0, threshold=20.0):
    return np.where(a * beta > threshold, a, np.log1p(np.exp(a * beta)) / beta)


def _lerp_ref(a, b, w):
    return a + w * (b - a)


UNARY = [
    OpCase("abs", jg.abs, np.abs, (A,)),
    OpCase("abs_method_transposed", lambda a: abs(a), np.abs, (TRANSPOSED,)),
    OpCase("sign", jg.sign, np.sign, (A,)),
    OpCase("floor", jg.floor, np.floor, (Arg((3, 4), -3.0, 3.0),)),
    OpCase("ceil_strided", jg.ceil, np.ceil, (Arg((3, 4), -3.0, 3.0, layout="strided"),)),
    OpCase("trunc", jg.trunc, np.trunc, (Arg((3, 4), -3.0, 3.0),)),
    OpCase("round", jg.round, np.round, (Arg((3, 4), -3.0, 3.0),)),
    OpCase("round_decimals", lambda a: jg.round(a, decimals=1), lambda a: np.round(a, 1),
           (Arg((3, 4), -3.0, 3.0),)),
    OpCase("frac", jg.frac, lambda a: a - np.trunc(a), (Arg((3, 4), -3.0, 3.0),)),
    OpCase("expm1", jg.expm1, np.expm1, (A,)),
    OpCase("log2", jg.log2, np.log2, (POSITIVE,)),
    OpCase("log10_transposed", jg.log10, np.log10, (Arg((3, 4), 0.5, 2.0, layout="transposed"),)),
    OpCase("log1p", jg.log1p, np.log1p, (Arg((3, 4), -0.5, 2.0),)),
    OpCase("sqrt", jg.sqrt, np.sqrt, (POSITIVE,)),
    OpCase("sqrt_0d", jg.sqrt, np.sqrt, (Arg((), 0.5, 2.0),)),
    OpCase("rsqrt", jg.rsqrt, lambda a: 1 / np.sqrt(a), (POSITIVE,)),
    OpCase("reciprocal", jg.reciprocal, lambda a: 1 / a, (POSITIVE,)),
    OpCase("square", jg.square, np.square, (A,)),
    OpCase("sin", jg.sin, np.sin, (A,)),
    OpCase("cos_strided", jg.cos, np.cos, (STRIDED,)),
    OpCase("tan", jg.tan, np.tan, (Arg((3, 4), -1.2, 1.2),)),
    OpCase("erf", jg.erf, special.erf, (A,)),
    OpCase("nan_to_num", jg.nan_to_num, np.nan_to_num, (A,)),
    OpCase("nan_to_num_of_log", lambda a: jg.nan_to_num(jg.log(a), nan=0.5),
           _quiet(lambda a: np.nan_to_num(np.log(a), nan=0.5)), (A,)),
    OpCase("sigmoid", jg.sigmoid, special.expit, (Arg((3, 4), -6.0, 6.0),)),
    OpCase("sigmoid_method_0d", lambda a: a.sigmoid(), special.expit, (SCALAR,)),
]

ACTIVATIONS = [
    OpCase("relu_transposed", jg.relu, lambda a: np.maximum(a, 0), (TRANSPOSED,)),
    OpCase("relu6", jg.relu6, lambda a: np.clip(a, 0, 6), (Arg((3, 4), -3.0, 9.0),)),
    OpCase("hardtanh", jg.hardtanh, lambda a: np.clip(a, -1, 1), (A,)),
    OpCase("hardtanh_bounds", lambda a: jg.hardtanh(a, -0.5, 1.5), lambda a: np.clip(a, -0.5, 1.5),
           (STRIDED,)),
    OpCase("leaky_relu", jg.leaky_relu, lambda a: np.where(a > 0, a, 0.01 * a), (A,)),
    OpCase("leaky_relu_slope", lambda a: jg.leaky_relu(a, 0.2),
           lambda a: np.where(a > 0, a, 0.2 * a), (TRANSPOSED,)),
    OpCase("gelu", jg.gelu, _gelu_ref, (Arg((3, 4), -4.0, 4.0),)),
    OpCase("gelu_tanh", lambda a: jg.gelu(a, approximate="tanh"), _gelu_tanh_ref,
           (Arg((3, 4), -4.0, 4.0),)),
    OpCase("gelu_0d", jg.gelu, _gelu_ref, (SCALAR,)),
    OpCase("silu", jg.silu, lambda a: a * special.expit(a), (Arg((3, 4), -6.0, 6.0),)),
    OpCase("softplus", jg.softplus, _softplus_ref, (Arg((3, 4), -6.0, 6.0),)),
    OpCase("softplus_beta_threshold", lambda a: jg.softplus(a, beta=2.0, threshold=3.0),
           lambda a: _softplus_ref(a, 2.0, 3.0), (Arg((3, 4), -3.0, 3.0),)),
    OpCase("elu", jg.elu, lambda a: np.where(a > 0, a, np.expm1(a)), (A,)),
    OpCase("elu_alpha", lambda a: jg.elu(a, alpha=0.5),
           lambda a: np.where(a > 0, a, 0.5 * np.expm1(a)), (STRIDED,)),
    OpCase("logsigmoid", jg.logsigmoid, lambda a: -np.logaddexp(0, -a), (Arg((3, 4), -8.0, 8.0),)),
]

BINARY = [
    OpCase("pow_scalar", lambda a: a ** 2.5, lambda a: a ** 2.5, (POSITIVE,)),
    OpCase("pow_int_scalar", lambda a: jg.pow(a, 3), lambda a: a ** 3, (A,)),
    OpCase("pow_negative_scalar", lambda a: a ** -1.5, lambda a: a ** -1.5, (POSITIVE,)),
    OpCase("pow_zero_scalar", lambda a: a ** 0, lambda a: a ** 0, (A,)),
    OpCase("pow_tensor_broadcast", jg.pow, np.power, (POSITIVE, Arg((3, 1), -2.0, 2.0))),
    OpCase("pow_tensor_transposed", jg.pow, np.power,
           (Arg((3, 4), 0.5, 2.0, layout="transposed"), ROW)),
    OpCase("rpow", lambda b: 2.0 ** b, lambda b: 2.0 ** b, (A,)),
    OpCase("pow_0d_exponent", jg.pow, np.power, (POSITIVE, SCALAR)),
    OpCase("maximum", jg.maximum, np.maximum, (A, A)),
    OpCase("maximum_broadcast", jg.maximum, np.maximum, (COL, Arg((4,), layout="strided"))),
    OpCase("minimum_transposed", jg.minimum, np.minimum, (TRANSPOSED, ROW)),
    OpCase("minimum_0d", jg.minimum, np.minimum, (A, SCALAR)),
    OpCase("atan2", jg.atan2, np.arctan2, (A, COL)),
    OpCase("atan2_strided", jg.atan2, np.arctan2, (STRIDED, A)),
    OpCase("remainder", jg.remainder, np.remainder, (Arg((3, 4), -4.0, 4.0), POSITIVE_ROW)),
    OpCase("remainder_operator_scalar", lambda a: a % 1.5, lambda a: np.remainder(a, 1.5), (A,)),
    OpCase("rmod", lambda b: 5.0 % b, lambda b: np.remainder(5.0, b), (POSITIVE,)),
    OpCase("fmod", jg.fmod, np.fmod, (Arg((3, 4), -4.0, 4.0), Arg((3, 1), 0.5, 2.0))),
    OpCase("div_floor", lambda a, b: jg.div(a, b, rounding_mode="floor"), np.floor_divide,
           (Arg((3, 4), -4.0, 4.0), POSITIVE_ROW)),
    OpCase("div_trunc", lambda a, b: jg.div(a, b, rounding_mode="trunc"),
           lambda a, b: np.trunc(a / b), (Arg((3, 4), -4.0, 4.0), POSITIVE_ROW)),
    OpCase("floor_divide_operator", lambda a, b: a // b, np.floor_divide,
           (Arg((3, 4), -4.0, 4.0), POSITIVE_ROW), differentiable=False),
    OpCase("lerp_scalar_weight", lambda a, b: jg.lerp(a, b, 0.3), lambda a, b: _lerp_ref(a, b, 0.3),
           (A, ROW)),
    OpCase("lerp_large_weight", lambda a, b: a.lerp(b, 0.8), lambda a, b: _lerp_ref(a, b, 0.8),
           (A, TRANSPOSED)),
    OpCase("lerp_tensor_weight", jg.lerp, _lerp_ref, (A, A, Arg((3, 4), 0.0, 1.0))),
    OpCase("addcmul", lambda a, b, c: jg.addcmul(a, b, c, value=0.5),
           lambda a, b, c: a + 0.5 * b * c, (A, COL, ROW)),
    OpCase("addcmul_0d", jg.addcmul, lambda a, b, c: a + b * c, (SCALAR, A, STRIDED)),
    OpCase("addcdiv", lambda a, b, c: a.addcdiv(b, c, value=-2.0),
           lambda a, b, c: a - 2.0 * b / c, (A, TRANSPOSED, POSITIVE_ROW)),
]

SELECTIONS = [
    OpCase("where", jg.where, np.where, (MASK, A, A)),
    OpCase("where_broadcast", jg.where, np.where, (MASK_ROW, COL, Arg((4,), layout="strided"))),
    OpCase("where_scalar_other", lambda c, a: jg.where(c, a, 0.0), lambda c, a: np.where(c, a, 0.0),
           (MASK, TRANSPOSED)),
    OpCase("where_scalar_input", lambda c, b: jg.where(c, -1.5, b),
           lambda c, b: np.where(c, -1.5, b), (MASK_ROW, A)),
    OpCase("where_method", lambda a, c, b: a.where(c, b), lambda a, c, b: np.where(c, a, b),
           (A, MASK, SCALAR)),
    OpCase("masked_fill", lambda a, m: a.masked_fill(m, 2.0), lambda a, m: np.where(m, 2.0, a),
           (A, MASK_ROW)),
    OpCase("masked_fill_tensor_value", jg.masked_fill, lambda a, m, v: np.where(m, v, a),
           (TRANSPOSED, MASK, SCALAR)),
    OpCase("clamp", lambda a: jg.clamp(a, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), (A,)),
    OpCase("clamp_min_only", lambda a: a.clamp(min=0.0), lambda a: np.maximum(a, 0.0), (STRIDED,)),
    OpCase("clamp_max_only", lambda a: jg.clamp_max(a, 1.0), lambda a: np.minimum(a, 1.0), (A,)),
    OpCase("clip_tensor_bounds", jg.clip, lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi),
           (A, Arg((3, 1), -1.0, 0.0), Arg((4,), 0.0, 1.0))),
    OpCase("clamp_tensor_min_scalar_max", lambda a, lo: jg.clamp(a, lo, 1.0),
           lambda a, lo: np.minimum(np.maximum(a, lo), 1.0), (TRANSPOSED, ROW)),
]


def _comparison_cases():
    cases = []
    for name, fn, ref in (("eq", jg.eq, np.equal), ("ne", jg.ne, np.not_equal),
                          ("lt", jg.lt, np.less), ("le", jg.le, np.less_equal),
                          ("gt", jg.gt, np.greater), ("ge", jg.ge, np.greater_equal)):
        cases.append(OpCase(f"{name}_ints", fn, ref, (INTS, INTS_ROW), differentiable=False))
        cases.append(OpCase(f"{name}_floats_transposed", fn, ref, (TRANSPOSED, COL),
                            differentiable=False))
    return cases


COMPARISONS = _comparison_cases() + [
    OpCase("eq_operator_scalar", lambda a: a == 1, lambda a: a == 1, (INTS,), differentiable=False),
    OpCase("lt_operator_float_vs_int", lambda a, b: a < b, np.less, (A, INTS_ROW),
           differentiable=False),
    OpCase("ge_operator_reflected", lambda a: 0.5 <= a, lambda a: 0.5 <= a, (A,),
           differentiable=False),
    OpCase("logical_and", jg.logical_and, np.logical_and, (INTS, BOOLS), differentiable=False),
    OpCase("logical_or", jg.logical_or, np.logical_or, (A, INTS_ROW), differentiable=False),
    OpCase("logical_xor", jg.logical_xor, np.logical_xor, (BOOLS, MASK_ROW), differentiable=False),
    OpCase("logical_not", jg.logical_not, np.logical_not, (INTS,), differentiable=False),
    OpCase("bitwise_and_operator", lambda a, b: a & b, np.bitwise_and, (INTS, INTS_ROW),
           differentiable=False),
    OpCase("bitwise_or_bools", lambda a, b: a | b, np.bitwise_or, (BOOLS, MASK_ROW),
           differentiable=False),
    OpCase("bitwise_xor_int_bool", lambda a, b: a ^ b, lambda a, b: a ^ b.astype(np.int64),
           (INTS, BOOLS), differentiable=False),
    OpCase("invert_ints", lambda a: ~a, np.invert, (INTS,), differentiable=False),
    OpCase("invert_bools", lambda a: ~a, np.invert, (BOOLS,), differentiable=False),
    OpCase("isnan_of_log", lambda a: jg.isnan(jg.log(a)),
           _quiet(lambda a: np.isnan(np.log(a))), (A,), differentiable=False),
    OpCase("isinf_of_reciprocal", lambda a: jg.isinf(1 / jg.floor(a)),
           _quiet(lambda a: np.isinf(1 / np.floor(a))), (Arg((3, 4), 0.0, 2.0),),
           differentiable=False),
    OpCase("isfinite_of_log", lambda a: a.log().isfinite(),
           _quiet(lambda a: np.isfinite(np.log(a))), (A,), differentiable=False),
    OpCase("isclose", jg.isclose, np.isclose, (A, A), differentiable=False),
]

UNIT = Arg((3, 4), -0.9, 0.9)  # inside the domain of asin/acos/atanh/erfinv
PROBABILITY = Arg((3, 4), 0.05, 0.95)

MATH = [
    OpCase("sinh", jg.sinh, np.sinh, (A,)),
    OpCase("cosh_transposed", jg.cosh, np.cosh, (TRANSPOSED,)),
    OpCase("asinh", jg.asinh, np.arcsinh, (A,)),
    OpCase("acosh", jg.acosh, np.arccosh, (Arg((3, 4), 1.2, 3.0),)),
    OpCase("atanh_strided", jg.atanh, np.arctanh, (Arg((3, 4), -0.9, 0.9, layout="strided"),)),
    OpCase("asin", jg.asin, np.arcsin, (UNIT,)),
    OpCase("arccos", jg.arccos, np.arccos, (UNIT,)),
    OpCase("atan_method", lambda a: a.atan(), np.arctan, (A,)),
    OpCase("exp2", jg.exp2, np.exp2, (A,)),
    OpCase("exp2_0d", jg.exp2, np.exp2, (SCALAR,)),
    OpCase("erfc", jg.erfc, special.erfc, (A,)),
    OpCase("erfinv", jg.erfinv, special.erfinv, (UNIT,), rtol=2e-5),
    OpCase("lgamma", jg.lgamma, special.gammaln, (Arg((3, 4), 0.5, 4.0),)),
    OpCase("digamma", jg.digamma, special.digamma, (Arg((3, 4), 0.5, 4.0),), rtol=2e-5),
    OpCase("polygamma_2", lambda a: jg.polygamma(2, a), lambda a: special.polygamma(2, a),
           (Arg((3, 4), 0.5, 4.0),), rtol=2e-5),
    OpCase("i0", jg.i0, special.i0, (A,)),
    OpCase("special_i1", jg.special.i1, special.i1, (A,)),
    OpCase("sinc", jg.sinc, np.sinc, (A,), atol=2e-6),
    OpCase("logit", jg.logit, special.logit, (PROBABILITY,)),
    OpCase("logit_eps", lambda a: jg.logit(a, eps=0.2),
           lambda a: special.logit(np.clip(a, 0.2, 0.8)), (PROBABILITY,)),
    OpCase("deg2rad", jg.deg2rad, np.deg2rad, (A,)),
    OpCase("rad2deg_method", lambda a: a.rad2deg(), np.rad2deg, (A,)),
    OpCase("sgn", jg.sgn, np.sign, (A,)),
    OpCase("signbit", jg.signbit, np.signbit, (A,), differentiable=False),
    OpCase("copysign", jg.copysign, np.copysign, (A, COL)),
    OpCase("copysign_scalar", lambda a: jg.copysign(a, -1.0), lambda a: np.copysign(a, -1.0),
           (A,)),
    OpCase("hypot", jg.hypot, np.hypot, (A, ROW)),
    OpCase("logaddexp", jg.logaddexp, np.logaddexp, (A, TRANSPOSED)),
    OpCase("logaddexp2", jg.logaddexp2, np.logaddexp2, (A, COL)),
    OpCase("xlogy", jg.xlogy, special.xlogy, (A, POSITIVE_ROW)),
    OpCase("xlogy_scalar_input", lambda b: jg.xlogy(2.0, b), lambda b: special.xlogy(2.0, b),
           (POSITIVE,)),
    OpCase("fmax", jg.fmax, np.fmax, (A, ROW)),
    OpCase("fmin_strided", jg.fmin, np.fmin, (STRIDED, A)),
    OpCase("heaviside", jg.heaviside, np.heaviside, (A, ROW), differentiable=False),
    OpCase("float_power", jg.float_power, lambda a, b: np.power(a.astype(np.float64), b),
           (POSITIVE, ROW), dtypes=(np.float64,)),
    OpCase("ldexp", jg.ldexp, lambda a, e: a * 2.0 ** e, (A, INTS_ROW)),
    OpCase("nextafter", jg.nextafter, np.nextafter, (A, ROW), differentiable=False),
    OpCase("igamma", jg.igamma, special.gammainc,
           (Arg((3, 4), 0.5, 3.0, requires_grad=False), POSITIVE_ROW), rtol=2e-5),
    OpCase("igammac", jg.igammac, special.gammaincc,
           (Arg((3, 1), 0.5, 3.0, requires_grad=False), POSITIVE), rtol=2e-5),
    OpCase("angle", jg.angle, lambda a: np.where(a < 0, np.pi, 0.0), (A,)),
    OpCase("mvlgamma", lambda a: jg.mvlgamma(a, 3),
           lambda a: special.multigammaln(a.astype(np.float64), 3) if a.ndim == 0 else
           np.vectorize(lambda v: special.multigammaln(v, 3))(a), (Arg((3, 4), 1.5, 4.0),)),
    OpCase("left_shift_operator", lambda a, b: a << b, np.left_shift,
           (INTS, Arg((4,), 0, 5, kind="int")), differentiable=False),
    OpCase("right_shift", jg.bitwise_right_shift, np.right_shift,
           (INTS, Arg((4,), 0, 3, kind="int")), differentiable=False),
    OpCase("gcd", jg.gcd, np.gcd, (INTS, INTS_ROW), differentiable=False),
    OpCase("lcm", jg.lcm, np.lcm, (INTS, INTS_ROW), differentiable=False),
]

CASES = UNARY + ACTIVATIONS + BINARY + SELECTIONS + COMPARISONS + MATH
