"""Semantics of pointwise ops, comparisons and activations that the op table cannot show:
dtype promotion, gradients at edge points, NaN conventions and error messages.

Expected values were measured in PyTorch 2.13.0+cpu (research/eager_autograd.md §2, §4).
"""

import math

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck

NAN = float("nan")


def _grads(fn, *values, dtype=jg.float32):
    """Gradients of fn(*inputs).sum() for leaves built from `values`."""
    leaves = [jg.tensor(v, dtype=dtype, requires_grad=True) for v in values]
    fn(*leaves).sum().backward()
    return [leaf.grad.numpy() for leaf in leaves]


# ----- dtype promotion (§2.0) --------------------------------------------------------

PROMOTION = [
    ("int/int", lambda: jg.tensor([1, 2]) / jg.tensor([2, 2]), jg.float32),
    ("int/2", lambda: jg.tensor([1, 2]) / 2, jg.float32),
    ("int*2.5", lambda: jg.tensor([1, 2]) * 2.5, jg.float32),
    ("f32*0d f64", lambda: jg.tensor([1.0]) * jg.tensor(2.0, dtype=jg.float64), jg.float32),
    ("f32*numpy f64 scalar", lambda: jg.tensor([1.0]) * np.float64(2.0), jg.float32),
    ("int32+int64 0d", lambda: jg.tensor([1], dtype=jg.int32) + jg.tensor(2), jg.int32),
    ("int32+int64 1d", lambda: jg.tensor([1], dtype=jg.int32) + jg.tensor([2]), jg.int64),
    ("bool+int", lambda: jg.tensor([True]) + jg.tensor([2]), jg.int64),
    ("bool+bool", lambda: jg.tensor([True]) + jg.tensor([True]), jg.bool),
    ("bool+1", lambda: jg.tensor([True]) + 1, jg.int64),
    ("bool*1.5", lambda: jg.tensor([True]) * 1.5, jg.float32),
    ("uint8+int8", lambda: jg.tensor([1], dtype=jg.uint8) + jg.tensor([1], dtype=jg.int8),
     jg.int16),
    ("uint8-int64 0d", lambda: jg.tensor([1], dtype=jg.uint8) - jg.tensor(3), jg.uint8),
    ("f16*2.0", lambda: jg.tensor([1.0], dtype=jg.float16) * 2.0, jg.float16),
    ("f16*0d f32", lambda: jg.tensor([1.0], dtype=jg.float16) * jg.tensor(2.0), jg.float16),
    ("f16*1d f32", lambda: jg.tensor([1.0], dtype=jg.float16) * jg.tensor([2.0]), jg.float32),
    ("int 0d*f32", lambda: jg.tensor(2) * jg.tensor([1.0]), jg.float32),
    ("f64 0d+int", lambda: jg.tensor(2.0, dtype=jg.float64) + jg.tensor([1]), jg.float64),
    ("exp(int)", lambda: jg.exp(jg.tensor([1])), jg.float32),
    ("sqrt(int)", lambda: jg.sqrt(jg.tensor([1])), jg.float32),
    ("sigmoid(f16)", lambda: jg.sigmoid(jg.tensor([1.0], dtype=jg.float16)), jg.float16),
    ("erf(int32)", lambda: jg.erf(jg.tensor([1], dtype=jg.int32)), jg.float32),
    ("int**2", lambda: jg.tensor([1, 2]) ** 2, jg.int64),
    ("int**2.0", lambda: jg.tensor([1, 2]) ** 2.0, jg.float32),
    ("2**int", lambda: 2 ** jg.tensor([1, 2]), jg.int64),
    ("2.0**int", lambda: 2.0 ** jg.tensor([1, 2]), jg.float32),
    ("f16**2.0", lambda: jg.tensor([1.0], dtype=jg.float16) ** 2.0, jg.float16),
    ("square(bool)", lambda: jg.square(jg.tensor([True])), jg.int64),
    ("int%2", lambda: jg.tensor([3]) % 2, jg.int64),
    ("int%2.5", lambda: jg.tensor([3]) % 2.5, jg.float32),
    ("fmod(int, 1.5)", lambda: jg.fmod(jg.tensor([3]), 1.5), jg.float32),
    ("int//2", lambda: jg.tensor([5, 3]) // 2, jg.int64),
    ("int//2.0", lambda: jg.tensor([3]) // 2.0, jg.float32),
    ("div trunc int", lambda: jg.div(jg.tensor([7]), 2, rounding_mode="trunc"), jg.int64),
    ("atan2(int)", lambda: jg.atan2(jg.tensor([1]), jg.tensor([1])), jg.float32),
    ("floor(int)", lambda: jg.floor(jg.tensor([1])), jg.int64),
    ("abs(int)", lambda: jg.abs(jg.tensor([-1])), jg.int64),
    ("sign(bool)", lambda: jg.sign(jg.tensor([True])), jg.bool),
    ("where(int, f32)", lambda: jg.where(jg.tensor([True]), jg.tensor([1]), jg.tensor([1.0])),
     jg.float32),
    ("where(1.0, 0.0)", lambda: jg.where(jg.tensor([True, False]), 1.0, 0.0), jg.float32),
    ("where(1, 0)", lambda: jg.where(jg.tensor([True, False]), 1, 0), jg.int64),
    ("where(int, 0.5)", lambda: jg.where(jg.tensor([True]), jg.tensor([1]), 0.5), jg.float32),
    ("where(f16, 2.0)", lambda: jg.where(jg.tensor([True]), jg.tensor([1.0], dtype=jg.float16),
                                         2.0), jg.float16),
    ("where(f32, f64 0d)", lambda: jg.where(jg.tensor([True]), jg.tensor([1.0]),
                                            jg.tensor(2.0, dtype=jg.float64)), jg.float32),
    ("clamp(int, 0.5)", lambda: jg.clamp(jg.tensor([1]), 0.5), jg.float32),
    ("clamp(int, 2)", lambda: jg.clamp(jg.tensor([1, 5]), min=2), jg.int64),
    ("maximum(int, f32)", lambda: jg.maximum(jg.tensor([1]), jg.tensor([1.0])), jg.float32),
    ("masked_fill(f32, f64 0d)", lambda: jg.tensor([1.0, 2.0]).masked_fill(
        jg.tensor([True, False]), jg.tensor(3.0, dtype=jg.float64)), jg.float32),
    ("addcmul(f32, f64)", lambda: jg.addcmul(jg.tensor([1.0]), jg.tensor([2.0], dtype=jg.float64),
                                            jg.tensor([3.0])), jg.float64),
    ("relu(int)", lambda: jg.relu(jg.tensor([1, -5])), jg.int64),
    ("hardtanh(int)", lambda: jg.hardtanh(jg.tensor([1, 5])), jg.int64),
    ("int < float", lambda: jg.tensor([1]) < jg.tensor([1.5]), jg.bool),
]


@pytest.mark.parametrize("make, expected", [(m, e) for _, m, e in PROMOTION],
                         ids=[name for name, _, _ in PROMOTION])
def test_result_dtype_follows_pytorch(make, expected):
    assert make().dtype == expected


def test_integer_results_keep_exact_values():
    np.testing.assert_array_equal(jg.div(jg.tensor([-7, 7]), 2, rounding_mode="trunc").numpy(),
                                  [-3, 3])
    np.testing.assert_array_equal(jg.div(jg.tensor([-7, 7]), 2, rounding_mode="floor").numpy(),
                                  [-4, 3])
    np.testing.assert_array_equal((jg.tensor([-7, 7]) % 3).numpy(), [2, 1])
    np.testing.assert_array_equal((jg.tensor([-7.0, 7.0]) % -3).numpy(), [-1.0, -2.0])
    np.testing.assert_array_equal(jg.fmod(jg.tensor([-7.0, 7.0]), -3).numpy(), [-1.0, 1.0])
    np.testing.assert_array_equal((7 % jg.tensor([2, 3])).numpy(), [1, 1])
    np.testing.assert_array_equal(jg.tensor([1, 5]).masked_fill(jg.tensor([True, False]),
                                                                3.7).numpy(), [3, 5])
    np.testing.assert_array_equal(jg.hardtanh(jg.tensor([-4, 0, 5])).numpy(), [-1, 0, 1])


def test_comparisons_compute_in_the_promoted_dtype():
    np.testing.assert_array_equal((jg.tensor([1, 2]) == 1.5).numpy(), [False, False])
    assert (jg.tensor([0.1]) == 0.1).item()  # 0.1 is rounded to float32 like the tensor
    assert (jg.tensor([3], dtype=jg.int32) > 2.5).item()
    assert not (jg.tensor([1.5], dtype=jg.float64) > jg.tensor(1.5)).item()
    assert (jg.tensor([1], dtype=jg.uint8) < -1).item() is True  # -1 wraps to 255 (torch 2.13)
    out = jg.tensor([1.0, 2.0], requires_grad=True) > 1
    assert out.dtype == jg.bool and not out.requires_grad and out.grad_fn is None


def test_comparison_operators_with_foreign_objects_are_false():
    t = jg.tensor([1.0, 2.0])
    assert (t == None) is False  # noqa: E711 - the behaviour under test
    assert (t == "a") is False
    assert (t != "a") is True


# ----- unary edge conventions (§2.2) -------------------------------------------------


def test_abs_and_relu_have_zero_gradient_at_zero():
    assert _grads(jg.abs, [0.0, -2.0, 3.0])[0].tolist() == [0.0, -1.0, 1.0]
    assert _grads(jg.relu, [0.0, -2.0, 3.0])[0].tolist() == [0.0, 0.0, 1.0]
    assert _grads(jg.abs, [NAN])[0].tolist() == [0.0]  # sign(nan) = 0 in the backward too


def test_sign_of_nan_is_zero_and_rounding_ops_have_zero_gradients_that_require_grad():
    np.testing.assert_array_equal(jg.sign(jg.tensor([NAN, -0.0, 0.0, -3.0])).numpy(),
                                  [0.0, 0.0, 0.0, -1.0])
    for fn in (jg.sign, jg.floor, jg.ceil, jg.round, jg.trunc):
        x = jg.tensor([1.5, -2.5], requires_grad=True)
        y = fn(x)
        assert y.requires_grad and y.grad_fn is not None
        y.sum().backward()
        assert x.grad.tolist() == [0.0, 0.0]
    assert _grads(jg.frac, [1.5, -2.25])[0].tolist() == [1.0, 1.0]


def test_round_is_half_to_even_with_decimals():
    np.testing.assert_array_equal(jg.round(jg.tensor([0.5, 1.5, 2.5, -0.5, -1.5])).numpy(),
                                  [0.0, 2.0, 2.0, -0.0, -2.0])
    np.testing.assert_allclose(jg.round(jg.tensor([1.25, 2.5, 0.125]), decimals=1).numpy(),
                               [1.2, 2.5, 0.1], rtol=1e-6)
    np.testing.assert_array_equal(jg.round(jg.tensor([125.0, 135.0]), decimals=-1).numpy(),
                                  [120.0, 140.0])


def test_sqrt_and_log_at_zero_give_infinite_gradients():
    assert _grads(jg.sqrt, [0.0])[0].tolist() == [math.inf]
    assert _grads(jg.log, [0.0])[0].tolist() == [math.inf]
    np.testing.assert_array_equal(jg.rsqrt(jg.tensor([0.0, -1.0])).numpy(), [math.inf, NAN])


def test_saturated_sigmoid_and_logsigmoid_stay_finite():
    x = jg.tensor([-1000.0, 1000.0, 0.0], requires_grad=True)
    y = jg.sigmoid(x)
    y.sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), [0.0, 1.0, 0.5])
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.25])
    x = jg.tensor([-1000.0, 1000.0, 0.0], requires_grad=True)
    y = jg.logsigmoid(x)
    y.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), [-1000.0, 0.0, -math.log(2)], rtol=1e-6)
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 0.5])


