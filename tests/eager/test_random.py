"""Random ops: reproducibility under seeds and generators, dtypes, statistics of large
samples (seeded, with tolerances of several standard errors), PyTorch's errors, and the
autograd behaviour of sampling ops and in-place fills."""

import numpy as np
import pytest

import jitgrad as jg

N = 200_000


@pytest.fixture(autouse=True)
def seeded():
    jg.manual_seed(0)


def values(t):
    return t.detach().numpy()


DRAWS = {
    "rand": lambda g: jg.rand(3, 4, generator=g),
    "randn": lambda g: jg.randn((3, 4), generator=g),
    "randint": lambda g: jg.randint(0, 10, (5,), generator=g),
    "randperm": lambda g: jg.randperm(8, generator=g),
    "normal": lambda g: jg.normal(0.0, 1.0, (4,), generator=g),
    "normal_tensor": lambda g: jg.normal(jg.zeros(4), jg.ones(4), generator=g),
    "bernoulli": lambda g: jg.bernoulli(jg.full((6,), 0.5), generator=g),
    "multinomial": lambda g: jg.multinomial(jg.ones(5), 3, generator=g),
    "rand_like": lambda g: jg.rand_like(jg.zeros(3), generator=g),
    "uniform_": lambda g: jg.zeros(4).uniform_(-1, 1, generator=g),
    "normal_": lambda g: jg.zeros(4).normal_(generator=g),
    "random_": lambda g: jg.zeros(4).random_(generator=g),
    "exponential_": lambda g: jg.zeros(4).exponential_(generator=g),
    "bernoulli_": lambda g: jg.zeros(4).bernoulli_(0.5, generator=g),
}


@pytest.mark.parametrize("name", DRAWS)
def test_manual_seed_reproduces_and_generators_are_independent(name):
    draw = DRAWS[name]
    jg.manual_seed(123)
    first = values(draw(None))
    jg.manual_seed(123)
    np.testing.assert_array_equal(values(draw(None)), first)
    g = jg.Generator().manual_seed(123)
    jg.manual_seed(5)
    state = jg.get_rng_state()
    np.testing.assert_array_equal(values(draw(g)), first)  # same seed, own generator
    np.testing.assert_array_equal(jg.get_rng_state().numpy(), state.numpy())  # default untouched


def test_different_seeds_give_different_values():
    jg.manual_seed(1)
    a = values(jg.rand(100))
    jg.manual_seed(2)
    assert not np.array_equal(a, values(jg.rand(100)))
    assert not np.array_equal(values(jg.rand(100)), values(jg.rand(100)))


def test_rng_state_round_trip_and_seeds():
    state = jg.get_rng_state()
    assert state.dtype == jg.uint8 and state.shape == (37,)
    a = values(jg.randn(5))
    jg.set_rng_state(state)
    np.testing.assert_array_equal(values(jg.randn(5)), a)
    assert jg.manual_seed(7) is jg.default_generator and jg.initial_seed() == 7
    new_seed = jg.seed()
    assert isinstance(new_seed, int) and jg.initial_seed() == new_seed
    g = jg.Generator()
    g.set_state(g.manual_seed(3).get_state())
    assert g.initial_seed() == 3
    with pytest.raises(RuntimeError, match="set_state expects the jitgrad.uint8 tensor of 37"):
        jg.set_rng_state(jg.zeros(37))


def test_factory_dtypes_shapes_and_flags():
    assert jg.rand(2, 3).dtype == jg.float32 and jg.rand(2, 3).shape == (2, 3)
    assert jg.randn([2]).shape == (2,) and jg.randn(()).shape == ()
    assert jg.rand(2, dtype=jg.float64).dtype == jg.float64
    assert jg.randn(2, dtype=jg.float16).dtype == jg.float16
    x = jg.randn(3, requires_grad=True)
    assert x.requires_grad and x.is_leaf
    assert jg.randint(3, (2,)).dtype == jg.int64
    assert jg.randint(0, 3, (2,), dtype=jg.float32).dtype == jg.float32
    assert jg.randint(low=2, high=3, size=(2,)).tolist() == [2, 2]
    assert jg.randperm(4, dtype=jg.float32).dtype == jg.float32
    assert jg.normal(0.0, 1.0, (2,), dtype=jg.float64).dtype == jg.float64
    assert jg.randn_like(jg.zeros(2, dtype=jg.float64)).dtype == jg.float64
    like = jg.randint_like(jg.zeros(3, dtype=jg.int32), 5, 7)
    assert like.dtype == jg.int32 and set(like.tolist()) <= {5, 6}
    assert jg.randint_like(jg.zeros(3), 5).dtype == jg.float32


