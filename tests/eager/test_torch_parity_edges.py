"""Eager jitgrad against PyTorch 2.13 at the edges the eager-vs-torch fuzz campaign found
(tests.fuzz with `--torch`): inf, NaN, zeros and signed zeros, overlap, layouts, wrapping.

Expected values were measured on torch 2.13.0+cpu and are written down here, so the tests
need no torch.
"""

import math

import numpy as np
import pytest

import jitgrad as jg

INF, NAN = math.inf, math.nan


def _grad(x, fn, upstream=None):
    t = jg.tensor(np.array(x, dtype=np.float64), requires_grad=True)
    y = fn(t)
    y.backward(jg.ones_like(y) if upstream is None else jg.tensor(upstream, dtype=jg.float64))
    return t.grad.numpy()


# ----- prod / cumsum / cumprod backward at zeros and infinities ----------------------------

# (input, fn, upstream or None, torch 2.13's gradient)
SCAN_AND_PRODUCT_GRADS = {
    "prod_one_zero_and_inf": ([1.5, 0, INF, 2], lambda t: t.prod(), None, [NAN, INF, 0, NAN]),
    "prod_two_zeros_is_zero": ([0, 0, INF], lambda t: t.prod(), None, [0, 0, 0]),
    "prod_no_zero_divides": ([INF, 2, 3], lambda t: t.prod(), None, [NAN, INF, INF]),
    "prod_dim_zero_elsewhere": ([[2, INF], [0, 3]], lambda t: t.prod(1), None,
                                [[INF, 2], [3, 0]]),
    "prod_dim_no_zero": ([[2, INF], [1, 3]], lambda t: t.prod(1), None, [[INF, NAN], [3, 1]]),
    "prod_dim_two_zeros": ([[0, 0, INF], [1, 2, 3]], lambda t: t.prod(1), None,
                           [[NAN, NAN, 0], [6, 3, 2]]),
    "cumsum_inf_upstream": ([1, 2, 3], lambda t: t.cumsum(0), [1, INF, 1], [INF, INF, 1]),
    "cumprod_inf_after_zero": ([1.5, 0, INF, 0], lambda t: t.cumprod(0), [1, -2, 1, -2],
                               [1, NAN, 0, 0]),
    "cumprod_first_zero_at_0": ([-0.0, -2, -INF, 0, 0], lambda t: t.cumprod(0),
                                [1, -2, 1, -2, 1], [NAN, 0, 0, 0, 0]),
    "cumprod_no_zero_with_inf": ([3, -2, -2, 1.5, 3, -INF], lambda t: t.cumprod(0),
                                 [1, -2, 1, -2, 1, -2], [INF, -INF, -INF, INF, INF, NAN]),
    "cumprod_one_zero": ([2, 0, 3, 4], lambda t: t.cumprod(0), None, [1, 32, 0, 0]),
}


@pytest.mark.parametrize("name", SCAN_AND_PRODUCT_GRADS)
def test_product_and_scan_gradients_match_torch_at_zeros_and_infinities(name):
    x, fn, upstream, expected = SCAN_AND_PRODUCT_GRADS[name]
    np.testing.assert_array_equal(_grad(x, fn, upstream), np.array(expected, dtype=np.float64))


# ----- out-of-range indices that select nothing --------------------------------------------