def test_nan_to_num_replaces_and_blocks_gradient_where_not_finite():
    x = jg.tensor([NAN, math.inf, -math.inf, 1.0], requires_grad=True)
    y = jg.nan_to_num(x, nan=0.5)
    big = float(np.finfo(np.float32).max)
    np.testing.assert_array_equal(y.detach().numpy(), [0.5, big, -big, 1.0])
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 1.0]
    assert jg.nan_to_num(jg.tensor([math.inf], dtype=jg.float16)).item() == 65504.0
    x = jg.tensor([0.0, 1.0], requires_grad=True)
    jg.nan_to_num(jg.log(x)).sum().backward()  # 0 * inf upstream: NaN, as PyTorch
    np.testing.assert_array_equal(x.grad.numpy(), [NAN, 1.0])


# ----- activations (§2.2) ------------------------------------------------------------

ACTIVATION_GRADS = [  # values and gradients at [0, 1, -1, 30, -30, 25], PyTorch float64
    ("gelu", jg.gelu, [0.0, 0.84134475, -0.15865525, 30.0, -0.0, 25.0],
     [0.5, 1.08331547, -0.0833154706, 1.0, -4.42093840e-195, 1.0]),
    ("gelu_tanh", lambda x: jg.gelu(x, approximate="tanh"),
     [0.0, 0.84119199, -0.15880801, 30.0, -0.0, 25.0],
     [0.5, 1.08296408, -0.08296408, 1.0, 0.0, 1.0]),
    ("silu", jg.silu, [0.0, 0.731058579, -0.268941421, 30.0, -2.80728689e-12, 25.0],
     [0.5, 0.927670512, 0.0723294881, 1.0, -2.71371066e-12, 1.0]),
    ("softplus", jg.softplus, [0.693147181, 1.31326169, 0.313261688, 30.0, 9.35762297e-14, 25.0],
     [0.5, 0.731058579, 0.268941421, 1.0, 9.35762297e-14, 1.0]),
    ("softplus_beta2", lambda x: jg.softplus(x, beta=2, threshold=10),
     [0.34657359, 1.06346401, 0.0634640055, 30.0, 4.37825538e-27, 25.0],
     [0.5, 0.880797078, 0.119202922, 1.0, 8.75651076e-27, 1.0]),
    ("logsigmoid", jg.logsigmoid,
     [-0.693147181, -0.313261688, -1.31326169, -9.35762297e-14, -30.0, -1.38879439e-11],
     [0.5, 0.268941421, 0.731058579, 9.35762297e-14, 1.0, 1.38879439e-11]),
    ("leaky_relu", lambda x: jg.leaky_relu(x, 0.1), [0.0, 1.0, -0.1, 30.0, -3.0, 25.0],
     [0.1, 1.0, 0.1, 1.0, 0.1, 1.0]),
    ("relu6", jg.relu6, [0.0, 1.0, 0.0, 6.0, 0.0, 6.0], [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]),
]


