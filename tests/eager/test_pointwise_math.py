"""The pointwise math of jitgrad.eager.ops.pointwise_math: edges, dtypes, errors, gradient
conventions, in-place variants and double backward.

Forward values and gradchecks of every op are op-table cases (cases_pointwise.MATH); the
expectations here were measured on torch 2.13.0+cpu and are written out, so no torch.
"""

import math

import numpy as np
import pytest

import jitgrad as jg

INF, NAN = math.inf, math.nan


def _values(t):
    return t.detach().numpy().tolist()


# name: (call, expected values) at the edges of each function's domain
EDGES = {
    "digamma": (lambda: jg.digamma(jg.tensor([0.0, -1.0, -0.0])), [-INF, NAN, INF]),
    "lgamma": (lambda: jg.lgamma(jg.tensor([0.0, -1.0])), [INF, INF]),
    "logit": (lambda: jg.logit(jg.tensor([0.0, 1.0, 0.5, 2.0])), [-INF, INF, 0.0, NAN]),
    "erfinv": (lambda: jg.erfinv(jg.tensor([1.0, -1.0, 2.0])), [INF, -INF, NAN]),
    "xlogy": (lambda: jg.xlogy(jg.zeros(3), jg.tensor([0.0, NAN, -1.0])), [0.0, NAN, 0.0]),
    "atanh": (lambda: jg.atanh(jg.tensor([1.0, -1.0])), [INF, -INF]),
    "acosh": (lambda: jg.acosh(jg.tensor([1.0, 0.5])), [0.0, NAN]),
    "sinc": (lambda: jg.sinc(jg.tensor([0.0])), [1.0]),
    "copysign_negative_zero": (lambda: jg.copysign(jg.tensor([2.0]), jg.tensor([-0.0])),
                               [-2.0]),
    "signbit": (lambda: jg.signbit(jg.tensor([-0.0, 0.0, -1.0])), [True, False, True]),
    "fmax_nan": (lambda: jg.fmax(jg.tensor([NAN, 1.0, NAN]), jg.tensor([2.0, NAN, NAN])),
                 [2.0, 1.0, NAN]),
    "heaviside": (lambda: jg.heaviside(jg.tensor([-1.0, 0.0, 2.0]), jg.tensor(0.5)),
                  [0.0, 0.5, 1.0]),
    "logaddexp_large": (lambda: jg.logaddexp(jg.tensor([1000.0]), jg.tensor([1000.0])),
                        [1000.0 + math.log(2)]),
    "left_shift_past_the_width": (lambda: jg.tensor([1, -8, 5]) << 70, [0, 0, 0]),
    "right_shift_negative_amount": (lambda: jg.tensor([1, -8, 5]) >> -1, [0, -1, 0]),
    "left_shift_number_first": (lambda: 2 << jg.tensor([1, -8, 5]), [4, 0, 64]),
    "gcd_lcm_signs": (lambda: jg.cat([jg.gcd(jg.tensor([1, -8, 5]), jg.tensor([4, 12, 0])),
                                      jg.lcm(jg.tensor([1, -8, 5]), jg.tensor([4, 12, 0]))]),
                      [1, 4, 5, 4, 24, 0]),
    "angle": (lambda: jg.angle(jg.tensor([1.0, -2.0, -0.0, NAN])), [0.0, math.pi, 0.0, NAN]),
    "mvlgamma_outside_domain": (lambda: jg.mvlgamma(jg.tensor([0.5]), 2), [INF]),
}


@pytest.mark.parametrize("name", EDGES)
def test_values_at_the_edges(name):
    call, expected = EDGES[name]
    np.testing.assert_allclose(_values(call()), expected, rtol=1e-6)


INTS = jg.tensor([1, 2])

