"""Reductions and in-place ops on empty tensors, and float32 accumulation, as PyTorch 2.13.

Empty tensors: a reduction over a size-0 dim either has an identity (sum 0, prod 1,
logsumexp -inf, softmax empty) or raises PyTorch's error (max, argmax, median: IndexError
for a size-0 reduced dim; RuntimeError, or IndexError for argmax, when reducing all dims of
an empty tensor; torch 2.13 messages measured). A size-0 dim that is kept gives an empty
result. Accumulation: float32 sums, products and scans must not lose the sum where numpy
adds naively (a dim other than the contiguous trailing ones).
"""

import math

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use

EMPTY = np.zeros((3, 0), np.float32)

# reductions with an identity over the empty dim 1 of a (3, 0) tensor, and their values
WITH_IDENTITY = {
    "sum": (lambda x: x.sum(1), np.zeros(3)),
    "prod": (lambda x: x.prod(1), np.ones(3)),
    "mean": (lambda x: x.mean(1), np.full(3, np.nan)),
    "logsumexp": (lambda x: jg.logsumexp(x, 1), np.full(3, -np.inf)),
    "logsumexp_all": (lambda x: jg.logsumexp(x, (0, 1)), np.array(-np.inf)),
    "norm2": (lambda x: x.norm(dim=1), np.zeros(3)),
    "any": (lambda x: x.any(1), np.zeros(3, bool)),
    "all": (lambda x: x.all(1), np.ones(3, bool)),
    "count_nonzero": (lambda x: x.count_nonzero(1), np.zeros(3, np.int64)),
    "softmax": (lambda x: F.softmax(x, 1), EMPTY),
    "log_softmax": (lambda x: F.log_softmax(x, 1), EMPTY),
    "cumsum": (lambda x: x.cumsum(1), EMPTY),
    # a kept size-0 dim: the result is empty
    "argmax_kept": (lambda x: x.argmax(0), np.zeros(0, np.int64)),
    "argmin_kept": (lambda x: x.argmin(0), np.zeros(0, np.int64)),
    "amax_kept": (lambda x: x.amax(0), np.zeros(0, np.float32)),
    "max_dim_kept": (lambda x: x.max(0)[0], np.zeros(0, np.float32)),
    "median_kept": (lambda x: x.median(0)[0], np.zeros(0, np.float32)),
    "softmax_kept": (lambda x: F.softmax(x, 0), EMPTY),
    "logsumexp_kept": (lambda x: jg.logsumexp(x, 0), np.zeros(0, np.float32)),
}


@pytest.mark.parametrize("name", WITH_IDENTITY)
def test_reduction_over_an_empty_tensor_gives_its_identity_or_an_empty_result(name):
    fn, expected = WITH_IDENTITY[name]
    out = fn(jg.tensor(EMPTY)).numpy()
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("fn", [lambda x: F.softmax(x, 1).sum(),
                                lambda x: F.log_softmax(x, 1).sum(),
                                lambda x: jg.logsumexp(x, 1).sum()],
                         ids=["softmax", "log_softmax", "logsumexp"])
def test_backward_through_an_empty_normalization_gives_an_empty_gradient(fn):
    x = jg.tensor(EMPTY, requires_grad=True)
    fn(x).backward()
    assert x.grad.shape == (3, 0)


# (call, error class, words of torch 2.13's message)
NO_IDENTITY = {
    "max_dim": (lambda x: x.max(1), IndexError, "Expected reduction dim 1 to have non-zero size"),
    "min_dim": (lambda x: x.min(1), IndexError, "Expected reduction dim 1 to have non-zero size"),
    "amax_dim": (lambda x: x.amax(1), IndexError, "Expected reduction dim 1 to have non-zero size"),
    "amin_dims": (lambda x: x.amin((0, 1)), IndexError, "reduction dim 1 to have non-zero"),
    "argmax_dim": (lambda x: x.argmax(1), IndexError, "argmax(): Expected reduction dim 1"),
    "argmin_dim": (lambda x: x.argmin(1), IndexError, "argmin(): Expected reduction dim 1"),
    "median_dim": (lambda x: x.median(1), IndexError, "median(): Expected reduction dim 1"),
    "argmax_all": (lambda x: x.argmax(), IndexError, "input.numel() == 0"),
    "max_all": (lambda x: x.max(), RuntimeError, "max(): Expected reduction dim to be specified"),
    "amax_all": (lambda x: x.amax(), RuntimeError, "amax(): Expected reduction dim"),
    "min_all": (lambda x: x.min(), RuntimeError, "min(): Expected reduction dim"),
    "norm_inf_dim": (lambda x: jg.linalg.vector_norm(x, math.inf, dim=1), RuntimeError,
                     "cannot compute the inf norm on the dimension 1"),
    "norm_-inf_all": (lambda x: jg.linalg.vector_norm(x, -math.inf), RuntimeError,
                      "cannot compute the -inf norm on an empty tensor"),
}