def test_factory_errors():
    with pytest.raises(NotImplementedError, match="rand: not implemented for 'Long'"):
        jg.rand(2, dtype=jg.int64)
    with pytest.raises(NotImplementedError, match="randn_like: not implemented for 'Long'"):
        jg.randn_like(jg.zeros(2, dtype=jg.int64))
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but got "
                                           "from=3 >= to=3"):
        jg.randint(3, 3, (2,))
    with pytest.raises(TypeError, match="randint\\(\\) needs a size tuple"):
        jg.randint(0, 3)
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        jg.randint(0, 3, (2,), requires_grad=True)
    with pytest.raises(TypeError, match="needs size="):
        jg.normal(0.0, 1.0)
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0, but found std -1"):
        jg.normal(jg.zeros(2), -1.0)
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        jg.normal(jg.zeros(2), -jg.ones(2))
    with pytest.raises(RuntimeError, match=r"the size of tensor a \(4\) must match the size of "
                                           r"tensor b \(2\) at non-singleton dimension 1"):
        jg.normal(jg.zeros(4), jg.ones(2, 2))


def test_uniform_and_normal_statistics():
    u = values(jg.rand(N, dtype=jg.float64))
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    z = values(jg.randn(N))
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    n = values(jg.normal(3.0, 2.0, (N,)))
    assert abs(n.mean() - 3.0) < 0.02 and abs(n.std() - 2.0) < 0.02
    t = values(jg.zeros(N).uniform_(-2.0, 4.0))
    assert -2.0 <= t.min() and t.max() < 4.0 and abs(t.mean() - 1.0) < 0.02
    m = values(jg.zeros(N).normal_(-1.0, 0.5))
    assert abs(m.mean() + 1.0) < 0.005 and abs(m.std() - 0.5) < 0.005
    e = values(jg.zeros(N, dtype=jg.float64).exponential_(4.0))
    assert e.min() >= 0 and abs(e.mean() - 0.25) < 0.005


def test_normal_with_tensor_arguments_broadcasts_elementwise():
    mean = jg.tensor([[-10.0], [10.0]])
    std = jg.tensor([0.0, 1.0, 2.0], dtype=jg.float64)
    out = jg.normal(mean, std)
    assert out.shape == (2, 3) and out.dtype == jg.float64
    np.testing.assert_array_equal(values(out)[:, 0], [-10.0, 10.0])  # std 0: exactly the mean
    big = values(jg.normal(jg.full((N,), 5.0), 3.0))
    assert abs(big.mean() - 5.0) < 0.03 and abs(big.std() - 3.0) < 0.03
    assert jg.normal(0.0, jg.ones(2)).shape == (2,)


def test_integer_sampling():
    r = values(jg.randint(-3, 4, (N,)))
    assert r.min() == -3 and r.max() == 3
    counts = np.bincount(r + 3)
    assert np.all(np.abs(counts / N - 1 / 7) < 0.005)
    p = values(jg.randperm(1000))
    np.testing.assert_array_equal(np.sort(p), np.arange(1000))
    assert not np.array_equal(p, np.arange(1000))
    assert jg.randperm(0).shape == (0,)
    f = values(jg.zeros(N).random_())
    assert f.min() >= 0 and f.max() <= 2**24 and np.all(f == np.round(f)) and f.max() > 2**23
    assert set(values(jg.zeros(100, dtype=jg.int64).random_(2, 5)).tolist()) == {2, 3, 4}
    assert set(values(jg.zeros(100).random_(3)).tolist()) == {0.0, 1.0, 2.0}
    assert values(jg.zeros(100, dtype=jg.int32).random_()).min() >= 0


