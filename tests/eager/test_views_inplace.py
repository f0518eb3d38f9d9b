"""Views, version counters and in-place ops: PyTorch's semantics (research/eager_autograd.md
§1 rows 7-9, §2.0, §4 cases 1 and 21), with the values and error texts measured there."""

import re

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.eager.ops.inplace import check_inplace

E7 = "a leaf Variable that requires grad is being used in an in-place operation."
E8 = "a view of a leaf Variable that requires grad is being used in an in-place operation."
E10 = ("A view was created in no_grad mode and is being modified inplace with grad mode enabled. "
       "Given that this use case is ambiguous and error-prone, it is forbidden.")
OVERLAP = re.escape("unsupported operation: more than one element of the written-to tensor "
                    "refers to a single memory location. Please clone() the tensor before "
                    "performing the operation.")


def _e9(output_nr: int, op: str) -> str:
    return (f"Output {output_nr} of {op} is a view and is being modified inplace. This view is the "
            "output of a function that returns multiple views. Such functions do not allow the "
            "output views to be modified inplace. You should replace the inplace operation by an "
            "out-of-place one.")


def _leaf(values) -> jg.Tensor:
    return jg.tensor(values, dtype=jg.float64, requires_grad=True)


# ----- views share storage, version counter and base --------------------------------------

def test_detached_alias_shares_storage_and_version():
    a = jg.tensor([1.0, 2.0, 3.0])
    d = a.detach()
    d.add_(1)
    assert a._version == 1 and d._version == 1
    np.testing.assert_array_equal(a.numpy(), [2.0, 3.0, 4.0])


def test_view_ops_share_storage_version_and_root_base():
    x = jg.arange(12.0).reshape(3, 4)
    root = x._base
    views = [x[1], x[:, 1:3], x.t(), x.transpose(0, 1)[2], x.unsqueeze(0), x.squeeze(),
             x.narrow(1, 1, 2), x.select(0, 2), x.diagonal(), x.expand(2, 3, 4), x.view(12),
             x.flatten(), x.unbind(1)[0], x.split(2)[1], x.chunk(2, 1)[0], x[..., None], x.mT]
    for v in views:
        assert v._base is root, v.grad_fn
        assert np.shares_memory(v.numpy(), root.numpy())
    x[1, 2] = 100.0
    assert all(v._version == 1 for v in views)
    assert views[1][1, 1].item() == 100.0 and views[2][2, 1].item() == 100.0


def test_copies_are_not_views():
    x = jg.arange(12.0).reshape(3, 4)
    for t in (x.t().reshape(12), x.clone(), x[[0, 2]], x[x > 3], jg.cat([x, x]), x.flip(0),
              x.t().contiguous()):
        assert t._base is None
        assert not np.shares_memory(t.numpy(), x.numpy())
    assert x.contiguous() is x


def test_writes_through_a_view_reach_the_base():
    x = jg.zeros(3, 4)
    x[1:, ::2].fill_(7.0)
    x.t()[0].add_(1.0)
    x.diagonal().mul_(10.0)
    expected = np.zeros((3, 4))
    expected[1:, ::2] = 7.0
    expected[:, 0] += 1.0
    expected[np.arange(3), np.arange(3)] *= 10.0
    np.testing.assert_array_equal(x.numpy(), expected)
    assert x._version == 3


# ----- the saved-value version check (E6) ----------------------------------------------

def test_modifying_a_saved_output_raises_e6():
    a = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a.sigmoid()
    b[1] = 2
    with pytest.raises(RuntimeError) as excinfo:
        b.sum().backward()
    message = str(excinfo.value)
    assert message.startswith("one of the variables needed for gradient computation has been "
                              "modified by an inplace operation: [jitgrad.FloatTensor [3]], "
                              "which is output 0 of Sigmoid, is at version 1; expected version 0 "
                              "instead.")


def test_hand_written_sigmoid_saves_other_values_and_backpropagates():
    a = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = 1 / ((-a).exp() + 1)
    b[1] = 2
    b.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [0.19661193, 0.0, 0.04517666], rtol=1e-6)
    np.testing.assert_array_equal(b.detach().numpy()[1], 2.0)


def test_saved_result_of_an_inplace_op_is_checked_against_later_writes():
    a = _leaf([1.0, 2.0, 3.0])
    b = a.clone()
    b.exp_()
    b.add_(1)
    with pytest.raises(RuntimeError, match="output 0 of Exp, is at version 2; expected version 1"):
        b.sum().backward()