@pytest.mark.parametrize("fn, values, grads", [c[1:] for c in ACTIVATION_GRADS],
                         ids=[c[0] for c in ACTIVATION_GRADS])
def test_activation_values_and_gradients_match_pytorch(fn, values, grads):
    x = jg.tensor([0.0, 1.0, -1.0, 30.0, -30.0, 25.0], dtype=jg.float64, requires_grad=True)
    y = fn(x)
    y.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), values, rtol=1e-7, atol=0)  # 9 digits kept
    np.testing.assert_allclose(x.grad.numpy(), grads, rtol=1e-7, atol=0)


def test_softplus_gradient_is_exactly_one_in_the_linear_region():
    assert _grads(jg.softplus, [30.0, 20.5])[0].tolist() == [1.0, 1.0]


def test_elu_gradient_at_zero_is_alpha():
    assert _grads(lambda x: jg.elu(x, alpha=2.0), [0.0, 1.0])[0].tolist() == [2.0, 1.0]


def test_clamp_is_inclusive_and_hardtanh_exclusive_at_the_bounds():
    assert _grads(lambda x: jg.clamp(x, 1.0, 3.0), [1.0, 2.0, 3.0])[0].tolist() == [1.0, 1.0, 1.0]
    assert _grads(lambda x: x.clamp(min=0.0), [0.0])[0].tolist() == [1.0]
    assert _grads(jg.hardtanh, [-1.0, 1.0, 0.0])[0].tolist() == [0.0, 0.0, 1.0]
    assert _grads(jg.relu6, [0.0, 6.0, 3.0])[0].tolist() == [0.0, 0.0, 1.0]