def test_bernoulli():
    p = jg.tensor([0.0, 0.25, 1.0]).expand(N, 3)
    samples = values(jg.bernoulli(p))
    assert samples.dtype == np.float32 and set(np.unique(samples)) <= {0.0, 1.0}
    np.testing.assert_allclose(samples.mean(0), [0.0, 0.25, 1.0], atol=0.005)
    half = values(jg.bernoulli(jg.zeros(N, dtype=jg.float64), 0.5))
    assert half.dtype == np.float64 and abs(half.mean() - 0.5) < 0.005
    filled = values(jg.zeros(N, dtype=jg.int64).bernoulli_(0.3))
    assert filled.dtype == np.int64 and abs(filled.mean() - 0.3) < 0.005
    per_element = values(jg.zeros(3).bernoulli_(jg.tensor([0.0, 1.0, 1.0])))
    np.testing.assert_array_equal(per_element, [0.0, 1.0, 1.0])
    with pytest.raises(RuntimeError, match="Expected p_in >= 0 && p_in <= 1"):
        jg.bernoulli(jg.tensor([1.5]))
    with pytest.raises(NotImplementedError, match="bernoulli: not implemented for 'Long'"):
        jg.bernoulli(jg.tensor([1]))
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], but got p="):
        jg.zeros(3).bernoulli_(1.5)


def test_multinomial_with_replacement_matches_the_probabilities():
    weights = jg.tensor([1.0, 0.0, 3.0, 4.0])  # unnormalized, one impossible category
    samples = values(jg.multinomial(weights, N, replacement=True))
    assert samples.dtype == np.int64 and samples.shape == (N,)
    np.testing.assert_allclose(np.bincount(samples, minlength=4) / N, [0.125, 0, 0.375, 0.5],
                               atol=0.005)
    rows = values(jg.multinomial(jg.tensor([[1.0, 0.0], [0.0, 1.0]]), 6, replacement=True))
    np.testing.assert_array_equal(rows, [[0] * 6, [1] * 6])
    assert jg.multinomial(jg.tensor([1.0, 0, 0]), 5, True).tolist() == [0] * 5


def test_multinomial_without_replacement():
    rows = values(jg.multinomial(jg.ones(3, 10, dtype=jg.float64), 10))
    assert rows.shape == (3, 10)
    for row in rows:
        np.testing.assert_array_equal(np.sort(row), np.arange(10))  # distinct indices
    first = np.array([jg.multinomial(jg.tensor([1.0, 2.0, 7.0]), 2).tolist() for _ in range(3000)])
    assert np.all(first[:, 0] != first[:, 1])
    np.testing.assert_allclose(np.bincount(first[:, 0], minlength=3) / 3000, [0.1, 0.2, 0.7],
                               atol=0.03)
    # zero-weight categories come last, once the others are used up (as in PyTorch)
    assert jg.multinomial(jg.tensor([1.0, 0.0, 0.0]), 2).tolist() == [0, 1]