IDS = [2, -1, 8]
EMPTY_RESULT_INDEXING = {  # torch 2.13 returns these shapes without reading the indices
    "column_of_0_rows": ((0, 5), lambda x: x[:, jg.tensor(IDS)], (0, 3)),
    "rows_of_0_columns": ((5, 0), lambda x: x[jg.tensor(IDS)], (3, 0)),
    "first_of_3d_with_0": ((2, 0, 3), lambda x: x[jg.tensor(IDS)], (3, 0, 3)),
    "last_of_3d_with_0": ((2, 0, 3), lambda x: x[..., jg.tensor(IDS)], (2, 0, 3)),
    "two_arrays_around_0": ((2, 0, 3), lambda x: x[jg.tensor(IDS), :, jg.tensor(IDS)], (3, 0)),
    "list_index": ((0, 5), lambda x: x[:, [8]], (0, 1)),
    "empty_index_broadcast": ((3, 4), lambda x: x[jg.tensor([5]), jg.tensor([], dtype=jg.int64)],
                              (0,)),
    # the broadcast indices are empty, so the dim of size 0 is never indexed
    "empty_broadcast_into_0": ((0, 3), lambda x: x[jg.tensor([[0], [0]]),
                                                   jg.tensor([], dtype=jg.int64)], (2, 0)),
    "empty_mask_into_0": ((0, 3, 2), lambda x: x[jg.tensor([[0], [0]]), 1,
                                                 jg.tensor([False, False])], (2, 0)),
}


@pytest.mark.parametrize("name", EMPTY_RESULT_INDEXING)
def test_out_of_range_index_selecting_nothing_returns_empty(name):
    shape, fn, expected = EMPTY_RESULT_INDEXING[name]
    assert tuple(fn(jg.zeros(shape)).shape) == expected


@pytest.mark.parametrize("fn", [lambda x: x[jg.tensor(IDS)], lambda x: x[:, :, jg.tensor([0])],
                                lambda x: x[jg.tensor([0]), jg.tensor([0])]],
                         ids=["dim0", "dim2", "two"])
def test_index_into_a_dim_of_size_0_raises_even_if_nothing_is_selected(fn):
    with pytest.raises(IndexError, match="index is out of bounds for dimension with size 0"):
        fn(jg.zeros((0, 3, 0)))


def test_setitem_at_out_of_range_indices_of_an_empty_region_is_a_no_op():
    x = jg.zeros((0, 5))
    x[:, jg.tensor(IDS)] = 1.0
    y = jg.zeros((5, 0))
    y[jg.tensor(IDS)] = 1.0
    assert tuple(x.shape) == (0, 5) and tuple(y.shape) == (5, 0)


def test_index_still_checked_when_something_is_selected():
    with pytest.raises(IndexError, match="index 8 is out of bounds for dimension 0 with size 3"):
        jg.zeros((3, 4))[jg.tensor(IDS)]


@pytest.mark.parametrize("shape, dim, error", [
    ((2, 5), 0, IndexError), ((3,), 0, IndexError), ((0,), 0, IndexError),
    ((2, 5), 1, RuntimeError), ((5, 0), 0, RuntimeError), ((0, 5), 1, RuntimeError)])
def test_index_select_out_of_range_raises_torchs_class_for_the_dim(shape, dim, error):
    with pytest.raises(error, match="out of range in self" if error is IndexError else
                       "out of DATA bounds, id=8"):
        jg.zeros(shape).index_select(dim, jg.tensor([1, 8]))


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0)])
@pytest.mark.parametrize("op", ["index_select", "embedding"])
def test_an_empty_table_raises_torchs_index_select_error(shape, op):
    # torch 2.13: along a dim of size 0 "axis dim should be positive", along a non-empty
    # dim of an empty tensor "out of DATA bounds" (embedding is index_select of the rows)
    table, ids = jg.zeros(shape), jg.tensor([1, 8])
    message = "axis dim should be positive" if shape[0] == 0 else "out of DATA bounds, id=8"
    with pytest.raises(RuntimeError, match=message):
        table.index_select(0, ids) if op == "index_select" else F.embedding(ids, table)


# ----- in-place ops whose operand partly overlaps the target -------------------------------

def _arange(*shape):
    return jg.arange(float(math.prod(shape))).reshape(shape)