def test_operand_that_is_the_target_itself_is_reported_as_modified():
    x = _leaf([1.0, 2.0, 3.0]).clone()
    x.mul_(x)
    with pytest.raises(RuntimeError, match="output 0 of Mul, is at version 1; expected version 0"):
        x.sum().backward()


def test_mul_inplace_keeps_the_old_value_for_the_other_operand():
    a = _leaf([1.0, 2.0, 3.0])
    w = _leaf([4.0, 5.0, 6.0])
    b = a.clone()
    b.mul_(w)
    b.add_(1)  # later writes do not disturb the saved old value of b
    b.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(a.grad.numpy(), [4.0, 5.0, 6.0])
    assert b.grad_fn.name() == "AddBackward"


# ----- forbidden in-place ops: E7-E10 ----------------------------------------------------

def test_inplace_on_leaf_requiring_grad_raises_e7():
    w = _leaf([1.0, -2.0])
    for op in (lambda: w.add_(1), lambda: w.relu_(), lambda: w.zero_(),
               lambda: w.copy_(jg.ones(2)), lambda: w.__setitem__([0], 5.0)):
        with pytest.raises(RuntimeError, match=E7):
            op()
    np.testing.assert_array_equal(w.detach().numpy(), [1.0, -2.0])
    assert w._version == 0
    with pytest.raises(RuntimeError, match=E7):
        check_inplace(w)


def test_inplace_relu_on_a_clone_gives_the_relu_gradient():
    x = _leaf([-1.0, 0.0, 2.0, 3.0])
    y = x.clone()
    y.relu_()
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 1.0, 1.0])
    assert y.grad_fn.name() == "ReluBackward" and not y.is_leaf


def test_inplace_on_view_of_leaf_raises_e8():
    w = _leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=E8):
        w[0] = 5.0
    with pytest.raises(RuntimeError, match=E8):
        w[1:].mul_(2)
    with pytest.raises(RuntimeError, match=E8):
        w.t().zero_()


def test_inplace_on_multi_output_views_raises_e9():
    a = _leaf([0.0, 1.0, 2.0, 3.0])
    b = a.clone()
    with pytest.raises(RuntimeError, match=_e9(1, "Split")):
        b.split(2)[1].mul_(2)
    with pytest.raises(RuntimeError, match=_e9(1, "Split")):
        b.chunk(2)[1].add_(1)
    with pytest.raises(RuntimeError, match=_e9(1, "SplitWithSizes")):
        b.split([1, 3])[1].mul_(2)
    with pytest.raises(RuntimeError, match=_e9(0, "Unbind")):
        b.reshape(2, 2).unbind()[0].mul_(2)
    p, _ = b.reshape(2, 2).unbind()
    with pytest.raises(RuntimeError, match="This view is the output of a function that returns "
                                           "multiple views"):
        p[0].mul_(2)
    assert b._version == 0


def test_multi_output_views_may_be_modified_when_no_gradient_is_involved():
    x = jg.zeros(4)
    x.split(2)[1].add_(1)
    with jg.no_grad():
        p, _ = _leaf([1.0, 2.0]).unbind()
        p.mul_(3)
    np.testing.assert_array_equal(x.numpy(), [0.0, 0.0, 1.0, 1.0])


def test_view_made_under_no_grad_modified_with_grad_raises_e10():
    a = _leaf([1.0, 2.0, 3.0, 4.0])
    b = a.clone()
    with jg.no_grad():
        v = b[:2]
        leaf_view = a[:2]
    with pytest.raises(RuntimeError, match=E10):
        v.mul_(2)
    with pytest.raises(RuntimeError, match=E10):
        leaf_view.mul_(2)
    with pytest.raises(RuntimeError, match=E10):
        v[0] = jg.ones((), requires_grad=True)
    with pytest.raises(RuntimeError, match=E10):
        v[0] = 1.0
    with jg.no_grad():
        v.mul_(2)  # both inside no_grad: fine, not tracked
    np.testing.assert_array_equal(b.detach().numpy(), [2.0, 4.0, 3.0, 4.0])


