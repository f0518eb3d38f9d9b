"""Indexing semantics (research/eager_autograd.md §2.8, §4 cases 16-17): PyTorch's view/copy
rules, dim placement, gradient accumulation over duplicates, setitem, index ops, and the
error texts of torch 2.13."""

import re

import numpy as np
import pytest

import jitgrad as jg


def _leaf(values) -> jg.Tensor:
    return jg.tensor(values, dtype=jg.float64, requires_grad=True)


# ----- what indexing returns ---------------------------------------------------------------

def test_basic_indexing_returns_views_and_advanced_indexing_copies():
    x = jg.arange(12.0).reshape(3, 4)
    for view in (x[1], x[1:, ::2], x[..., 1], x[None], x[:], x[1, 2], x[jg.tensor(1)]):
        assert view._base is x._base and np.shares_memory(view.numpy(), x.numpy())
    for copy in (x[[0, 2]], x[x > 4], x[1, [0, 3]], x[jg.tensor([1])], x[True]):
        assert copy._base is None and not np.shares_memory(copy.numpy(), x.numpy())
    assert x[1, 2].shape == () and x[1, 2].item() == 6.0


@pytest.mark.parametrize("index, shape", [
    ((0, slice(None), [1, 2]), (6, 2)),             # the int selects first (numpy: (2, 6))
    (([0, 1], slice(None), [1, 3]), (2, 6)),        # separated index tensors go first
    ((slice(None), [[0], [1]], [1, 2]), (5, 2, 2)),  # adjacent ones stay in place, broadcast
    ((Ellipsis, [0, 0, 1]), (5, 6, 3)),
    ((None, 1, slice(1, 3), None), (1, 2, 1, 7)),
    ((True,), (1, 5, 6, 7)),
    ((False,), (0, 5, 6, 7)),
    (([],), (0, 6, 7)),
])
def test_result_shapes_follow_pytorch(index, shape):
    x = jg.zeros(5, 6, 7)
    assert x[index].shape == shape


def test_four_dim_separated_index_tensors():
    x = jg.zeros(5, 6, 7, 8)
    assert x[:, [0, 1], :, [1, 2]].shape == (2, 5, 7)


def test_values_match_numpy_for_masks_lists_and_mixed_indices():
    a = np.arange(60.0).reshape(3, 4, 5)
    x = jg.from_numpy(a)
    mask = a[:, :, 0] > 20
    np.testing.assert_array_equal(x[jg.from_numpy(mask)].numpy(), a[mask])
    np.testing.assert_array_equal(x[:, [3, -1, 0]].numpy(), a[:, [3, -1, 0]])
    np.testing.assert_array_equal(x[1:, 2, [4, 0]].numpy(), a[1:, 2][:, [4, 0]])
    np.testing.assert_array_equal(x[jg.tensor([[0, 1], [2, 2]]), 1].numpy(),
                                  a[[[0, 1], [2, 2]], 1])
    np.testing.assert_array_equal(x[[0, 1], [1, 2]].numpy(), a[[0, 1], [1, 2]])


def test_list_of_lists_is_a_tuple_of_indices_with_a_deprecation_warning():
    x = jg.arange(9).reshape(3, 3)
    with pytest.warns(UserWarning, match="Using a non-tuple sequence for multidimensional "
                                         "indexing is deprecated"):
        out = x[[[0, 1], [1, 2]]]
    assert out.tolist() == [1, 5]


def test_uint8_index_is_a_deprecated_mask():
    with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
        out = jg.arange(3)[jg.tensor([1, 0, 1], dtype=jg.uint8)]
    assert out.tolist() == [0, 2]


def test_iterating_yields_views_of_the_rows():
    x = jg.arange(6.0).reshape(3, 2)
    rows = list(x)
    assert [r.tolist() for r in rows] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert all(r._base is x._base for r in rows)


# ----- errors ----------------------------------------------------------------------------