@pytest.mark.parametrize("probs, n, kwargs, error, message", [
    (jg.ones(2, 2, 2), 1, {}, RuntimeError, "prob_dist must be 1 or 2 dim"),
    (jg.tensor(1.0), 1, {}, RuntimeError, "prob_dist must be 1 or 2 dim"),
    (jg.ones(3), 4, {}, RuntimeError,
     "cannot sample n_sample > prob_dist.size\\(-1\\) samples without replacement"),
    (jg.ones(3), 0, {}, RuntimeError, "cannot sample n_sample <= 0 samples"),
    (jg.tensor([1.0, -1.0]), 1, {}, RuntimeError,
     "probability tensor contains either `inf`, `nan` or element < 0"),
    (jg.tensor([1.0, float("nan")]), 1, {"replacement": True}, RuntimeError,
     "probability tensor contains either `inf`, `nan` or element < 0"),
    (jg.tensor([1.0, float("inf")]), 1, {}, RuntimeError,
     "probability tensor contains either `inf`, `nan` or element < 0"),
    (jg.tensor([[1.0, 1.0], [0.0, 0.0]]), 1, {}, RuntimeError,
     "invalid multinomial distribution \\(sum of probabilities <= 0\\)"),
    (jg.tensor([1, 2]), 1, {}, RuntimeError,
     "multinomial only supports floating-point dtypes for input, got: Long"),
], ids=["3d", "0d", "too_many", "zero_samples", "negative", "nan", "inf", "zero_row", "int"])
def test_multinomial_errors(probs, n, kwargs, error, message):
    with pytest.raises(error, match=message):
        jg.multinomial(probs, n, **kwargs)


def test_in_place_fill_errors():
    with pytest.raises(NotImplementedError, match="uniform_: not implemented for 'Long'"):
        jg.zeros(3, dtype=jg.int64).uniform_()
    with pytest.raises(RuntimeError, match=r"uniform_ expects to return a \[from, to\) range, "
                                           r"but found from=2 > to=1"):
        jg.zeros(3).uniform_(2, 1)
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0, but found std -1"):
        jg.zeros(3).normal_(0, -1)
    with pytest.raises(RuntimeError, match="exponential_ expects lambda > 0.0, but found lambda=0"):
        jg.zeros(3).exponential_(0)


def test_in_place_fill_on_a_leaf_requiring_grad():
    w = jg.zeros(3, requires_grad=True)
    for fill in (lambda: w.normal_(), lambda: w.uniform_(), lambda: w.bernoulli_(),
                 lambda: w.random_(), lambda: w.exponential_()):
        with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad is being used "
                                               "in an in-place operation."):
            fill()
    with jg.no_grad():  # how initializers fill parameters
        out = w.normal_()
    assert out is w and w._version == 1 and w.is_leaf and w.requires_grad
    assert np.count_nonzero(values(w)) == 3


def test_in_place_fill_writes_through_views_and_bumps_the_version():
    base = jg.zeros(4, 3)
    column = base.t()[1]
    column.uniform_(5.0, 6.0)
    data = values(base)
    assert np.all((data[:, 1] >= 5.0) & (data[:, 1] < 6.0))
    assert np.all(data[:, [0, 2]] == 0.0)
    assert base._version == 1 and column._version == 1


def test_in_place_fill_of_a_non_leaf_cuts_its_gradient():
    x = jg.ones(3, requires_grad=True)
    y = x * 2
    y.normal_()
    assert y.requires_grad
    y.sum().backward()
    np.testing.assert_array_equal(values(x.grad), [0.0, 0.0, 0.0])


def test_sampling_ops_have_zero_gradients():
    mean = jg.zeros(3, requires_grad=True)
    std = jg.ones(3, requires_grad=True)
    out = jg.normal(mean, std)
    assert out.grad_fn.name() == "NormalBackward"
    out.sum().backward()
    np.testing.assert_array_equal(values(mean.grad), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(values(std.grad), [0.0, 0.0, 0.0])
    assert jg.normal(0.0, std).grad_fn.name() == "NormalBackward"
    p = jg.full((3,), 0.5, requires_grad=True)
    b = jg.bernoulli(p)
    assert b.grad_fn.name() == "BernoulliBackward"
    b.sum().backward()
    np.testing.assert_array_equal(values(p.grad), [0.0, 0.0, 0.0])
    with jg.no_grad():
        assert jg.normal(mean, 1.0).grad_fn is None
    assert not jg.multinomial(p, 2).requires_grad


def test_generator_device_is_the_cpu():
    assert jg.Generator().device == jg.device("cpu")
    assert jg.Generator(device="cpu").manual_seed(1).initial_seed() == 1
    with pytest.raises(RuntimeError, match="jitgrad runs on the CPU only"):
        jg.Generator(device="cuda")