def test_view_made_under_no_grad_of_a_plain_tensor_can_be_modified():
    x = jg.zeros(4)
    with jg.no_grad():
        v = x[:2]
    v.add_(1)
    assert x._version == 1 and x.tolist() == [1.0, 1.0, 0.0, 0.0]


# ----- CopySlices: in-place through a view rebases the base's history --------------------

def test_inplace_mul_on_a_view_of_a_clone():
    a = jg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    b = a.clone()
    view = b[1:3]
    view.mul_(10)
    assert b.grad_fn.name() == "CopySlices"
    assert view.grad_fn.name() == "AsStridedBackward"
    assert b.grad_fn.next_functions[0][0].name() == "CloneBackward"
    b.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 10.0, 10.0, 1.0])
    np.testing.assert_array_equal(b.detach().numpy(), [1.0, 20.0, 30.0, 4.0])


def test_gradient_through_the_modified_view_itself():
    a = _leaf([1.0, 2.0, 3.0, 4.0])
    b = a.clone()
    view = b[1:3]
    view.mul_(10)
    (view * jg.tensor([1.0, 2.0], dtype=jg.float64)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 10.0, 20.0, 0.0])


def test_setitem_with_a_grad_value_makes_a_plain_tensor_require_grad():
    x = jg.zeros(3, dtype=jg.float64)
    w = _leaf([5.0, 6.0])
    x[0:2] = w
    assert x.requires_grad and not x.is_leaf and x.grad_fn.name() == "CopySlices"
    (x * jg.tensor([1.0, 2.0, 3.0], dtype=jg.float64)).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(x.detach().numpy(), [5.0, 6.0, 0.0])


def test_setitem_overwrites_the_gradient_of_the_old_values():
    a = _leaf([1.0, 2.0, 3.0])
    w = _leaf([7.0])
    b = a * 2
    b[1] = w
    (b * b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [8.0, 0.0, 24.0])
    np.testing.assert_array_equal(w.grad.numpy(), [14.0])


def test_view_grad_fn_is_regenerated_after_the_base_is_modified():
    a = jg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    b = a.clone()
    view = b[1:3]
    assert view.grad_fn.name() == "GetitemBackward"
    b.mul_(2)
    assert view.grad_fn.name() == "AsStridedBackward"
    view.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 2.0, 2.0, 0.0])


def test_two_inplace_ops_through_different_views_of_one_base():
    a = _leaf([1.0, 2.0, 3.0, 4.0])
    w = _leaf([3.0])
    b = a.clone()
    b[:2].mul_(w)
    b[1:].add_(b[:3].clone())  # reads the first write
    b.sum().backward()
    # b0 = 3 a0, b1 = 3 a1 + 3 a0, b2 = a2 + 3 a1, b3 = a3 + a2
    np.testing.assert_array_equal(a.grad.numpy(), [6.0, 6.0, 2.0, 1.0])
    np.testing.assert_array_equal(w.grad.numpy(), [2 * 1.0 + 2 * 2.0])


def test_inplace_through_a_view_of_a_view():
    a = _leaf(np.arange(6.0))
    b = a.clone().reshape(2, 3)
    b.t()[1:, 0].mul_(5)  # elements (0, 1) and (0, 2)
    b.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 5.0, 5.0, 1.0, 1.0, 1.0])


def test_inplace_through_a_view_when_a_replay_step_copies():
    """The base is laid out column-major, so replaying `.t().reshape(-1)` on a row-major
    gradient copies; CopySlices then uses its mask formula (same gradient)."""
    a = _leaf(np.arange(12.0).reshape(3, 4))
    b = a.t().clone()  # clone keeps the transposed layout: b is a (4, 3) column-major base
    flat = b.t().reshape(-1)
    assert flat._base is b
    flat[2:5].mul_(10)
    b.sum().backward()
    expected = np.ones((3, 4))
    expected.reshape(-1)[2:5] = 10
    np.testing.assert_array_equal(a.grad.numpy(), expected)


def test_second_derivative_through_copy_slices():
    a = _leaf([1.0, 2.0, 3.0, 4.0])
    b = a.clone()
    b[1:3] = a[1:3] * a[1:3]
    (g,) = jg.autograd.grad(b.sum(), a, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), [1.0, 4.0, 6.0, 1.0])
    (gg,) = jg.autograd.grad(g.sum(), a)
    np.testing.assert_array_equal(gg.numpy(), [0.0, 2.0, 2.0, 0.0])