PARTIAL_OVERLAP = {  # torch 2.13 raises "some elements of the input tensor and the written-to"
    "iadd_row_slice": lambda a: a.__iadd__(a[1:]),
    "add_row": lambda a: a.add_(a[0]),
    "add_transpose": lambda a: a.add_(a.t()),
    "shifted_views": lambda a: a[1:].add_(a[:-1]),
    "copy_shifted": lambda a: a[1:].copy_(a[:-1]),
    "setitem_shifted": lambda a: a.__setitem__(slice(1, None), a[:-1]),
    "clamp_min_tensor": lambda a: a[1:].clamp_(min=a[:-1]),
}


@pytest.mark.parametrize("name", PARTIAL_OVERLAP)
def test_partial_overlap_of_operand_and_target_raises(name):
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written"):
        PARTIAL_OVERLAP[name](_arange(3, 3))


# (op, torch 2.13's values of the 3x3 arange after it): full overlap, disjoint, not dense
NO_PARTIAL_OVERLAP = {
    "self": (lambda a: a.add_(a), [0, 2, 4, 6, 8, 10, 12, 14, 16]),
    "same_view": (lambda a: a[:2].add_(a[:2]), [0, 2, 4, 6, 8, 10, 6, 7, 8]),
    "disjoint_rows": (lambda a: a[1:].copy_(a[:1].expand(2, 3)), [0, 1, 2, 0, 1, 2, 0, 1, 2]),
    "strided_operand": (lambda a: a[0].add_(a[:, 0]), [0, 4, 8, 3, 4, 5, 6, 7, 8]),
    "setitem_disjoint": (lambda a: a.__setitem__(2, a[0]), [0, 1, 2, 3, 4, 5, 0, 1, 2]),
}


@pytest.mark.parametrize("name", NO_PARTIAL_OVERLAP)
def test_full_disjoint_or_strided_overlap_is_allowed(name):
    op, expected = NO_PARTIAL_OVERLAP[name]
    a = _arange(3, 3)
    op(a)
    np.testing.assert_array_equal(a.numpy().ravel(), np.array(expected, dtype=np.float32))


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_compiled_partial_overlap_raises_as_eager(backend):
    def shift(b):
        c = b * 1.0
        c[1:] = c[:-1]
        return c

    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written"):
        jg.compile(shift, backend=backend)(_arange(4))


# ----- signed zeros: of equal operands PyTorch keeps the first -----------------------------

A_ZEROS = [-0.0, 0.0, 0.0, -0.0, -1.0, 2.0]
B_ZEROS = [0.0, -0.0, 0.0, -0.0, 0.5, NAN]
SIGNED_ZEROS = {  # torch 2.13's results; np.signbit tells -0.0 from 0.0
    "relu": (lambda a, b: jg.relu(a), [-0.0, 0.0, 0.0, -0.0, 0.0, 2.0]),
    "relu_method": (lambda a, b: a.relu(), [-0.0, 0.0, 0.0, -0.0, 0.0, 2.0]),
    "clamp_min": (lambda a, b: a.clamp(min=0), [-0.0, 0.0, 0.0, -0.0, 0.0, 2.0]),
    "clamp_to_neg_zero": (lambda a, b: a.clamp(-0.0, 1.0), [-0.0, 0.0, 0.0, -0.0, -0.0, 1.0]),
    "relu6": (lambda a, b: jg.nn.functional.relu6(a), [-0.0, 0.0, 0.0, -0.0, 0.0, 2.0]),
    "maximum": (jg.maximum, [-0.0, 0.0, 0.0, -0.0, 0.5, NAN]),
    "minimum": (jg.minimum, [-0.0, 0.0, 0.0, -0.0, -1.0, NAN]),
}


@pytest.mark.parametrize("name", SIGNED_ZEROS)
def test_ties_of_signed_zeros_keep_the_first_operand(name):
    fn, expected = SIGNED_ZEROS[name]
    got = fn(jg.tensor(A_ZEROS), jg.tensor(B_ZEROS)).numpy()
    np.testing.assert_array_equal(got, np.array(expected, dtype=np.float32))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("name", ["relu", "maximum", "minimum", "clamp_to_neg_zero"])