@pytest.mark.parametrize("index, error, message", [
    (5, IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
    ((slice(None), 5), IndexError, "index 5 is out of bounds for dimension 1 with size 4"),
    ([5], IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
    ((slice(None), [5]), IndexError, "index 5 is out of bounds for dimension 0 with size 4"),
    (([0], [5]), IndexError, "index 5 is out of bounds for dimension 1 with size 4"),
    ([-5], IndexError, "index -5 is out of bounds for dimension 0 with size 3"),
    (slice(None, None, -1), ValueError, "step must be greater than zero"),
    (slice(None, None, 0), ValueError, "step must be greater than zero"),
    ((0, 0, 0), IndexError, "too many indices for tensor of dimension 2"),
    (([0, 1], [0, 1, 2]), IndexError, "shape mismatch: indexing tensors could not be broadcast "
                                      "together with shapes [2], [3]"),
    (1.0, IndexError, "only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                      "Variables are valid indices (got float)"),
])
def test_index_errors(index, error, message):
    with pytest.raises(error, match=re.escape(message)):
        jg.zeros(3, 4)[index]


def test_index_error_texts_for_masks_dtypes_and_0d_tensors():
    with pytest.raises(IndexError, match=re.escape(
            "The shape of the mask [2] at index 0 does not match the shape of the indexed tensor "
            "[3] at index 0")):
        jg.zeros(3)[jg.tensor([True, False])]
    with pytest.raises(IndexError, match=re.escape(
            "The shape of the mask [2] at index 0 does not match the shape of the indexed tensor "
            "[3, 4] at index 1")):
        jg.zeros(3, 4)[:, jg.tensor([True, False])]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool "
                                         "tensors"):
        jg.zeros(3)[jg.tensor([1.0])]
    with pytest.raises(IndexError, match=re.escape("invalid index of a 0-dim tensor. Use "
                                                   "`tensor.item()` in Python")):
        jg.tensor(1.0)[0]


# ----- gradients of indexing ---------------------------------------------------------------

def test_duplicate_indices_accumulate_gradient():
    x = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[[0, 0, 2, 0]].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 0.0, 1.0])
    y = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y.index_select(0, jg.tensor([2, 2, 0])).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 0.0, 2.0])
    z = jg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    z.gather(1, jg.tensor([[1, 1], [0, 1]])).sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), [[0.0, 2.0], [1.0, 1.0]])


def test_gradient_of_mask_and_basic_indexing():
    x = _leaf([[1.0, -2.0], [-3.0, 4.0]])
    (x[x > 0] * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[3.0, 0.0], [0.0, 3.0]])
    y = _leaf(np.arange(6.0).reshape(2, 3))
    (y[1, 1:] * jg.tensor([10.0, 20.0], dtype=jg.float64)).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [[0.0, 0.0, 0.0], [0.0, 10.0, 20.0]])


def test_second_derivative_through_advanced_indexing():
    x = _leaf([1.0, 2.0, 3.0])
    y = x[[0, 0, 2]]
    (g,) = jg.autograd.grad((y * y * y).sum(), x, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), [6.0, 0.0, 27.0])  # 2 * 3x^2, 0, 3x^2
    (gg,) = jg.autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(gg.numpy(), [12.0, 0.0, 18.0])


# ----- setitem -------------------------------------------------------------------------------

def test_setitem_with_every_index_kind_matches_numpy():
    a = np.zeros((3, 4))
    x = jg.zeros(3, 4, dtype=jg.float64)
    writes = [
        (1, 5.0), ((slice(None), 2), np.array([1.0, 2.0, 3.0])), ((0, slice(1, 3)), 7.0),
        (([0, 2], [3, 3]), np.array([8.0, 9.0])), ((2, [0, 1]), np.array([-1.0, -2.0])),
        (np.array([True, False, True]), 4.0), ((Ellipsis, 0), 6.0), ((None, 1, 1), 3.0),
    ]
    for index, value in writes:
        a[index] = value
        jg_index = tuple(jg.from_numpy(i) if isinstance(i, np.ndarray) else i
                         for i in (index if isinstance(index, tuple) else (index,)))
        x[jg_index] = jg.from_numpy(value) if isinstance(value, np.ndarray) else value
    np.testing.assert_array_equal(x.numpy(), a)
    assert x._version == len(writes)


def test_setitem_casts_to_the_target_dtype():
    x = jg.zeros(3, dtype=jg.int64)
    x[0] = 1.7
    x[1:] = jg.tensor([2.9, -3.9])
    assert x.tolist() == [1, 2, -3]


def test_setitem_errors():
    with pytest.raises(RuntimeError, match=re.escape(
            "The expanded size of the tensor (3) must match the existing size (2) at "
            "non-singleton dimension 0.  Target sizes: [3].  Tensor sizes: [2]")):
        jg.zeros(3)[:] = jg.ones(2)
    with pytest.raises(RuntimeError, match=re.escape(
            "shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of "
            "shape [2]")):
        jg.ones(3)[jg.tensor([0, 1])] = jg.ones(3)
    with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes "
                                           "match, got Float for the destination and Double for "
                                           "the source."):
        jg.zeros(3)[jg.tensor([0])] = jg.tensor([1.0], dtype=jg.float64)