def test_augmented_assignment_on_an_indexed_region():
    a = _leaf([1.0, 2.0, 3.0])
    b = a.clone()
    b[0] += 10
    b[1:] *= jg.tensor([2.0, 3.0], dtype=jg.float64)
    assert b.tolist() == [11.0, 4.0, 9.0]
    b.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 2.0, 3.0])


# ----- in-place semantics without autograd ----------------------------------------------

def test_inplace_on_leaf_under_no_grad_bumps_version_and_keeps_the_leaf():
    w = _leaf([1.0, 2.0])
    with jg.no_grad():
        w.sub_(jg.tensor([0.5, 0.5], dtype=jg.float64))
        w[0] = 10.0
        w.mul_(2)
    assert w._version == 3 and w.is_leaf and w.requires_grad and w.grad_fn is None
    np.testing.assert_array_equal(w.detach().numpy(), [20.0, 3.0])


def test_augmented_operators_return_the_same_tensor():
    x = jg.ones(3)
    y = x
    y += 1
    y *= 3
    y -= 1
    y /= 5
    assert y is x
    np.testing.assert_allclose(x.numpy(), [1.0, 1.0, 1.0])
    with pytest.raises(RuntimeError, match=E7):
        w = jg.ones(2, requires_grad=True)
        w += 1


def test_copy_broadcasts_and_casts():
    x = jg.zeros(2, 3, dtype=jg.int64)
    x.copy_(jg.tensor([1.5, 2.5, -1.5]))
    assert x.tolist() == [[1, 2, -1], [1, 2, -1]]
    with pytest.raises(RuntimeError, match=r"the size of tensor a \(3\) must match the size of "
                                           r"tensor b \(2\) at non-singleton dimension 1"):
        x.copy_(jg.ones(2))


def test_copy_gives_the_source_its_gradient_and_the_old_value_none():
    a = _leaf([1.0, 2.0])
    src = _leaf([3.0])
    b = a * 3
    b.copy_(src)
    (b * jg.tensor([1.0, 2.0], dtype=jg.float64)).sum().backward()
    np.testing.assert_array_equal(src.grad.numpy(), [3.0])
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0])


def test_fill_and_zero():
    x = jg.ones(2, 2, dtype=jg.int64)
    x.fill_(2.7)
    assert x.tolist() == [[2, 2], [2, 2]]
    assert x.zero_() is x and x.tolist() == [[0, 0], [0, 0]]
    value = _leaf(3.0)
    y = jg.zeros(2, 3, dtype=jg.float64)
    y[:, 1:].fill_(value)
    y.sum().backward()
    assert value.grad.item() == 4.0
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor but got "
                                           "tensor with 1 dimensions."):
        y.fill_(jg.ones(1))


# ----- errors of the write itself ---------------------------------------------------------

def test_inplace_into_expanded_memory_raises():
    x = jg.zeros(3, 1).expand(3, 4)
    with pytest.raises(RuntimeError, match=OVERLAP):
        x.add_(1)
    with pytest.raises(RuntimeError, match=OVERLAP):
        x[0] = 1.0
    assert x.tolist() == [[0.0] * 4] * 3
    y = jg.zeros(3).expand(1, 3)  # nothing repeats: a writable view
    y.add_(1)
    assert y._base.tolist() == [1.0, 1.0, 1.0]


def test_result_dtype_must_cast_into_the_target():
    x = jg.zeros(3, dtype=jg.int64)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output "
                                           "type Long"):
        x.add_(1.5)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output "
                                           "type Long"):
        x.mul_(jg.tensor(2.0))
    with pytest.raises(RuntimeError, match="result type Long can't be cast to the desired output "
                                           "type Bool"):
        jg.zeros(3, dtype=jg.bool).add_(1)
    with pytest.raises(RuntimeError, match="result type Float can't be cast"):
        x.exp_()
    x.add_(2)
    assert x.tolist() == [2, 2, 2] and x.dtype == jg.int64
    y = jg.ones(2)
    y.add_(jg.ones(2, dtype=jg.float64))  # float64 into float32 is allowed
    assert y.dtype == jg.float32 and y.tolist() == [2.0, 2.0]


def test_inplace_result_cannot_grow_the_target():
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast "
                                           r"shape \[2, 3\]"):
        jg.ones(3).add_(jg.ones(2, 3))