def test_compiled_signed_zero_ties_match_eager(name):
    fn = SIGNED_ZEROS[name][0]
    a, b = jg.tensor(A_ZEROS), jg.tensor(B_ZEROS)
    got = jg.compile(lambda x, y: fn(x, y) * 1.0)(a, b).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(SIGNED_ZEROS[name][1]))


# ----- Python ints outside an integer tensor's range wrap into it --------------------------

I8 = [100, -100, 127]
WRAPPING = {  # torch 2.13: the scalar is converted to the tensor's dtype by wrapping
    "mul": (lambda x: x * 300, [48, -48, -44]),
    "add": (lambda x: x + 1000, [76, -124, 103]),
    "rsub": (lambda x: 1000 - x, [-124, 76, 105]),
    "add_alpha": (lambda x: x.add(300, alpha=2), [-68, -12, -41]),
    "floor_divide": (lambda x: x // 300, [2, -3, 2]),
    "remainder": (lambda x: x % 300, [12, 32, 39]),
    "huge": (lambda x: x + 2 ** 40, [100, -100, 127]),
    "in_place": (lambda x: x.clone().add_(300), [-112, -56, -85]),
    "compare": (lambda x: x < 300, [False, True, False]),
    "int64": (lambda x: x.long() + 2 ** 63, [-(2 ** 63) + 100, 2 ** 63 - 100, -(2 ** 63) + 127]),
}


@pytest.mark.parametrize("name", WRAPPING)
def test_out_of_range_python_int_wraps_into_the_tensor_dtype(name):
    fn, expected = WRAPPING[name]
    assert fn(jg.tensor(I8, dtype=jg.int8)).tolist() == expected


@pytest.mark.parametrize("name", ["mul", "floor_divide", "compare", "add_alpha"])
def test_compiled_wrapping_matches_eager(name):
    fn, expected = WRAPPING[name]
    assert jg.compile(fn)(jg.tensor(I8, dtype=jg.int8)).tolist() == expected


# ----- result layouts (strides, is_contiguous) ---------------------------------------------

def _layout_inputs():
    base = jg.arange(24.0).reshape(2, 3, 4)
    return {"transposed": jg.arange(12.0).reshape(3, 4).t(), "permuted": base.permute(2, 0, 1),
            "sliced": base[:, 1:, :], "expanded": jg.arange(4.0).expand(3, 4)}


F = jg.nn.functional
LAYOUT_OPS = {
    "exp": lambda x: x.exp(), "mul_contiguous": lambda x: x * x.contiguous(),
    "contiguous_mul": lambda x: x.contiguous() * x, "where": lambda x: jg.where(x > 5, x, 0.0),
    "clone": lambda x: x.clone(), "double": lambda x: x.double(), "sort": lambda x: x.sort(-1)[0],
    "flip": lambda x: x.flip(0), "zeros_like": lambda x: jg.zeros_like(x),
    "full_like": lambda x: jg.full_like(x, 2.0), "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: F.log_softmax(x, -1), "cumsum": lambda x: x.cumsum(-1),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]), "masked_fill": lambda x: x.masked_fill(x > 5, 0.0),
    "sum_keepdim": lambda x: x.sum(-1, keepdim=True), "amax_keepdim": lambda x: x.amax(0, keepdim=True),
    "cat": lambda x: jg.cat([x, x]), "roll": lambda x: x.roll(1, 0), "gather": lambda x: x.gather(
        -1, jg.zeros(x.shape, dtype=jg.int64)),
    # results of an elementwise op's shape that are no elementwise op's (fuzz seed 622135:
    # a square matmul of transposed operands came out transposed, and view(-1) refused it)
    "matmul_self_t": lambda x: x @ x.transpose(-1, -2),
    "square_mm": lambda x: x[..., :2, :2] @ x[..., :2, :2],
    "linear_square": lambda x: F.linear(x[..., :2, :2], x[-1, :2, :2] if x.dim() == 3 else x[:2, :2]),
    "einsum_square": lambda x: jg.einsum("...ij,...jk->...ik", x[..., :2, :2], x[..., :2, :2]),
    "index_select_all": lambda x: x.index_select(-1, jg.arange(x.shape[-1])),
    "take_along_dim": lambda x: jg.take_along_dim(x, jg.zeros(x.shape, dtype=jg.int64), -1),
    "argsort": lambda x: x.argsort(-1), "sort_indices": lambda x: x.sort(-1)[1],
}
# torch 2.13's (strides, is_contiguous) for each op and input above
TORCH_LAYOUTS = {
    "transposed": {"exp": [1, 4], "mul_contiguous": [1, 4], "contiguous_mul": [3, 1],
                   "where": [1, 4], "clone": [1, 4], "double": [1, 4], "sort": [1, 4],
                   "flip": [1, 4], "zeros_like": [1, 4], "full_like": [1, 4],
                   "argsort": [1, 4], "sort_indices": [1, 4]},
    "permuted": {"exp": [1, 12, 4], "mul_contiguous": [1, 12, 4], "contiguous_mul": [6, 3, 1],
                 "where": [1, 12, 4], "clone": [1, 12, 4], "double": [1, 12, 4],
                 "sort": [1, 12, 4], "flip": [1, 12, 4], "zeros_like": [1, 12, 4],
                 "full_like": [1, 12, 4], "argsort": [1, 12, 4], "sort_indices": [1, 12, 4]},
    "sliced": {"exp": [8, 4, 1], "clone": [8, 4, 1], "zeros_like": [8, 4, 1]},
    "expanded": {"exp": [4, 1], "clone": [4, 1], "double": [4, 1], "zeros_like": [4, 1]},
}


@pytest.mark.parametrize("op", LAYOUT_OPS)
@pytest.mark.parametrize("name", ["transposed", "permuted", "sliced", "expanded"])
def test_result_layout_is_torchs(name, op):
    x = _layout_inputs()[name]
    y = LAYOUT_OPS[op](x)
    expected = TORCH_LAYOUTS[name].get(op)
    if expected is None:  # every other (op, input) pair: torch's result is C-contiguous
        expected = list(jg.empty(y.shape).stride())
    assert list(y.stride()) == expected
    assert y.is_contiguous() == (expected == list(jg.empty(y.shape).stride()))


# ----- second derivative of ops whose backward selects ------------------------------------

SELECTING = {  # torch 2.13: first gradient requires grad, second derivative is zeros
    "relu": (jg.relu, [0.0, 1.0, 1.0]),
    "hardtanh": (F.hardtanh, [0.0, 1.0, 0.0]),
    "relu6": (F.relu6, [0.0, 1.0, 1.0]),
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.25), [0.25, 1.0, 1.0]),
    "threshold": (lambda t: F.threshold(t, 0.1, 20.0), [0.0, 1.0, 1.0]),
}


