"""trace, mv, dist, cdist, H/mH, transpose_, mode, resize_/resize, pin_memory, name,
Tensor.new, torch.range and set_default_tensor_type, against numpy and values printed by
torch 2.13.0 (CPU; quoted where used); gradients by central differences (gradcheck) and
compiled code against eager."""

import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck

RNG = np.random.default_rng(0)


def _f64(*shape):
    return jg.tensor(RNG.normal(size=shape), requires_grad=True)


# ----- trace, mv, dist, cdist ---------------------------------------------------------

def test_trace_matches_numpy_with_torch_dtypes():
    for shape in ((3, 3), (2, 3), (3, 2)):
        data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        out = jg.tensor(data).trace()
        assert out.shape == () and out.item() == np.trace(data) and out.dtype == jg.float32
    assert jg.tensor([[1, 2], [3, 4]], dtype=jg.int32).trace().dtype == jg.int64  # torch 2.13
    assert gradcheck(lambda m: m.trace(), (_f64(3, 4),))


@pytest.mark.parametrize(("call", "error", "pattern"), [
    (lambda: jg.ones(3).trace(), RuntimeError, "expected a matrix, but got tensor with dim 1"),
    (lambda: jg.ones(2, 2, 2).trace(), RuntimeError, "with dim 3"),
    (lambda: jg.ones(2, 2, dtype=jg.bool).trace(), NotImplementedError, "'Bool'"),
    (lambda: jg.mv(jg.ones(2, 2), jg.ones(3)), RuntimeError, r"size mismatch, got input \(2\), "
     r"mat \(2x2\), vec \(3\)"),
    (lambda: jg.mv(jg.ones(2), jg.ones(2)), RuntimeError, "vector \\+ matrix @ vector expected"),
    (lambda: jg.mv(jg.ones(2, 2, dtype=jg.float64), jg.ones(2)), RuntimeError, "same dtype"),
    (lambda: jg.dist(jg.tensor([1, 2]), jg.tensor([1, 2])), RuntimeError, "floating point"),
    (lambda: jg.cdist(jg.ones(3), jg.ones(2, 3)), RuntimeError,
     "at least 2D tensors, X1 got: 1D"),
    (lambda: jg.cdist(jg.ones(3, 2), jg.ones(2, 3)), RuntimeError,
     "same number of columns. X1: 2 X2: 3"),
    (lambda: jg.cdist(jg.ones(3, 2), jg.ones(2, 2), p=-1), RuntimeError, "non-negative p"),
    (lambda: jg.cdist(jg.ones(3, 2, dtype=jg.int64), jg.ones(2, 2)), RuntimeError,
     "floating-point dtypes, X1"),
    (lambda: jg.cdist(jg.ones(3, 2), jg.ones(2, 2), compute_mode="bad"), ValueError,
     "bad is not a valid value for compute_mode"),
])
def test_errors_follow_torch(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_mv_and_dist_match_numpy_and_gradcheck():
    m, v = _f64(3, 4), _f64(4)
    np.testing.assert_allclose(jg.mv(m, v).detach().numpy(), m.detach().numpy() @ v.detach().numpy())
    assert gradcheck(jg.mv, (m, v))
    a, b = _f64(2, 3), _f64(3)
    diff = a.detach().numpy() - b.detach().numpy()
    for p in (0, 1, 2, 3, float("inf"), -float("inf")):
        expected = (np.count_nonzero(diff) if p == 0 else np.max(np.abs(diff)) if p == np.inf
                    else np.min(np.abs(diff)) if p == -np.inf
                    else np.sum(np.abs(diff) ** p) ** (1 / p))
        np.testing.assert_allclose(jg.dist(a, b, p).item(), expected, rtol=1e-12)
    assert gradcheck(lambda a, b: jg.dist(a, b, 3), (a, b))
    # torch 2.13: dist([[1,2],[3,4]], [1,1], p) for p = 2, 1, inf, 0, -inf, 3
    t = jg.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=jg.float64)
    got = [jg.dist(t, jg.ones(2, dtype=jg.float64), p).item()
           for p in (1, float("inf"), 0, -float("inf"))]
    assert got == [6.0, 3.0, 3.0, 0.0]
    np.testing.assert_allclose(jg.dist(t, jg.ones(2, dtype=jg.float64), 3).item(), 3.3019272,
                               rtol=1e-7)