def test_duplicate_targets_in_a_non_accumulating_write_all_get_gradient():
    v = jg.tensor([1.0, 2.0], requires_grad=True)
    y = jg.zeros(3).index_put((jg.tensor([0, 0]),), v)
    assert y.tolist() == [2.0, 0.0, 0.0]
    y.sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), [1.0, 1.0])


def test_setitem_with_duplicate_advanced_indices_gives_every_value_gradient():
    v = _leaf([1.0, 2.0])
    x = jg.zeros(3, dtype=jg.float64)
    x[[1, 1]] = v
    assert x.tolist() == [0.0, 2.0, 0.0]
    (x * 3).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), [3.0, 3.0])


def test_fancy_augmented_assignment_does_not_accumulate_duplicates():
    x = jg.zeros(4)
    x[[1, 1, 1]] += 1
    assert x.tolist() == [0.0, 1.0, 0.0, 0.0]
    y = jg.zeros(4)
    y.index_put_((jg.tensor([1, 1, 1]),), jg.tensor(1.0), accumulate=True)
    assert y.tolist() == [0.0, 3.0, 0.0, 0.0]


# ----- index-based ops -------------------------------------------------------------------

def test_gather_scatter_index_add_values():
    src = jg.arange(1.0, 7.0).reshape(2, 3)
    index = jg.tensor([[0, 1, 2], [2, 0, 0]])
    np.testing.assert_array_equal(jg.zeros(3, 3).scatter(0, index, src).numpy(),
                                  [[1, 5, 6], [0, 2, 0], [4, 0, 3]])
    np.testing.assert_array_equal(jg.zeros(3, 3).scatter_add(0, index, src).numpy(),
                                  [[1, 5, 6], [0, 2, 0], [4, 0, 3]])
    np.testing.assert_array_equal(jg.zeros(2, 3).scatter(1, index[:, :2], 9.0).numpy(),
                                  [[9, 9, 0], [9, 0, 9]])
    np.testing.assert_array_equal(src.gather(1, jg.tensor([[2, 2], [0, 1]])).numpy(),
                                  [[3, 3], [4, 5]])
    x = jg.ones(3, 2)
    x.index_add_(0, jg.tensor([0, 2, 0]), jg.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    np.testing.assert_array_equal(x.numpy(), [[7, 9], [1, 1], [4, 5]])
    counts = jg.zeros(4).scatter_add_(0, jg.tensor([1, 3, 1]), jg.ones(3))
    assert counts.tolist() == [0.0, 2.0, 0.0, 1.0]


def test_scatter_with_duplicate_targets_gives_every_source_gradient():
    src = _leaf([1.0, 2.0])
    out = jg.zeros(3, dtype=jg.float64).scatter(0, jg.tensor([1, 1]), src)
    out.sum().backward()
    np.testing.assert_array_equal(src.grad.numpy(), [1.0, 1.0])


def test_index_op_errors():
    with pytest.raises(RuntimeError, match=re.escape(
            "Size does not match at dimension 1 expected index [1, 3] to be no larger than self "
            "[2, 2] apart from dimension 0")):
        jg.ones(2, 2).gather(0, jg.tensor([[0, 0, 0]]))
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 0 with size 2"):
        jg.ones(2, 2).gather(0, jg.tensor([[5]]))
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions "
                                           "as input tensor"):
        jg.ones(2, 2).gather(0, jg.tensor([1]))
    with pytest.raises(IndexError, match="index out of range in self"):
        jg.ones(3).index_select(0, jg.tensor([-1]))
    with pytest.raises(RuntimeError, match=re.escape(
            "source tensor shape must match self tensor shape, excluding the specified dimension. "
            "Got self.shape = [3, 4] source.shape = [2, 5]")):
        jg.ones(3, 4).index_add(0, jg.tensor([0, 1]), jg.ones(2, 5))
    with pytest.raises(RuntimeError, match=re.escape("scatter(): Expected self.dtype to be equal "
                                                     "to src.dtype")):
        jg.zeros(3).scatter(0, jg.tensor([0]), jg.ones(1, dtype=jg.float64))
    with pytest.raises(RuntimeError, match="masked_select: expected BoolTensor for mask"):
        jg.ones(3).masked_select(jg.tensor([1, 0, 1]))