# name: (call, result dtype): float math promotes integers, fmax/heaviside keep them
DTYPES = {
    "sinh_int": (lambda: jg.sinh(INTS), jg.float32),
    "deg2rad_int": (lambda: jg.deg2rad(INTS), jg.float32),
    "deg2rad_f64": (lambda: jg.deg2rad(INTS.double()), jg.float64),
    "i0_int": (lambda: jg.i0(INTS), jg.float32),
    "lgamma_bool": (lambda: jg.lgamma(jg.tensor([True])), jg.float32),
    "copysign_int": (lambda: jg.copysign(INTS, INTS), jg.float32),
    "xlogy_int": (lambda: jg.xlogy(INTS, INTS), jg.float32),
    "fmax_int": (lambda: jg.fmax(INTS, INTS), jg.int64),
    "heaviside_int": (lambda: jg.heaviside(INTS, INTS), jg.int64),
    "float_power_f32": (lambda: jg.float_power(jg.ones(2), 2), jg.float64),
    "float_power_int": (lambda: jg.float_power(INTS, 2), jg.float64),
    "ldexp_int": (lambda: jg.ldexp(INTS, INTS), jg.float32),
    "ldexp_f64": (lambda: jg.ldexp(INTS.double(), INTS), jg.float64),
    "sgn_int": (lambda: jg.sgn(INTS), jg.int64),
    "signbit_int": (lambda: jg.signbit(INTS), jg.bool),
    "frexp_exponent": (lambda: jg.frexp(jg.tensor([8.0])).exponent, jg.int32),
}


@pytest.mark.parametrize("name", DTYPES)
def test_result_dtypes(name):
    call, dtype = DTYPES[name]
    assert call().dtype == dtype


def test_frexp_splits_into_mantissa_and_exponent():
    mantissa, exponent = jg.frexp(jg.tensor([8.0, 0.3]))
    np.testing.assert_allclose(_values(mantissa), [0.5, 0.6], rtol=1e-6)
    assert _values(exponent) == [4, -1]


REFUSED = {
    "hypot_int": (lambda: jg.hypot(INTS, INTS), NotImplementedError, '"hypot_cpu"'),
    "logaddexp_int": (lambda: jg.logaddexp(INTS, INTS), NotImplementedError, '"logaddexp_cpu"'),
    "hypot_number": (lambda: jg.hypot(jg.ones(2), 2.0), TypeError, "must be Tensor, not float"),
    "fmax_number": (lambda: jg.fmax(jg.ones(2), 1.0), TypeError, "must be Tensor, not float"),
    "heaviside_number": (lambda: jg.heaviside(jg.ones(2), 1.0), TypeError, "'values'"),
    "heaviside_dtypes": (lambda: jg.heaviside(jg.ones(2), INTS), RuntimeError,
                         "heaviside is not yet implemented for tensors with different dtypes"),
    "xlogy_numbers": (lambda: jg.xlogy(2.0, 3.0), TypeError, "xlogy()"),
    "positive_bool": (lambda: jg.positive(jg.tensor([True])), RuntimeError, "`+` operator"),
    "frexp_int": (lambda: jg.frexp(INTS), RuntimeError, "only supports floating-point dtypes"),
    "polygamma_negative": (lambda: jg.polygamma(-1, jg.ones(1)), RuntimeError,
                           "does not support negative n"),
    "float_power__f32": (lambda: jg.ones(2).float_power_(2), RuntimeError,
                         "the base given to float_power_ has dtype"),
    "shift_float": (lambda: jg.ones(2) << 1, NotImplementedError, '"lshift_cpu"'),
    "gcd_number": (lambda: jg.gcd(INTS, 4), TypeError, "'other' (position 2) must be Tensor"),
    "gcd_float": (lambda: jg.gcd(jg.ones(2), jg.ones(2)), NotImplementedError, '"gcd_cpu"'),
    "igamma_int": (lambda: jg.igamma(INTS, INTS), NotImplementedError, '"igamma_cpu"'),
    # PyTorch checks the arguments (input first) before it looks for an integer kernel
    **{f"{name}_number_input": (lambda name=name: getattr(jg, name)(2, INTS), TypeError,
                                f"{name}(): argument 'input' (position 1) must be Tensor, not int")
       for name in ("hypot", "logaddexp", "logaddexp2", "nextafter", "fmax", "heaviside")},
    "mvlgamma_p0": (lambda: jg.mvlgamma(jg.ones(2), 0), RuntimeError, "greater than or equal"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_refused_as_torch(name):
    call, error, words = REFUSED[name]
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)


def test_igamma_gradient_goes_to_x_only():
    a = jg.tensor([1.0, 2.0], dtype=jg.float64)
    x = jg.tensor([0.5, 3.0], dtype=jg.float64, requires_grad=True)
    jg.igamma(a, x).sum().backward()
    expected = np.exp((a.numpy() - 1) * np.log([0.5, 3.0]) - [0.5, 3.0]) / [1.0, 1.0]
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)  # torch: [0.6065, 0.1494]
    np.testing.assert_array_equal(a.clone().igammac_(x.detach()).numpy(),
                                  jg.igammac(a, x.detach()).numpy())
    with pytest.raises(NotImplementedError, match="the derivative for 'igamma: input'"):
        jg.igamma(a.requires_grad_(), x.detach()).sum().backward()