@pytest.mark.parametrize("name", SELECTING)
def test_second_derivative_of_a_selecting_backward_is_zeros(name):
    fn, first = SELECTING[name]
    y = jg.tensor([-1.0, 0.5, 2.0], dtype=jg.float64, requires_grad=True)
    (g,) = jg.autograd.grad(fn(y).sum(), y, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), first, rtol=1e-12)
    assert g.requires_grad
    (g2,) = jg.autograd.grad(g.sum(), y)
    np.testing.assert_array_equal(g2.numpy(), [0.0, 0.0, 0.0])


# ----- x ** -0.5 is rsqrt in PyTorch --------------------------------------------------------

def test_power_minus_half_is_rsqrt_and_the_sqrt_gradient_keeps_the_zero_sign():
    x = jg.tensor([0.0, -0.0, 4.0, INF], requires_grad=True)
    np.testing.assert_array_equal((x ** -0.5).detach().numpy(), [INF, -INF, 0.5, 0.0])
    (x ** 0.5).sum().backward()  # torch 2.13: 0.5 * x ** -0.5
    np.testing.assert_array_equal(x.grad.numpy(), [INF, -INF, 0.25, 0.0])


def test_compiled_power_minus_half_matches_eager():
    x = jg.tensor([0.0, -0.0, 4.0, INF])
    got = jg.compile(lambda t: (t * 1.0) ** -0.5)(x).numpy()
    np.testing.assert_array_equal(got, [INF, -INF, 0.5, 0.0])