def test_clamp_lets_nan_through_with_zero_gradient_and_hardtanh_passes_gradient():
    x = jg.tensor([NAN, 5.0, 0.0, 3.0, 0.5], requires_grad=True)
    y = jg.clamp(x, 1.0, 2.0)
    np.testing.assert_array_equal(y.detach().numpy(), [NAN, 2.0, 1.0, 2.0, 1.0])
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 0.0, 0.0]
    assert _grads(jg.hardtanh, [NAN, -1.0, 1.0])[0].tolist() == [1.0, 0.0, 0.0]


def test_clamp_tensor_bounds_give_ties_to_the_input_and_skip_a_crossed_min():
    # x=2 with min=3 > max=1 gives max; the crossed min gets nothing (PyTorch)
    gx, glo, ghi = _grads(jg.clamp, [0.0, 1.0, 2.0, 3.0], [1.0, 1.0, 3.0, 0.0],
                          [2.0, 2.0, 1.0, 3.0])
    assert gx.tolist() == [0.0, 1.0, 0.0, 1.0]
    assert glo.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert ghi.tolist() == [0.0, 0.0, 1.0, 0.0]


# ----- binary edge conventions (§2.3, §4 case 6) ---------------------------------------


def test_maximum_and_minimum_split_ties_and_propagate_nan():
    ga, gb = _grads(jg.maximum, [1.0, 2.0], [1.0, 3.0])
    assert ga.tolist() == [0.5, 0.0] and gb.tolist() == [0.5, 1.0]
    ga, gb = _grads(jg.minimum, [1.0, 2.0], [1.0, 3.0])
    assert ga.tolist() == [0.5, 1.0] and gb.tolist() == [0.5, 0.0]
    a = jg.tensor([NAN, 1.0, 2.0], requires_grad=True)
    b = jg.tensor([1.0, NAN, 2.0], requires_grad=True)
    y = jg.maximum(a, b)
    np.testing.assert_array_equal(y.detach().numpy(), [NAN, NAN, 2.0])
    y.sum().backward()  # PyTorch gives the full gradient to both sides of a NaN
    assert a.grad.tolist() == [1.0, 1.0, 0.5] and b.grad.tolist() == [1.0, 1.0, 0.5]


def test_pow_scalar_exponent_edges():
    x = [0.0, 2.0, -2.0]
    assert _grads(lambda t: t ** 0, x)[0].tolist() == [0.0, 0.0, 0.0]
    assert _grads(lambda t: t ** 2, x)[0].tolist() == [0.0, 4.0, -4.0]
    np.testing.assert_allclose(_grads(lambda t: t ** 0.5, x)[0], [math.inf, 0.35355339, NAN],
                               rtol=1e-6)
    np.testing.assert_allclose(_grads(lambda t: t ** 1.5, x)[0], [0.0, 2.12132034, NAN],
                               rtol=1e-6)
    assert _grads(lambda t: t ** -1, x)[0].tolist() == [-math.inf, -0.25, -0.25]