def test_float64_operand_into_float32_target_keeps_gradients_float32():
    a = jg.ones(2, requires_grad=True)
    w = jg.tensor([2.0, 3.0], dtype=jg.float64, requires_grad=True)
    b = a.clone()
    b.mul_(w)
    assert b.dtype == jg.float32
    b.sum().backward()
    assert a.grad.dtype == jg.float32 and w.grad.dtype == jg.float64
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 3.0])
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0])


def test_retained_grad_follows_the_tensor_through_an_inplace_op():
    x = _leaf([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    y.mul_(3)
    y.sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])


def test_overlapping_source_and_target_regions():
    x = jg.arange(5.0)
    with pytest.raises(RuntimeError, match="some elements of the input tensor"):
        x[1:] = x[:-1]  # a partial overlap: PyTorch 2.13 raises, so does eager
    x[1:] = x[:-1].clone()
    assert x.tolist() == [0.0, 0.0, 1.0, 2.0, 3.0]
    a = _leaf([1.0, 2.0, 3.0])
    b = a.clone()
    b[1:] = b[:-1].clone()
    assert b.tolist() == [1.0, 1.0, 2.0]
    b.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 1.0, 0.0])


def test_split_output_whose_base_was_modified_cannot_be_used_with_grad():
    a = _leaf([1.0, 2.0, 3.0, 4.0])
    b = a.clone()
    _, second = b.split(2)
    b.add_(1)
    with pytest.raises(RuntimeError, match=re.escape(
            "Output 1 of Split is a view and its base or another view of its base has been "
            "modified inplace. This view is the output of a function that returns multiple "
            "views.")):
        second * 2
    plain = jg.zeros(4)
    _, tail = plain.split(2)
    plain.add_(1)
    assert tail.grad_fn is None and tail.tolist() == [1.0, 1.0]


# ----- shape ops: PyTorch's rules, warnings and errors ------------------------------------

def test_chunk_split_and_unbind_sizes():
    assert [p.tolist() for p in jg.arange(5).chunk(4)] == [[0, 1], [2, 3], [4]]
    assert [p.shape for p in jg.zeros(0).chunk(2)] == [(0,), (0,)]
    assert [p.shape[1] for p in jg.zeros(2, 7).split(3, 1)] == [3, 3, 1]
    assert [p.shape[0] for p in jg.zeros(6).split([1, 0, 5])] == [1, 0, 5]
    assert jg.zeros(0, 2).unbind() == ()
    first, second = jg.zeros(2, 3).unbind(1)[:2]
    assert first.grad_fn is None and first.shape == (2,) and second._output_nr == 1
    with pytest.raises(RuntimeError, match=re.escape(_e9(1, "Split"))):
        jg.zeros(4).split(2)[1].mul_(_leaf([2.0]).float())


def test_shape_rules():
    x = jg.zeros(2, 1, 3)
    assert x.squeeze(0).shape == (2, 1, 3) and x.squeeze().shape == (2, 3)
    assert x.unsqueeze(-1).shape == (2, 1, 3, 1) and x.unsqueeze(-4).shape == (1, 2, 1, 3)
    assert jg.cat([jg.ones(2, 3), jg.zeros(0)]).shape == (2, 3)  # legacy: 1-D empty skipped
    assert jg.cat([jg.ones(2), jg.ones(2, dtype=jg.float64)]).dtype == jg.float64
    assert jg.tensor(1.0).flatten().shape == (1,)
    assert jg.ones(2, 2).repeat(2, 1, 3).shape == (2, 2, 6)
    assert jg.tensor([[1, 2]]).repeat(2, 2).tolist() == [[1, 2, 1, 2], [1, 2, 1, 2]]


def test_repeat_gradient_sums_the_tiles():
    w = jg.arange(1.0, 9.0).reshape(2, 4)
    x = jg.tensor([[1.0, 2.0]], requires_grad=True)
    (x.repeat(2, 2) * w).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1 + 3 + 5 + 7, 2 + 4 + 6 + 8]])


def test_transpose_property_warnings():
    with pytest.warns(UserWarning, match="The use of `x.T` on tensors of dimension other than 2 "
                                         "to reverse their shape is deprecated"):
        assert jg.zeros(2, 3, 4).T.shape == (4, 3, 2)
    with pytest.warns(UserWarning, match="Tensor.T is deprecated on 0-D tensors"):
        assert jg.tensor(1.0).T.shape == ()
    assert jg.zeros(2, 3, 4).mT.shape == (2, 4, 3)