# ----- a view whose base was written through another view -----------------------------------

def test_view_of_a_base_written_with_a_grad_requiring_value_requires_grad():
    a = jg.ones((2, 2), requires_grad=True)
    b = jg.ones((2, 2))
    bt = b.t()
    column = b.unsqueeze(0)
    bt[..., 0] = a.sum()  # writes b through bt: b, bt and every other view now require grad
    assert b.requires_grad and bt.requires_grad and column.requires_grad
    total = column.sum(dim=2, keepdim=True)  # torch 2.13: records history, a gets grad 2
    assert total.requires_grad
    total.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 2), 2.0))


# ----- layer_norm backward in PyTorch's form ----------------------------------------------

def test_layer_norm_row_with_an_inf_gradient_is_all_nan_and_others_match():
    x = jg.tensor([[1.5311776, 0.3398956, 0.0], [1.0, 2.0, 4.0]], requires_grad=True)
    y = F.layer_norm(x, (3,))
    y.backward(jg.tensor([[0.1509554, INF, -0.582941], [1.0, 2.0, 3.0]]))
    assert np.isnan(x.grad.numpy()[0]).all()  # torch 2.13: nan nan nan (not nan nan -inf)
    np.testing.assert_allclose(x.grad.numpy()[1], [-0.1145, 0.1718, -0.0573], atol=1e-4)


# ----- bool matmul: PyTorch raises only when its kernel runs -----------------------------

@pytest.mark.parametrize("sa, sb, shape", [((0, 2), (2, 3), (0, 3)), ((2, 0), (0, 3), (2, 3)),
                                           ((1, 0, 2), (2, 0), (1, 0, 0)), ((2,), (2, 0), (0,))])
def test_bool_matmul_with_nothing_to_compute_is_false(sa, sb, shape):
    out = jg.zeros(sa, dtype=jg.bool) @ jg.zeros(sb, dtype=jg.bool)
    assert out.dtype == jg.bool and tuple(out.shape) == shape and not out.numpy().any()


@pytest.mark.parametrize("sa, sb", [((2, 2), (2, 3)), ((2,), (2,))])
def test_bool_matmul_that_computes_raises_not_implemented(sa, sb):
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        jg.zeros(sa, dtype=jg.bool) @ jg.zeros(sb, dtype=jg.bool)


# ----- a deliberate difference: gelu(+inf) ---------------------------------------------------

def test_gelu_of_infinity_is_the_formulas_not_torchs_vectorized_nan():
    # torch 2.13's vectorized float32 kernel gives NaN at +inf (and float64 in a one-element
    # tensor); the formula x * Phi(x) gives +inf, and -inf * 0 = NaN at -inf as in torch.
    # The fuzzer shims torch's value (tests.fuzz.torch_worker.TORCH_QUIRKS).
    out = F.gelu(jg.tensor([INF, -INF, 0.0]))
    np.testing.assert_array_equal(out.numpy(), [INF, NAN, 0.0])