def test_cdist_matches_torch_values_and_broadcasts_batches():
    a = jg.tensor([[1.0, 2.0], [3.0, 4.0], [0.0, -1.0]])
    b = jg.tensor([[1.0, 0.0], [2.0, 2.0]])
    # torch 2.13 for p = 2, 1, inf, 0
    np.testing.assert_allclose(jg.cdist(a, b).numpy(),
                               [[2.0, 1.0], [4.4721, 2.2361], [1.4142, 3.6056]], atol=1e-4)
    assert jg.cdist(a, b, p=1).tolist() == [[2.0, 1.0], [6.0, 3.0], [2.0, 5.0]]
    assert jg.cdist(a, b, p=float("inf")).tolist() == [[2.0, 1.0], [4.0, 2.0], [1.0, 3.0]]
    assert jg.cdist(a, b, p=0).tolist() == [[1.0, 1.0], [2.0, 2.0], [2.0, 2.0]]
    assert jg.cdist(jg.ones(2, 1, 3, 2), jg.ones(4, 2, 2)).shape == (2, 4, 3, 2)
    x1, x2 = _f64(2, 3, 4), _f64(2, 5, 4)
    ref = np.linalg.norm(x1.detach().numpy()[:, :, None] - x2.detach().numpy()[:, None], axis=-1)
    np.testing.assert_allclose(jg.cdist(x1, x2).detach().numpy(), ref, rtol=1e-12)
    assert gradcheck(lambda x1, x2: jg.cdist(x1, x2, p=1.5), (x1, x2))


def test_adjoint_views_and_transpose_in_place():
    m = jg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert m.H.tolist() == [[1.0, 3.0], [2.0, 4.0]] and m.H.data_ptr() == m.data_ptr()
    assert jg.tensor(2.0).H.item() == 2.0
    assert jg.ones(2, 3, 4).mH.shape == (2, 4, 3)
    with pytest.raises(RuntimeError, match="Got 1-D tensor"):
        _ = jg.ones(3).H
    with pytest.raises(RuntimeError, match="consider using tensor.mH"):
        _ = jg.ones(2, 2, 2).H
    with pytest.raises(RuntimeError, match="tensor.mH is only supported on matrices"):
        _ = jg.ones(3).mH
    x = _f64(2, 3)
    y = x * 1
    assert y.transpose_(0, 1) is y and y.shape == (3, 2)
    np.testing.assert_array_equal(y.detach().numpy(), x.detach().numpy().T)
    (y * jg.arange(6.0, dtype=jg.float64).reshape(3, 2)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(6.0).reshape(3, 2).T)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.transpose_(0, 1)


def _matrix_ops(a, b, v):
    out = a.trace() + jg.mv(a, v).sum() + jg.dist(a, b[:3], 3) + jg.cdist(a, b).sum()
    return out + a.H.sum() * 2 + a.mH[0, 1] + a.mode(0).values.sum()


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_matrix_ops_compile_in_one_graph_with_eager_gradients(backend):
    a, b, v = _f64(3, 3), _f64(4, 3), _f64(3)
    expected = _matrix_ops(a, b, v)
    expected.backward()
    grads = [t.grad.numpy().copy() for t in (a, b, v)]
    for t in (a, b, v):
        t.grad = None
    got = jg.compile(_matrix_ops, backend=backend)(a, b, v)
    got.backward()
    np.testing.assert_allclose(got.item(), expected.item(), rtol=1e-12)
    for t, g in zip((a, b, v), grads, strict=True):
        np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-10, atol=1e-12)
    report = jg.explain(_matrix_ops)(a, b, v)
    assert report.graph_count == 1 and report.graph_break_count == 0