def test_pow_tensor_exponent_masks_the_exponent_gradient_at_zero_base():
    base, exponent = [0.0, 0.0, 2.0, -2.0, 0.0], [0.0, 2.0, 2.0, 2.0, -1.0]
    a = jg.tensor(base, requires_grad=True)
    b = jg.tensor(exponent, requires_grad=True)
    y = a ** b
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, 0.0, 4.0, 4.0, math.inf])
    y.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [0.0, 0.0, 4.0, -4.0, -math.inf])
    np.testing.assert_allclose(b.grad.numpy(), [0.0, 0.0, 2.7725887, NAN, -math.inf], rtol=1e-6)
    assert _grads(lambda t: 0.0 ** t, [0.0, 2.0, -1.0])[0].tolist() == [0.0, 0.0, -math.inf]
    np.testing.assert_allclose(_grads(lambda t: 2 ** t, [0.0, 2.0, -1.0])[0],
                               [0.6931472, 2.7725887, 0.3465736], rtol=1e-6)


def test_integer_pow_follows_pytorch():
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed."):
        jg.tensor([1, 2]) ** -1
    base = jg.tensor([0, 1, -1, 2, -2])
    np.testing.assert_array_equal(jg.pow(base, jg.tensor([-1, -1, -1, -1, -3])).numpy(),
                                  [0, 1, -1, 0, 0])
    np.testing.assert_array_equal(jg.pow(base, jg.tensor([-2] * 5)).numpy(), [0, 1, 1, 0, 0])
    np.testing.assert_array_equal(jg.pow(jg.tensor([2, 3]), jg.tensor([0, 2])).numpy(), [1, 9])
    np.testing.assert_array_equal((2 ** jg.tensor([-1, 1])).numpy(), [0, 2])


def test_where_leaks_nan_from_the_untaken_branch_as_pytorch():
    # §4 case 2: t = 0 makes t * (x / t) NaN in the untaken branch
    x = jg.tensor(1.0, requires_grad=True)
    t = jg.tensor(0.0)
    z = jg.where(x >= t, x, t * (x / t))
    z.backward()
    assert z.item() == 1.0 and math.isnan(x.grad.item())
    assert np.isnan(_grads(lambda v: jg.where(v > 0, jg.sqrt(v), v), [-1.0, -4.0])[0]).all()
    np.testing.assert_array_equal(_grads(lambda v: jg.where(v > 0, jg.log(v), v), [0.0, 2.0])[0],
                                  [NAN, 0.5])


def test_double_where_guards_the_gradient():
    def safe_log(v):
        return jg.where(v > 0, jg.log(jg.where(v > 0, v, 1.0)), v)
    assert _grads(safe_log, [0.0, 2.0])[0].tolist() == [1.0, 0.5]


def test_nan_depends_on_the_formula_behind_where():
    # §4 case 3: x * sqrt(x) has a NaN gradient at 0, x ** 1.5 (masked pow) does not
    assert math.isnan(_grads(lambda v: jg.where(v == 0, 0.0, v * v.sqrt()), [0.0])[0][0])
    assert _grads(lambda v: jg.where(v == 0, 0.0, v ** 1.5), [0.0])[0].tolist() == [0.0]


def test_where_with_only_a_condition_is_nonzero():
    rows, cols = jg.where(jg.tensor([[True, False], [False, True]]))
    assert rows.tolist() == [0, 1] and cols.tolist() == [0, 1]


def test_masked_fill_value_tensor_gets_the_sum_of_filled_gradients():
    x = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = jg.tensor(5.0, requires_grad=True)
    y = x.masked_fill(jg.tensor([True, False, True]), v)
    assert y.tolist() == [5.0, 2.0, 5.0]
    (y * jg.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 0.0] and v.grad.item() == 4.0


def test_masked_fill_broadcasts_mask_over_input():
    y = jg.tensor([1.0, 2.0]).masked_fill(jg.tensor([[True, False], [False, True]]), 0.0)
    assert y.tolist() == [[0.0, 2.0], [1.0, 0.0]]


def test_atan2_gradients_at_the_origin_are_zero():
    gx, gy = _grads(jg.atan2, [0.0, 0.0], [0.0, 1.0])
    assert gx.tolist() == [0.0, 1.0] and gy.tolist() == [0.0, 0.0]


def test_remainder_and_fmod_gradients():
    ga, gb = _grads(jg.remainder, [1.5, -2.5], [2.0, 2.0])
    assert ga.tolist() == [1.0, 1.0] and gb.tolist() == [0.0, 2.0]
    ga, gb = _grads(jg.fmod, [1.5, -2.5], [2.0, 2.0])
    assert ga.tolist() == [1.0, 1.0] and gb.tolist() == [0.0, 1.0]