def test_layer_norm_of_a_row_whose_variance_overflows_is_zero_not_torchs_nan():
    # eager's two passes in float32: the squared deviations overflow, the variance is inf
    # and the row (x - mean) / sqrt(inf) = 0; torch 2.13's kernel gives NaN there. The
    # fuzzer shims torch's value (tests.fuzz.torch_worker.TORCH_QUIRKS, fuzz seed 701709).
    big = float(np.finfo(np.float32).max)
    x = jg.tensor([[big, 1.5, -0.1, -big, -0.1], [1.0, 2.0, 3.0, 4.0, 5.0]])
    out = F.layer_norm(x, (5,)).numpy()
    np.testing.assert_array_equal(out[0], np.zeros(5, np.float32))
    np.testing.assert_allclose(out[1], (np.arange(5) - 2) / np.sqrt(2 + 1e-5), rtol=1e-6)


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, dim", [((2, 3, 0), 2), ((2, 0, 3), 2), ((0, 3), 1), ((2, 0), 0)])
def test_softmax_of_an_empty_integer_tensor_is_empty_like_torch(fn, shape, dim):
    out = fn(jg.zeros(shape, dtype=jg.int64), dim=dim)  # torch 2.13: no kernel runs
    assert out.dtype == jg.int64 and tuple(out.shape) == shape


def test_softmax_of_an_integer_tensor_with_elements_raises_not_implemented():
    with pytest.raises(NotImplementedError, match="softmax_lastdim_kernel_impl"):
        F.softmax(jg.zeros((2, 3), dtype=jg.int64), dim=1)


def test_add_alpha_scales_in_the_result_dtype():
    wide, narrow = jg.zeros(2, dtype=jg.float64), jg.tensor([3e38, 1.0])
    expected = [2 * float(np.float32(3e38)), 2.0]  # torch 2.13: float64, no float32 overflow
    assert jg.add(wide, narrow, alpha=2).tolist() == expected
    assert jg.sub(wide, narrow, alpha=2).tolist() == [-v for v in expected]


# ----- a leaf's first gradient follows PyTorch's gradient layout contract -----------------

def _leaf(make):
    return make().detach().requires_grad_()


GRADIENT_LAYOUTS = {  # (leaf, loss of it) -> torch 2.13's leaf.grad.stride()
    "matmul_of_t": (lambda: jg.ones(3, 5), lambda a: (a.t() @ jg.ones(3, 4)).sum(), (5, 1)),
    "transposed_leaf": (lambda: jg.ones(5, 3).t(), lambda b: b.exp().sum(), (1, 3)),
    "strided_leaf": (lambda: jg.ones(4, 6)[:, ::2], lambda c: (c * 2).sum(), (3, 1)),
    "cumsum_of_t": (lambda: jg.ones(3, 4), lambda d: d.t().cumsum(0).sum(), (4, 1)),
    "expanded_leaf": (lambda: jg.ones(1, 4).expand(3, 4), lambda e: (e * 2).sum(), (4, 1)),
}


@pytest.mark.parametrize("name", sorted(GRADIENT_LAYOUTS))
def test_a_leafs_first_gradient_is_laid_out_as_torchs(name):
    # new-user report: a.grad of `a.t() @ w` came out transposed, so a.grad.view(-1) raised
    make, loss, expected = GRADIENT_LAYOUTS[name]
    leaf = _leaf(make)
    loss(leaf).backward()
    assert leaf.grad.stride() == expected
    grad = leaf.grad
    loss(leaf).backward()  # a second gradient accumulates into the same tensor
    assert leaf.grad is grad and leaf.grad.stride() == expected


# ----- advanced indexing lays out its result as torch's (campaign seed 1014645) -----------

def _index_sources():
    base = jg.arange(60.0).reshape(3, 4, 5)
    return {"contiguous": base, "permuted": base.permute(2, 0, 1),
            "transposed": jg.arange(20.0).reshape(4, 5).t(),
            "size1": jg.arange(12.0).reshape(3, 4, 1).permute(1, 2, 0)}


def _pair(x):
    return (jg.tensor([0, 1]), slice(None), jg.tensor([1, 0])) if x.dim() == 3 else \
        (jg.tensor([0, 1]), jg.tensor([1, 0]))