def test_in_place_shape_changes_stay_in_the_graph_and_keep_eager_values():
    # functionalized (Note [In-place view ops] in jitgrad/trace/capture/functionalize.py); resize_ breaks
    def step(x):
        y = x * 2
        y.transpose_(0, 1)
        z = y * 3
        z.unsqueeze_(0)
        return z.sum(1)

    x = _f64(2, 3)
    report = jg.explain(step)(x)
    assert report.graph_break_count == 0 and report.graph_count == 1
    x.grad = None
    expected = step(x)
    expected.sum().backward()
    grad = x.grad.numpy().copy()
    x.grad = None
    got = jg.compile(step)(x)
    got.sum().backward()
    np.testing.assert_array_equal(got.detach().numpy(), expected.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), grad)


# ----- mode ----------------------------------------------------------------------------

def test_mode_matches_torch():
    m = jg.tensor([[1, 2, 2, 3], [4, 4, 1, 1]])
    values, indices = m.mode()  # torch 2.13: ties -> the smallest value, its last index
    assert values.tolist() == [2, 1] and indices.tolist() == [2, 3]
    values, indices = jg.mode(m, 0)
    assert values.tolist() == [1, 2, 1, 1] and indices.tolist() == [0, 0, 1, 1]
    values, indices = jg.mode(m, 1, keepdim=True)
    assert values.tolist() == [[2], [1]] and indices.tolist() == [[2], [3]]
    assert tuple(jg.tensor([3, 1, 3, 1, 2]).mode()) == (1, 3)
    values, indices = jg.tensor(3.0).mode()
    assert (values.item(), indices.item(), indices.dtype) == (3.0, 0, jg.int64)
    assert repr(m.mode()).startswith("jitgrad.return_types.mode(")
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        jg.tensor([]).mode()


def test_mode_gradient_goes_to_the_returned_index():
    x = jg.tensor([[0.5, 0.5, 1.0], [2.0, 3.0, 3.0]], dtype=jg.float64, requires_grad=True)
    values, indices = x.mode(1)
    assert values.tolist() == [0.5, 3.0] and indices.tolist() == [1, 2]
    (values * jg.tensor([1.0, 10.0], dtype=jg.float64)).sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 10.0]]


# ----- resize_, resize, pin_memory, name -----------------------------------------------

def test_resize_in_place_follows_torch_storage_semantics():
    x = jg.arange(6.0)
    y = x.clone()
    assert y.resize_(2, 2) is y and y.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert y.resize_(3, 2).tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]  # storage kept
    grown = x.clone().resize_(4, 2)
    assert grown.shape == (4, 2) and grown.reshape(-1)[:6].tolist() == x.tolist()
    view = x.clone()[1:]
    assert view.resize_(2, 2).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    # a transposed tensor keeps its strides for its own shape, else is laid out from storage
    t = jg.arange(6.0).reshape(2, 3).t()
    assert t.resize_(3, 2).stride() == (1, 3)
    assert jg.arange(6.0).reshape(2, 3).t().resize_(6).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0,
                                                                     5.0]
    shared = jg.arange(6.0)
    view = shared[:]
    assert view.resize_(jg.Size([2, 3])).data_ptr() == shared.data_ptr()
    view[0, 0] = 7.0  # still the same storage
    assert shared[0].item() == 7.0


@pytest.mark.parametrize(("call", "pattern"), [
    (lambda: jg.ones(3, requires_grad=True).resize_(2), "cannot resize variables that require"),
    (lambda: (jg.ones(3, requires_grad=True) * 2).resize_(2), "cannot resize variables"),
    (lambda: jg.ones(3).resize_(-1), "negative dimension"),
    (lambda: jg.arange(6.0).view(2, 3).resize_(3, 3), "cannot grow the storage of a view"),
])
def test_resize_errors(call, pattern):
    with pytest.raises(RuntimeError, match=pattern):
        call()