@pytest.mark.parametrize("name", NO_IDENTITY)
def test_reduction_without_identity_over_an_empty_dim_raises_as_torch(name):
    fn, error, words = NO_IDENTITY[name]
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        fn(jg.tensor(EMPTY))


IN_PLACE = {
    "add_": lambda t: t.add_(1), "mul_": lambda t: t.mul_(2), "relu_": lambda t: t.relu_(),
    "exp_": lambda t: t.exp_(), "clamp_": lambda t: t.clamp_(0, 1), "fill_": lambda t: t.fill_(3),
    "zero_": lambda t: t.zero_(), "copy_": lambda t: t.copy_(jg.ones(t.shape)),
    "setitem": lambda t: t.__setitem__(slice(None), 1.0), "iadd": lambda t: t.__iadd__(1),
}


@pytest.mark.parametrize("shape", [(3, 0), (0, 3), (2, 0, 4)], ids=str)
@pytest.mark.parametrize("name", IN_PLACE)
def test_in_place_op_on_an_empty_tensor_is_a_no_op(name, shape):
    t = jg.zeros(shape)
    out = IN_PLACE[name](t)
    assert t.shape == shape and t._version == 1
    assert out is None or out is t


def test_in_place_op_on_an_expanded_tensor_still_raises():
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        jg.zeros(3, 1).expand(3, 4).add_(1)


# ----- float32 accumulation ----------------------------------------------------------------

N = 2 ** 25  # past 2^24, where float32 steps stop adding 1


@pytest.mark.parametrize("layout", ["column", "strided", "contiguous"])
def test_float32_sum_mean_var_norm_of_many_ones_are_exact(layout):
    if layout == "column":  # reduce dim 0 of (N, 2): numpy adds naively along it
        x, dim = jg.ones((N, 2)), 0
    elif layout == "strided":
        x, dim = jg.ones((2, 2 * N))[:, ::2], 1
    else:
        x, dim = jg.ones((2, N)), 1
    np.testing.assert_array_equal(x.sum(dim).numpy(), [N, N])
    np.testing.assert_array_equal(x.mean(dim).numpy(), [1, 1])
    np.testing.assert_array_equal(x.var(dim).numpy(), [0, 0])
    np.testing.assert_allclose(x.norm(dim=dim).numpy(), [math.sqrt(N)] * 2, rtol=1e-7)
    assert x.sum(dim).dtype == jg.float32


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_float32_scans_accumulate_in_float64(op):
    rng = np.random.default_rng(0)
    if op == "cumsum":
        data = np.ones(N, np.float32)
    else:
        data = (1 + rng.random(2 ** 16) * 1e-4).astype(np.float32)
    out = getattr(jg.tensor(data), op)(0)
    expected = getattr(np, op)(data.astype(np.float64)).astype(np.float32)
    assert out.dtype == jg.float32
    np.testing.assert_array_equal(out.numpy(), expected)


def test_cumsum_gradient_accumulates_in_float64_too():
    x = jg.tensor(np.ones(N, np.float32), requires_grad=True)
    x.cumsum(0).sum().backward()
    assert x.grad[0].item() == N  # the reverse cumulative sum of N ones


def test_float32_prod_accumulates_in_float64():
    data = (1 + np.random.default_rng(0).random(2 ** 20) * 1e-6).astype(np.float32)
    expected = np.float32(np.prod(data.astype(np.float64)))
    assert jg.tensor(data).prod().item() == expected


def test_float16_mean_does_not_overflow_in_its_sum():
    x = jg.full((70000,), 2.0, dtype=jg.float16)  # the sum, 140000, exceeds float16's max
    assert x.mean().item() == 2.0 and x.mean().dtype == jg.float16


@pytest.mark.parametrize("backend", [None, "eager", "numba"])
@pytest.mark.parametrize("op", ["var", "std"])
def test_float32_variance_of_large_equal_values_is_zero_not_an_overflowed_mean(op, backend):
    # fuzz seed 630925: [3e38, 3e38] summed in float32 overflows; the mean does not
    # (PyTorch's Welford mean and the compiled row kernel give 0)
    def fn(x):
        return getattr(x, op)(dim=-1, correction=0)

    if backend is not None:
        jg.reset()
        fn = jg.compile(fn, backend=backend)
    x = jg.tensor([[3e38, 3e38], [3e38, 1.0]])
    # the second row's variance, 2.25e76, is beyond float32; its square root is not
    expected = [0.0, np.inf] if op == "var" else [0.0, 1.5e38]
    np.testing.assert_array_equal(fn(x).numpy(), np.array(expected, np.float32))