INDEXES = {  # x -> the index
    "rows": lambda x: jg.tensor([2, 0, 1]), "cols": lambda x: (slice(None), jg.tensor([2, 0])),
    "last": lambda x: (..., jg.tensor([1, 0])), "list": lambda x: [1, 0],
    "noncontiguous_ids": lambda x: jg.tensor([[0, 2, 1], [1, 1, 0]]).t(),
    "noncontiguous_ids_dim1": lambda x: (slice(None), jg.tensor([[0, 2, 1], [1, 1, 0]]).t()),
    "broadcast_pair": lambda x: (jg.tensor([[0], [1], [2]]), jg.tensor([1, 0])),
    "separated": _pair, "one_id": lambda x: (slice(None), jg.tensor([0])),
}
INDEX_LAYOUTS = {  # torch 2.13's x[index].stride(); a missing pair raises IndexError there
    "contiguous": {"broadcast_pair": (10, 5, 1), "cols": (10, 5, 1), "last": (8, 2, 1),
                   "list": (20, 5, 1), "noncontiguous_ids": (20, 60, 5, 1),
                   "noncontiguous_ids_dim1": (30, 5, 15, 1), "one_id": (5, 5, 1),
                   "rows": (20, 5, 1), "separated": (4, 1)},
    "permuted": {"broadcast_pair": (8, 4, 1), "cols": (1, 5, 10), "last": (2, 10, 1),
                 "list": (12, 4, 1), "noncontiguous_ids": (12, 36, 4, 1),
                 "noncontiguous_ids_dim1": (1, 5, 15, 30), "one_id": (1, 5, 5),
                 "rows": (12, 4, 1), "separated": (3, 1)},
    "size1": {"last": (2, 2, 1), "list": (3, 1, 1), "noncontiguous_ids": (1, 9, 9, 3),
              "one_id": (1, 4, 4), "rows": (3, 1, 1), "separated": (1, 1)},
    "transposed": {"broadcast_pair": (2, 1), "cols": (2, 1), "last": (2, 1), "list": (4, 1),
                   "noncontiguous_ids": (4, 12, 1), "noncontiguous_ids_dim1": (6, 1, 3),
                   "one_id": (1, 1), "rows": (4, 1), "separated": (1,)},
}
INDEX_PAIRS = [(s, i) for s in INDEX_LAYOUTS for i in INDEX_LAYOUTS[s]]


@pytest.mark.parametrize("source,index", INDEX_PAIRS)
def test_advanced_indexing_result_is_laid_out_as_torchs(source, index):
    # the rule is TensorIterator's over the restrided source and the index arrays
    x = _index_sources()[source]
    y = x[INDEXES[index](x)]
    assert y.stride() == INDEX_LAYOUTS[source][index]
    as_numpy = INDEXES[index](x)
    as_numpy = tuple(i.numpy() if isinstance(i, jg.Tensor) else i
                     for i in (as_numpy if isinstance(as_numpy, tuple) else (as_numpy,)))
    np.testing.assert_array_equal(y.numpy(), x.numpy()[as_numpy])


@pytest.mark.parametrize("backend", ["numba", "eager"])
@pytest.mark.parametrize("source", ["permuted", "transposed"])
def test_compiled_indexing_by_a_tensor_input_is_laid_out_as_eager(backend, source):
    # traced with unknown ids, `x[ids]` is an op of (x, ids): its result follows the rule too
    def f(x, ids):
        y = x[ids]
        return y * 2, y.stride(), y.is_contiguous()

    x = _index_sources()[source]
    ids = jg.tensor([[0, 2, 1], [1, 1, 0]]).t()
    expected = f(x, ids)
    compiled = jg.compile(f, backend=backend)
    for _ in range(2):
        got = compiled(x, ids)
        np.testing.assert_array_equal(got[0].numpy(), expected[0].numpy())
        assert got[0].stride() == expected[0].stride() and got[1:] == expected[1:]