def test_deprecated_resize_is_a_differentiable_view_of_the_same_size():
    q = jg.ones(4, requires_grad=True)
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        r = q.resize(2, 2)
    assert r.shape == (2, 2) and r.requires_grad and not r.is_leaf
    (r * jg.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert q.grad.tolist() == [1.0, 2.0, 3.0, 4.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match=r"requested resize to 2x3 \(6 elements in total\)"):
            q.resize(2, 3)


def test_pin_memory_raises_as_torch_without_accelerator_and_name_is_none():
    t = jg.ones(2)
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none"):
        t.pin_memory()
    assert t.is_pinned() is False
    assert t.name is None and jg.nn.Parameter(t).name is None
    with pytest.raises(AttributeError):
        t.name = "x"


# ----- Tensor.new, torch.range, set_default_tensor_type --------------------------------

def test_tensor_new_forms_match_torch():
    t = jg.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=jg.float64)
    assert t.new().shape == (0,) and t.new().dtype == jg.float64
    assert t.new(2, 3).shape == (2, 3) and t.new(jg.Size([2])).shape == (2,)
    assert t.new([1, 2]).tolist() == [1.0, 2.0] and t.new((1, 2)).dtype == jg.float64
    assert t.new(np.array([1, 2])).dtype == jg.float64
    assert jg.tensor([1, 2]).new([1.5]).tolist() == [1]  # truncated to self's int64
    leaf = jg.ones(2, requires_grad=True)
    alias = leaf.new(leaf)  # torch 2.13: an alias with history (AliasBackward0)
    assert alias.data_ptr() == leaf.data_ptr() and alias.requires_grad and not alias.is_leaf
    assert not leaf.new(2).requires_grad


@pytest.mark.parametrize(("call", "error", "pattern"), [
    (lambda t: t.new(jg.tensor([1, 2])), TypeError, "expected a tensor of dtype"),
    (lambda t: t.new(2.0), TypeError, r"data must be a sequence \(got float\)"),
    (lambda t: t.new(2, dtype=jg.int32), TypeError, "dtype"),
    (lambda t: t.new(-1), RuntimeError, "negative dimension -1"),
])
def test_tensor_new_errors(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(jg.ones(2, dtype=jg.float64))


def test_range_includes_the_end_and_warns():
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        out = jg.range(1, 4)
    assert out.tolist() == [1.0, 2.0, 3.0, 4.0] and out.dtype == jg.float32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert jg.range(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
        np.testing.assert_array_equal(jg.range(0, 0.9, 0.3).numpy(),
                                      np.float32(np.arange(4) * 0.3))
        assert jg.range(1, 4, dtype=jg.int64).tolist() == [1, 2, 3, 4]
        assert jg.range(5, 1, -2).tolist() == [5.0, 3.0, 1.0]
        with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent"):
            jg.range(5, 1)
        with pytest.raises(RuntimeError, match="step must be nonzero"):
            jg.range(0, 1, 0)


def test_set_default_tensor_type_sets_the_default_dtype():
    try:
        with pytest.warns(UserWarning, match="set_default_tensor_type.. is deprecated"):
            jg.set_default_tensor_type(jg.DoubleTensor)
        assert jg.ones(1).dtype == jg.float64 and jg.tensor([1.5]).dtype == jg.float64
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jg.set_default_tensor_type("torch.FloatTensor")
            assert jg.ones(1).dtype == jg.float32
            for bad, error in ((jg.LongTensor, TypeError), ("torch.LongTensor", TypeError),
                               (jg.float64, TypeError), ("torch.cuda.FloatTensor", TypeError),
                               ("torch.Foo", AttributeError),
                               ("FloatTensor", ModuleNotFoundError)):
                with pytest.raises(error):
                    jg.set_default_tensor_type(bad)
    finally:
        jg.set_default_dtype(jg.float32)