def test_masked_select_broadcasts_and_nonzero_lists_positions():
    x = jg.tensor([[1.0], [2.0]])
    assert x.masked_select(jg.tensor([True, False, True])).tolist() == [1.0, 1.0, 2.0, 2.0]
    t = jg.tensor([[0, 3], [5, 0]])
    assert jg.nonzero(t).tolist() == [[0, 1], [1, 0]]
    assert jg.argwhere(t).dtype == jg.int64
    assert [r.tolist() for r in t.nonzero(as_tuple=True)] == [[0, 1], [1, 0]]
    assert jg.tensor(5.0).nonzero().shape == (1, 0)
    assert [r.tolist() for r in jg.tensor(5.0).nonzero(as_tuple=True)] == [[0]]


def test_take_along_dim_broadcasts_other_dims():
    x = jg.arange(6.0).reshape(2, 3)
    assert x.take_along_dim(jg.tensor([[0], [2]]), 1).tolist() == [[0.0], [5.0]]
    assert jg.take_along_dim(x, jg.tensor([[1, 2]]), 1).tolist() == [[1.0, 2.0], [4.0, 5.0]]


# ----- second derivatives: the backward formulas run on Tensors (create_graph) -----------

SECOND_ORDER = ["getitem_slices_step", "getitem_list_duplicates", "getitem_int_then_list",
                "getitem_bool_mask", "gather_dim1_transposed", "scatter_src", "scatter_add",
                "index_add", "index_put_accumulate_duplicates", "masked_select_broadcast",
                "setitem_slice_tensor", "mul_on_view", "two_views_modified", "copy_broadcast",
                "split_sizes", "unbind_partial_use", "cat_three_noncontiguous", "stack_last_dim",
                "repeat_new_dims_transposed", "flip_dims_strided", "roll_dims", "triu",
                "diagonal_adjacent_dims", "narrow", "expand_keep_dim", "repeat_interleave"]


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_gradient_of_the_gradient(name):
    from tests.eager.op_table import OP_CASES

    case = next(c for c in OP_CASES if c.name == name)
    tensors = case.tensors(case.arrays(np.float64), requires_grad=True)
    diff = [t for t in tensors if t.requires_grad]

    def cubed(*inputs):
        out = case.fn(*inputs)
        outs = out if isinstance(out, (tuple, list)) else [out]
        return sum((o * o * o).sum() for o in outs)

    def first_gradient(*inputs):
        with jg.enable_grad():
            wrt = [t for t in inputs if t.requires_grad]
            return jg.autograd.grad(cubed(*inputs), wrt, create_graph=True)

    recorded = first_gradient(*tensors)
    plain = jg.autograd.grad(cubed(*tensors), diff)  # the numpy-namespace formulas
    assert any(g.requires_grad for g in recorded)
    for g_recorded, g_plain in zip(recorded, plain, strict=True):
        np.testing.assert_allclose(g_recorded.detach().numpy(), g_plain.numpy(), rtol=1e-12)
    assert jg.autograd.gradcheck(first_gradient, tensors, atol=1e-5)


def test_python_range_indexes_like_a_list():
    logprobs = _leaf(np.log(np.full((3, 4), 0.25)))
    targets = jg.tensor([0, 3, 3])
    loss = -logprobs[range(3), targets].mean()
    loss.backward()
    expected = np.zeros((3, 4))
    expected[[0, 1, 2], [0, 3, 3]] = -1 / 3
    np.testing.assert_allclose(logprobs.grad.numpy(), expected)
    x = jg.zeros(3, 4)
    x[range(3), targets] -= 1
    assert x.sum().item() == -3.0 and x[1, 3].item() == -1.0


def test_integer_steps_of_a_contiguous_tensor_are_views_laid_out_as_index_strides_says():
    # the `index` op's shortcut for `x[k, t]` (a backward formula's step of a sequence)
    # returns what the general layout step would: the C-contiguous view itself
    from jitgrad.eager import layout
    from jitgrad.eager.ops.indexing import INDEX

    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    for index in [(1, 2), (0,), (1, 0, 3)]:
        out = INDEX.forward(x, index)
        general = layout.with_strides(x[index], layout.index_strides(x, index, x[index].shape))
        assert np.shares_memory(out, x) and out.strides == general.strides
        np.testing.assert_array_equal(out, general)
    strided = x[:, ::2]  # not C-contiguous: the general step copies into C order
    out = INDEX.forward(strided, (1,))
    assert out.flags.c_contiguous and not np.shares_memory(out, x)