@pytest.mark.parametrize("op, error, message", [
    (lambda: jg.zeros(2, 2, 2).t(), RuntimeError,
     "t() expects a tensor with <= 2 dimensions, but self is 3D"),
    (lambda: jg.zeros(2).mT, RuntimeError,
     "tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor."),
    (lambda: jg.cat([jg.ones(2, 3), jg.ones(2, 4)]), RuntimeError,
     "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for "
     "tensor number 1 in the list."),
    (lambda: jg.cat([jg.tensor(1.0), jg.ones(2)]), RuntimeError,
     "zero-dimensional tensor (at position 0) cannot be concatenated"),
    (lambda: jg.cat([jg.ones(2, 3), jg.ones(3)]), RuntimeError,
     "Tensors must have same number of dimensions: got 2 and 1"),
    (lambda: jg.cat([]), ValueError, "expected a non-empty list of Tensors"),
    (lambda: jg.stack([jg.ones(2), jg.ones(3)]), RuntimeError,
     "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1"),
    (lambda: jg.ones(5).narrow(0, 4, 3), RuntimeError,
     "start (4) + length (3) exceeds dimension size (5)."),
    (lambda: jg.ones(5).narrow(0, 6, 0), IndexError,
     "start out of range (expected to be in range of [-5, 5], but got 6)"),
    (lambda: jg.ones(3).select(0, 5), IndexError,
     "select(): index 5 out of range for tensor of size [3] at dimension 0"),
    (lambda: jg.ones(6).split([2, 3]), RuntimeError,
     "split_with_sizes expects split_sizes to sum exactly to 6 (input tensor's size at dimension "
     "0), but got split_sizes=[2, 3]"),
    (lambda: jg.ones(6).chunk(0), RuntimeError,
     "chunk expects `chunks` to be greater than 0, got: 0"),
    (lambda: jg.ones(2, 3).expand(4, 3), RuntimeError,
     "The expanded size of the tensor (4) must match the existing size (2) at non-singleton "
     "dimension 0.  Target sizes: [4, 3].  Tensor sizes: [2, 3]"),
    (lambda: jg.ones(2, 3).movedim((0, 1), (0,)), RuntimeError,
     "movedim: Invalid source or destination dims: source ([0, 1] dims) should contain the same "
     "number of dims as destination ([0] dims)"),
    (lambda: jg.ones(6).unflatten(0, (2, 2)), RuntimeError,
     "unflatten: Provided sizes [2, 2] don't multiply up to the size of dim 0 (6) in the input "
     "tensor"),
    (lambda: jg.ones(2, 3, 4).flatten(2, 1), RuntimeError,
     "flatten() has invalid args: start_dim cannot come after end_dim"),
    (lambda: jg.ones(3).tril(), RuntimeError, "tril: input tensor must have at least 2 dimensions"),
    (lambda: jg.ones(2, 2).repeat(2), RuntimeError,
     "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"),
    (lambda: jg.ones(2, 3).diagonal(0, 1, 1), RuntimeError,
     "diagonal dimensions cannot be identical 1, 1"),
    (lambda: jg.ones(2, 3).permute(0, 0), RuntimeError,
     "permute(): duplicate dims are not allowed"),
    (lambda: jg.ones(3, 4).roll((1, 2), (0,)), RuntimeError,
     "shifts and dimensions must align. shifts: 2, dims:1"),
    (lambda: jg.zeros(3, 3).flip((0, 0)), RuntimeError,
     "dim 0 appears multiple times in the list of dims"),
])
def test_shape_op_errors(op, error, message):
    with pytest.raises(error, match=re.escape(message)):
        op()


def test_graphs_through_views_and_copy_slices_are_freed_without_gc():
    import gc
    import weakref

    gc.disable()
    try:
        a = _leaf([1.0, 2.0, 3.0, 4.0])
        b = a.clone()
        view = b[1:3]
        view.mul_(10)
        b.mul_(2)
        nodes = [weakref.ref(b.grad_fn), weakref.ref(view.grad_fn),
                 weakref.ref(b.grad_fn.next_functions[0][0])]
        base = weakref.ref(b)
        del b, view
        assert base() is None and all(node() is None for node in nodes)
    finally:
        gc.enable()