def test_rounding_division_has_zero_gradient_and_floor_divide_none():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = jg.div(x, 2, rounding_mode="floor")
    assert y.requires_grad
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]
    y = x // 2
    assert y.requires_grad and y.tolist() == [0.0, 1.0]
    with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not implemented"):
        y.sum().backward()


def test_float_division_by_zero_follows_ieee_and_integer_raises():
    np.testing.assert_array_equal((jg.tensor([1.0, 2.0]) // 0.0).numpy(), [math.inf, math.inf])
    assert jg.floor_divide(jg.tensor(1.0), 0.1).item() == 9.0  # Python's 1.0 // 0.1
    np.testing.assert_array_equal(jg.div(jg.tensor([-7.0, 7.0, 0.0]), 0,
                                         rounding_mode="trunc").numpy(), [-math.inf, math.inf, NAN])
    for fn in (lambda: jg.tensor([1, 2]) // jg.tensor([0, 1]), lambda: jg.tensor([1]) % 0,
               lambda: jg.fmod(jg.tensor([1]), 0),
               lambda: jg.div(jg.tensor([7]), 0, rounding_mode="trunc")):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn()


def test_lerp_addcmul_addcdiv_match_pytorch_bits_in_float32():
    # PyTorch fuses these into multiply-adds; results match its float32 values exactly
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 1000)).astype(np.float32)
    c = rng.uniform(0.5, 2.0, 1000).astype(np.float32)
    ta, tb, tc = jg.from_numpy(a), jg.from_numpy(b), jg.from_numpy(c)
    for weight in (0.1, 0.7):
        w = np.float32(weight)
        small = abs(w) < 0.5
        fused = ((w if small else w - np.float32(1)).astype(np.float64) * (b - a)
                 + (a if small else b)).astype(np.float32)
        np.testing.assert_array_equal(jg.lerp(ta, tb, weight).numpy(), fused)
    fused = ((np.float32(0.5) * b).astype(np.float64) * c + a).astype(np.float32)
    np.testing.assert_array_equal(jg.addcmul(ta, tb, tc, value=0.5).numpy(), fused)
    np.testing.assert_array_equal(jg.addcdiv(ta, tb, tc, value=0.5).numpy(),
                                  a + np.float32(0.5) * b / c)


# ----- errors -------------------------------------------------------------------------


def test_errors_keep_pytorch_texts():
    t = jg.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks, but got "
                                           "mask with dtype long int"):
        t.masked_fill(jg.tensor([1, 0]), 0.0)
    with pytest.raises(RuntimeError, match="only supports a 0-dimensional value tensor, but got "
                                           r"tensor with 1 dimension\(s\)"):
        t.masked_fill(jg.tensor([True, False]), jg.tensor([3.0]))
    with pytest.raises(RuntimeError, match="where expected condition to be a boolean tensor, but "
                                           "got a tensor with dtype Long"):
        jg.where(jg.tensor([1, 0]), t, t)
    with pytest.warns(UserWarning, match="where received a uint8 condition tensor"):
        out = jg.where(jg.tensor([1, 0], dtype=jg.uint8), t, t * 10)
    assert out.tolist() == [1.0, 20.0]
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor is not "
                                           "supported"):
        _ = -jg.tensor([True])
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        jg.clamp(t)
    with pytest.raises(RuntimeError, match="div expected rounding_mode to be one of None, "
                                           "'trunc', or 'floor' but found 'bad'"):
        jg.div(t, 2, rounding_mode="bad")
    with pytest.raises(RuntimeError, match="expected dtype float for `end` but got dtype double"):
        jg.lerp(t, jg.tensor([2.0, 3.0], dtype=jg.float64), 0.5)
    with pytest.raises(RuntimeError, match="Float did not match Double"):
        jg.isclose(t, t.double())
    with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
        jg.addcdiv(jg.tensor([1]), jg.tensor([2]), jg.tensor([3]))
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh."):
        jg.gelu(t, approximate="x")
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        jg.hardtanh(t, 2.0, 1.0)
    with pytest.raises(TypeError, match=r"maximum\(\): argument 'other' \(position 2\) must be "
                                        "Tensor, not float"):
        jg.maximum(t, 2.0)
    with pytest.raises(TypeError, match=r"~ \(operator.invert\) is only implemented on integer"):
        _ = ~t
    with pytest.raises(RuntimeError, match=r"the size of tensor a \(3\) must match the size of "
                                           r"tensor b \(2\) at non-singleton dimension 0"):
        jg.where(jg.tensor([True, False, True]), t, 0.0)
    with pytest.raises(RuntimeError, match=r"the size of tensor a \(4\) must match the size of "
                                           r"tensor b \(2\) at non-singleton dimension 1"):
        jg.addcmul(jg.ones(3, 1), jg.ones(4), jg.ones(3, 2))