@pytest.mark.parametrize("backend", [None, "eager", "numba"])
@pytest.mark.parametrize("dtype", [jg.float32, jg.float64])
def test_variance_of_equal_values_is_exactly_zero_and_std_gives_them_no_gradient(dtype, backend):
    # fuzz seed 651576: the mean of three copies of a rounds (3a / 3 != a), so the std was
    # 2.7e-16 and its gradient 0.41 per element; torch's Welford mean is exact: std 0,
    # gradient 0 (its std_backward masks a zero std)
    def fn(x):
        return x.var(dim=0), x.std(dim=0)

    if backend is not None:
        jg.reset()
        fn = jg.compile(fn, backend=backend)
    x = jg.tensor([[-1.94340001, 0.1, 7.3]] * 3, dtype=dtype, requires_grad=True)
    var, std = fn(x)
    assert var.tolist() == [0.0, 0.0, 0.0] and std.tolist() == [0.0, 0.0, 0.0]
    std.sum().backward()
    assert x.grad.tolist() == [[0.0] * 3] * 3


@pytest.mark.parametrize("backend", [None, "eager", "numba"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_a_float32_mean_whose_sum_overflows_is_inf_in_every_layout(layout, backend):
    # torch sums in float32, then divides; eager accumulated a strided input in float64
    # (a finite mean) and a contiguous one in float32 (inf), and numba always in float64
    def fn(x):
        return x.mean(-1)

    if backend is not None:
        jg.reset()
        fn = jg.compile(fn, backend=backend)
    rows = jg.tensor([[3e38, 3e38, 1.0], [1.0, 2.0, 3.0]])
    x = rows if layout == "contiguous" else rows.t().contiguous().t()
    np.testing.assert_array_equal(fn(x).numpy(), np.array([np.inf, 2.0], np.float32))


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_float32_layer_norm_statistics_overflow_and_round_as_eager(backend):
    # fuzz seed 693123: the row kernel's float64 mean of [3e38, 3e38, ...] was finite, where
    # eager's (and torch's) float32 sum overflows and the row is NaN
    def fn(x):
        return F.layer_norm(x, (5,))

    jg.reset()
    x = jg.tensor([[3e38, 3e38, 0.313219, 1.5568771, 1.6491464],  # the sum overflows
                   [1e20, 1.0, 2.0, 3.0, 4.0],  # the variance overflows: rstd is 0
                   [1.0000001, 1.0, 1.0, 1.0, 1.0]])  # a variance of float32 rounding
    got, want = jg.compile(fn, backend=backend)(x).numpy(), fn(x).numpy()
    assert np.isnan(want[0]).all() and (want[1] == 0).all()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)  # rstd multiplies: rounding only


# ops on an empty tensor computed from a 0-d b: every input stays an edge, so b's
# gradient is 0, not None, as torch's (fuzz seed 672038: cat's legacy rule dropped the edge)
THROUGH_EMPTY = {
    "cat_skipping_a_1d_empty": lambda e, m: jg.cat([m, e]),
    "cat_of_1d_empties": lambda e, m: jg.cat([e, e * 2]),
    "hstack": lambda e, m: jg.hstack([e, e]),
    "vstack": lambda e, m: jg.vstack([m, e.reshape(0, 3)]),
    "stack": lambda e, m: jg.stack([e, e]),
    "matmul": lambda e, m: e.reshape(0, 3) @ m.t(),
    "where": lambda e, m: jg.where(e > 0, e, e * 2),
    "index_select": lambda e, m: e.index_select(0, jg.tensor([], dtype=jg.int64)),
    "softmax": lambda e, m: e.reshape(0, 3).softmax(-1),
    "pad": lambda e, m: F.pad(e, (1, 1)),
}


@pytest.mark.parametrize("backend", [None, "eager", "numba"])
@pytest.mark.parametrize("name", THROUGH_EMPTY)
def test_an_input_reached_only_through_empty_tensors_gets_a_zero_gradient(name, backend):
    def program(b, m):
        return THROUGH_EMPTY[name](b - jg.zeros(0), m).sum()

    run = program if backend is None else jg.compile(program, backend=backend)
    b = jg.tensor(2.0, requires_grad=True)
    m = jg.ones(2, 3, requires_grad=True)
    run(b, m).backward()
    assert b.grad is not None and b.grad.item() == 0.0