def test_heaviside_backward_raises():
    x = jg.tensor([1.0, 0.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="derivative for aten::heaviside is not implemented"):
        jg.heaviside(x, jg.tensor([0.5, 0.5])).sum().backward()


def _grads(fn, *arrays, upstream=1.0):
    inputs = [jg.tensor(a, dtype=jg.float64, requires_grad=True) for a in arrays]
    y = fn(*inputs)
    y.backward(jg.full(y.shape, upstream, dtype=jg.float64))
    return [_values(t.grad) for t in inputs]


# name: (fn, inputs, upstream, PyTorch's gradients)
GRADIENTS = {
    "fmax_ties_and_nans": (jg.fmax, ([1.0, 2.0, 3.0, NAN, NAN], [1.0, 1.0, 4.0, 2.0, NAN]), 1.0,
                           [[1, 1, 0, 0, 1], [0, 0, 1, 1, 0]]),
    "fmin_ties_and_nans": (jg.fmin, ([1.0, 2.0, 3.0, NAN, NAN], [1.0, 1.0, 4.0, 2.0, NAN]), 1.0,
                           [[1, 0, 1, 0, 1], [0, 1, 0, 1, 0]]),
    "fmax_selects": (jg.fmax, ([1.0, 2.0, 3.0], [1.0, 1.0, 4.0]), INF,
                     [[INF, INF, 0], [0, 0, INF]]),
    "sinc_selects_at_0": (jg.sinc, ([0.0, 1.0],), INF, [[0.0, -INF]]),
    "logit_eps_selects": (lambda x: jg.logit(x, 0.2), ([0.1, 0.5, 0.9],), INF, [[0, INF, 0]]),
    "logit_eps_bounds_inclusive": (lambda x: jg.logit(x, 0.2), ([0.2, 0.8],), 1.0,
                                   [[6.25, 6.25]]),
    "copysign_multiplies": (jg.copysign, ([1.0, 0.0, -2.0], [-1.0, 1.0, 1.0]), INF,
                            [[-INF, NAN, -INF], [0, 0, 0]]),
    "xlogy_zero": (jg.xlogy, ([0.0, 0.0, 1.0], [0.0, 2.0, 3.0]), 1.0,
                   [[0.0, math.log(2), math.log(3)], [NAN, 0.0, 1 / 3]]),
    "hypot_at_origin": (jg.hypot, ([0.0, 3.0], [0.0, 4.0]), 1.0, [[NAN, 0.6], [NAN, 0.8]]),
    "nextafter": (jg.nextafter, ([1.0, 0.0], [0.5, 0.5]), 1.0, [[1, 1], [0, 0]]),
    "i1_at_0": (jg.special.i1, ([0.0],), 1.0, [[0.5]]),
    "acosh_at_1": (jg.acosh, ([1.0],), 1.0, [[INF]]),
}


@pytest.mark.parametrize("name", GRADIENTS)
def test_gradient_conventions(name):
    fn, arrays, upstream, expected = GRADIENTS[name]
    for got, want in zip(_grads(fn, *arrays, upstream=upstream), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_float_power_gradient_has_the_input_dtype():
    x = jg.ones(2, requires_grad=True)
    jg.float_power(x, 2).sum().backward()
    assert x.grad.dtype == jg.float32
    np.testing.assert_array_equal(_values(x.grad), [2.0, 2.0])


IN_PLACE_UNARY = ["sinh", "cosh", "asinh", "atanh", "asin", "acos", "atan", "arcsinh",
                  "arctanh", "arcsin", "arccos", "arctan", "exp2", "erfc", "erfinv", "lgamma",
                  "digamma", "i0", "sinc", "logit", "deg2rad", "rad2deg", "sgn"]
IN_PLACE_BINARY = ["copysign", "hypot", "xlogy", "ldexp", "nextafter", "arctan2"]


@pytest.mark.parametrize("name", IN_PLACE_UNARY + IN_PLACE_BINARY)
def test_in_place_variant_matches_the_function_and_its_gradient(name):
    rng = np.random.default_rng(0)
    data = rng.uniform(0.1, 0.9, size=(2, 3))
    other = rng.uniform(0.5, 1.5, size=(3,))
    args = (jg.tensor(other),) if name in IN_PLACE_BINARY else ()
    expected = getattr(jg.tensor(data), name)(*args)
    leaf = jg.tensor(data, requires_grad=True)
    y = leaf * 1
    out = getattr(y, f"{name}_")(*args)
    assert out is y
    np.testing.assert_allclose(_values(y), _values(expected), rtol=1e-12)
    y.sum().backward()
    leaf2 = jg.tensor(data, requires_grad=True)
    getattr(leaf2 * 1, name)(*args).sum().backward()
    np.testing.assert_allclose(_values(leaf.grad), _values(leaf2.grad), rtol=1e-12)


def test_polygamma_method_and_in_place_take_n_first():
    x = jg.tensor([1.0, 2.0], dtype=jg.float64)
    expected = [math.pi ** 2 / 6, math.pi ** 2 / 6 - 1]  # trigamma(1), trigamma(2)
    np.testing.assert_allclose(_values(x.polygamma(1)), expected, rtol=1e-12)
    np.testing.assert_allclose(_values(x.clone().polygamma_(1)), expected, rtol=1e-12)


SECOND_DERIVATIVES = {
    "sinh": (jg.sinh, np.sinh), "cosh": (jg.cosh, np.cosh),
    "atan": (jg.atan, lambda x: -2 * x / (1 + x * x) ** 2),
    "asinh": (jg.asinh, lambda x: -x / (x * x + 1) ** 1.5),
    "exp2": (jg.exp2, lambda x: 2 ** x * math.log(2) ** 2),
    "erfinv": (jg.erfinv, None), "lgamma": (jg.lgamma, None), "digamma": (jg.digamma, None),
    "i0": (jg.i0, None), "sinc": (jg.sinc, None), "logit": (jg.logit, None),
    "xlogy_in_y": (lambda x: jg.xlogy(jg.tensor(0.7, dtype=jg.float64), x),
                   lambda x: -0.7 / x ** 2),
}


@pytest.mark.parametrize("name", SECOND_DERIVATIVES)
def test_second_derivative_matches_finite_differences(name):
    fn, closed_form = SECOND_DERIVATIVES[name]
    point, eps = 0.4, 1e-6

    def first(at):
        x = jg.tensor(at, dtype=jg.float64, requires_grad=True)
        (g,) = jg.autograd.grad(fn(x), x, create_graph=True)
        return x, g
    x, g = first(point)
    (gg,) = jg.autograd.grad(g, x)
    numerical = (first(point + eps)[1].item() - first(point - eps)[1].item()) / (2 * eps)
    np.testing.assert_allclose(gg.item(), numerical, rtol=1e-5)
    if closed_form is not None:
        np.testing.assert_allclose(gg.item(), closed_form(point), rtol=1e-6)


SPECIAL = {"expit": "sigmoid", "psi": "digamma", "gammaln": "lgamma", "erfc": "erfc",
           "erfinv": "erfinv", "exp2": "exp2", "logit": "logit", "sinc": "sinc", "i0": "i0"}


@pytest.mark.parametrize("name", SPECIAL)
def test_special_namespace_names_the_same_ops(name):
    x = jg.tensor([0.25, 0.5])
    np.testing.assert_array_equal(_values(getattr(jg.special, name)(x)),
                                  _values(getattr(jg, SPECIAL[name])(x)))