@pytest.mark.parametrize("fn, kernel, dtype", [
    (jg.frac, "frac_cpu", "Long"),
    (lambda t: jg.round(t, decimals=1), "round_cpu", "Long"),
    (jg.leaky_relu, "leaky_relu_cpu", "Long"),
    (jg.gelu, "GeluKernelImpl", "Long"),
    (lambda t: jg.bitwise_and(t.float(), t.float()), "bitwise_and_cpu", "Float"),
    (lambda t: t.float() & 1, "bitwise_and_cpu", "Float"),
    (lambda t: jg.lerp(t, t, 0.5), "lerp_kernel_scalar", "Long"),
])
def test_missing_dtype_kernels_raise_not_implemented(fn, kernel, dtype):
    with pytest.raises(NotImplementedError, match=f"\"{kernel}\" not implemented for '{dtype}'"):
        fn(jg.tensor([1, 2]))


def test_whole_tensor_comparisons_return_python_bools():
    assert jg.equal(jg.tensor([1]), jg.tensor([1.0])) is True
    assert jg.equal(jg.tensor([1, 2]), jg.tensor([[1, 2]])) is False
    assert jg.equal(jg.tensor([NAN]), jg.tensor([NAN])) is False
    assert jg.allclose(jg.tensor([1.0, math.inf]), jg.tensor([1.0 + 1e-7, math.inf])) is True
    assert jg.allclose(jg.tensor([NAN]), jg.tensor([NAN]), equal_nan=True) is True
    assert jg.isclose(jg.tensor([1]), jg.tensor([1])).tolist() == [True]


def test_logical_and_bitwise_dtypes():
    assert jg.logical_and(jg.tensor([1.0, 0.0]), jg.tensor([2, 3])).tolist() == [True, False]
    assert jg.logical_not(jg.tensor([0.0, 2.0])).tolist() == [True, False]
    assert (jg.tensor([1, 2]) & jg.tensor([True, True])).dtype == jg.int64
    assert (jg.tensor([True]) & True).dtype == jg.bool
    assert (jg.tensor([3], dtype=jg.int32) | 1).dtype == jg.int32
    assert (jg.tensor([5]) ^ 3).tolist() == [6]
    assert (~jg.tensor([True, False])).tolist() == [False, True]
    assert (~jg.tensor([0, 5])).tolist() == [-1, -6]
    assert jg.isnan(jg.tensor([1])).tolist() == [False]


# ----- second derivatives through the Tensor namespace --------------------------------


def _double_backward(fn, *inputs):
    first = jg.autograd.grad(fn(*inputs).sum(), inputs, create_graph=True)
    total = first[0].sum()
    for g in first[1:]:
        total = total + g.sum()
    return first, jg.autograd.grad(total, inputs)


def test_second_derivatives_match_pytorch():
    x = jg.tensor([[0.5, -1.0], [2.0, 0.0]], dtype=jg.float64, requires_grad=True)
    _, (h,) = _double_backward(jg.gelu, x)
    np.testing.assert_allclose(h.numpy(), [[0.6161, 0.2420], [-0.1080, 0.7979]], atol=1e-4)
    _, (h,) = _double_backward(jg.silu, x)
    np.testing.assert_allclose(h.numpy(), [[0.4412, 0.3024], [0.0501, 0.5000]], atol=1e-4)

    def mixed(a, b):
        return (jg.sigmoid(a) * a.abs() ** b + jg.maximum(a, b).sin()
                + jg.where(a > 0, a.sqrt().abs(), a.erf()))
    a = jg.tensor([1.5, -2.0, 0.7], dtype=jg.float64, requires_grad=True)
    b = jg.tensor([0.5, 2.0, 3.0], dtype=jg.float64, requires_grad=True)
    (ga, gb), (ha, hb) = _double_backward(mixed, a, b)
    np.testing.assert_allclose(ga.detach().numpy(), [0.995425226623901, NAN, 1.6558978452939372])
    np.testing.assert_allclose(gb.detach().numpy(), [0.40600038153212403, -0.08564615929059127,
                                                     -1.0717382584097146])
    np.testing.assert_allclose(ha.numpy(), [-0.3621332610275159, NAN, 2.9557253915145068])
    np.testing.assert_allclose(hb.numpy(), [1.0415640458330515, -0.9580143047156556,
                                            -0.16201455721124172])


SECOND_ORDER = [
    ("abs_sign", lambda x: jg.abs(x) * x), ("log2", lambda x: jg.log2(x)),
    ("log10", jg.log10), ("log1p", jg.log1p), ("expm1", jg.expm1), ("sqrt", jg.sqrt),
    ("rsqrt", jg.rsqrt), ("reciprocal", jg.reciprocal), ("square", jg.square), ("tan", jg.tan),
    ("sin_cos", lambda x: jg.sin(x) * jg.cos(x)), ("erf", jg.erf), ("sigmoid", jg.sigmoid),
    ("pow_scalar", lambda x: x ** 2.5), ("rpow", lambda x: 1.7 ** x),
    ("pow_tensor", lambda x: x ** (x * 0.5)), ("clamp", lambda x: jg.clamp(x, 0.8, 1.6) * x),
    ("hardtanh", lambda x: jg.hardtanh(x, 0.8, 1.6) * x), ("gelu_tanh", lambda x: jg.gelu(
        x, approximate="tanh")), ("softplus", jg.softplus), ("elu", lambda x: jg.elu(x - 1.2)),
    ("leaky_relu", lambda x: jg.leaky_relu(x - 1.2, 0.2) * x), ("logsigmoid", jg.logsigmoid),
    ("atan2", lambda x: jg.atan2(x, x * x - 1.5)), ("lerp", lambda x: jg.lerp(x, x * x, x * 0.3)),
    ("addcmul", lambda x: jg.addcmul(x, x, x, value=0.5)), ("addcdiv", lambda x: jg.addcdiv(
        x, x * x, x + 1, value=2.0)), ("remainder", lambda x: jg.remainder(2.5 * x, x * x)),
    ("fmod", lambda x: jg.fmod(2.5 * x, x * x)), ("maximum", lambda x: jg.maximum(x, 1.3 - x) * x),
    ("where", lambda x: jg.where(x > 1.2, x * x, x.exp())),
    ("masked_fill", lambda x: (x * x).masked_fill(x > 1.2, 2.0) * x),
    ("nan_to_num", lambda x: jg.nan_to_num(x * x)),
    ("round_sign_zero_grads", lambda x: (jg.round(x) + jg.sign(x) + jg.floor(x)) * x),
    ("pow_zero", lambda x: x ** 0 * x),
    ("div_floor", lambda x: jg.div(x * 3, 0.7, rounding_mode="floor") * x),
]


@pytest.mark.parametrize("fn", [f for _, f in SECOND_ORDER], ids=[n for n, _ in SECOND_ORDER])
def test_first_derivative_is_itself_differentiable(fn):
    # gradcheck of the create_graph gradient = second derivative against finite differences
    def first_derivative(t):
        with jg.enable_grad():  # gradcheck evaluates finite differences under no_grad
            return jg.autograd.grad(fn(t).sum(), t, create_graph=True)[0]
    x = jg.tensor([0.55, 0.9, 1.45, 1.9], dtype=jg.float64, requires_grad=True)
    assert gradcheck(first_derivative, (x,))


@pytest.mark.parametrize("compute", [
    lambda m, i: 1 - m, lambda m, i: 1.0 - m, lambda m, i: m - 1, lambda m, i: i - m,
    lambda m, i: m - i, lambda m, i: i - True, lambda m, i: jg.rsub(m, 1),
    lambda m, i: i.clone().sub_(m),
], ids=["int-mask", "float-mask", "mask-int", "ints-mask", "mask-ints", "ints-True", "rsub",
        "sub_"])
def test_subtracting_a_bool_says_to_invert_the_mask(compute):
    # torch 2.13 raises for any bool operand of sub; `1 - mask` is the usual slip
    m, i = jg.tensor([True, False]), jg.tensor([1, 2])
    with pytest.raises(RuntimeError, match=r"^Subtraction, the `-` operator, with a bool tensor is "
                                           r"not supported\. If you are trying to invert a mask, use "
                                           r"the `~` or `logical_not\(\)` operator instead\.$"):
        compute(m, i)
    assert (~m).tolist() == [False, True] and (1 - m.long()).tolist() == [0, 1]


def test_subtracting_two_bools_says_to_use_xor():
    m = jg.tensor([True, False])
    for compute in (lambda: m - m, lambda: m - True, lambda: jg.sub(m, m)):
        with pytest.raises(RuntimeError, match=r"with two bool tensors is not supported\. Use the "
                                               r"`\^` or `logical_xor\(\)` operator instead\.$"):
            compute()
    assert (m ^ jg.tensor([True, True])).tolist() == [False, True]


def test_alpha_follows_pytorch():
    x = jg.tensor([1, -2, 3])
    assert jg.add(x, 0.3, alpha=2).dtype == jg.float32  # alpha scales a number as a number
    np.testing.assert_allclose(jg.add(x, 0.3, alpha=2).numpy(), [1.6, -1.4, 3.6], rtol=1e-6)
    assert jg.sub(x.float(), x, alpha=0.5).dtype == jg.float32
    with pytest.raises(RuntimeError, match="argument alpha must not be a floating point"):
        jg.add(x, x, alpha=0.5)
    with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results"):
        jg.sub(x, 1, alpha=True)
