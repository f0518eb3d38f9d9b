"""nn.functional and reductions against PyTorch's measured values (research/
eager_autograd.md §2.5, §2.9, §4 cases 5, 6, 10, 16, 20) and hand-computed numbers."""

import math

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use


def grads(fn, *values, dtype=jg.float32):
    """Gradients of fn(*tensors) (summed if not scalar) w.r.t. each input."""
    tensors = [jg.tensor(v, dtype=dtype, requires_grad=True) for v in values]
    out = fn(*tensors)
    (out if out.ndim == 0 else out.sum()).backward()
    return [t.grad.numpy() for t in tensors]


# ----- cross_entropy / nll_loss ---------------------------------------------------------


def test_cross_entropy_weighted_mean_divides_by_summed_weights():
    # logp[0,1] = -0.3133, logp[1,0] = -0.1269 -> (3*0.3133 + 1*0.1269) / (3 + 1)
    loss = F.cross_entropy(jg.tensor([[1.0, 2.0], [3.0, 1.0]]), jg.tensor([1, 0]),
                           weight=jg.tensor([1.0, 3.0]))
    expected = (3 * math.log1p(math.exp(-1)) + math.log1p(math.exp(-2))) / 4
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert round(loss.item(), 4) == 0.2667


def test_cross_entropy_label_smoothing_value():
    loss = F.cross_entropy(jg.tensor([[1.0, 2.0, 3.0]]), jg.tensor([2]), label_smoothing=0.1)
    assert round(loss.item(), 4) == 0.5076


def test_cross_entropy_all_targets_ignored_is_nan_with_zero_grad():
    x = jg.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, 0.0]], requires_grad=True)
    loss = F.cross_entropy(x, jg.tensor([-100, -100]))
    assert math.isnan(loss.item())
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))


def test_cross_entropy_ignore_index_gradient():
    (gx,) = grads(lambda x: F.cross_entropy(x, jg.tensor([0, -100, 1])),
                  [[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]])
    p0 = 1 / (1 + math.exp(1))  # softmax([1, 2])[0]
    expected = np.array([[p0 - 1, 1 - p0], [0, 0], [0.5, -0.5]]) / 2
    np.testing.assert_allclose(gx, expected, rtol=1e-6)


def test_cross_entropy_spatial_shape_and_probability_targets():
    x = jg.from_numpy(np.random.default_rng(0).normal(size=(2, 5, 4)).astype(np.float32))
    assert F.cross_entropy(x, jg.zeros(2, 4, dtype=jg.int64), reduction="none").shape == (2, 4)
    loss = F.cross_entropy(jg.tensor([[1.0, 2.0]]), jg.tensor([[0.3, 0.7]]))
    expected = 0.3 * math.log1p(math.e) + 0.7 * math.log1p(math.exp(-1))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_cross_entropy_target_errors():
    with pytest.raises(IndexError, match=r"^Target 3 is out of bounds\.$"):
        F.cross_entropy(jg.zeros(2, 3), jg.tensor([0, 3]))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Int"):
        F.cross_entropy(jg.zeros(2, 3), jg.tensor([0, 1], dtype=jg.int32))

@pytest.mark.parametrize("loss", [F.cross_entropy, F.nll_loss], ids=["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("input_shape, target_shape, error, message", [
    ((2, 3), (3,), ValueError, r"^Expected input batch_size \(2\) to match target batch_size \(3\)\."),
    ((2, 3), (), ValueError, r"^Expected input batch_size \(2\) to match target batch_size \(0\)\."),
    ((2, 5, 3), (3, 3), ValueError, r"^Expected input batch_size \(2\) to match target batch_size \(3\)\."),
    ((2, 3), (2, 1), RuntimeError, r"^0D or 1D target tensor expected, multi-target not supported"),
    ((2, 5, 3), (2, 4), RuntimeError, r"^Expected target size \[2, 3\], got \[2, 4\]"),
])
def test_target_shape_errors_have_pytorchs_class_and_text(loss, input_shape, target_shape, error,
                                                          message):
    # measured on torch 2.13: a batch-size clash is a ValueError, other shapes RuntimeError
    with pytest.raises(error, match=message):
        loss(jg.zeros(*input_shape), jg.zeros(*target_shape, dtype=jg.int64))


def test_nll_loss_gradient_and_log_prob_agnostic_value():
    (gx,) = grads(lambda a: F.nll_loss(a, jg.tensor([1, 0])), [[-1.0, -2.0], [-3.0, -1.0]])
    np.testing.assert_array_equal(gx, [[0, -0.5], [-0.5, 0]])
    # no check that the inputs are log-probabilities (PyTorch gives -0.8 too)
    assert F.nll_loss(jg.tensor([[0.2, 0.8]]), jg.tensor([1])).item() == pytest.approx(-0.8)


# ----- softmax / log_softmax -------------------------------------------------------------


def test_log_softmax_is_exact_for_large_gaps():
    x = jg.tensor([1000.0, 0.0], requires_grad=True)
    out = F.log_softmax(x, dim=0)
    np.testing.assert_array_equal(out.detach().numpy(), [0.0, -1000.0])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [-1.0, 1.0])


def test_softmax_of_a_fully_masked_row_is_nan_and_poisons_its_gradient():
    s = jg.tensor([[1.0, 2.0], [-math.inf, -math.inf]], requires_grad=True)
    p = s.softmax(-1)
    assert np.isnan(p.detach().numpy()[1]).all()
    (p * jg.tensor([[0.0, 1.0], [0.0, 0.0]])).sum().backward()  # the loss reads p[0, 1] only
    np.testing.assert_allclose(s.grad.numpy()[0], [-0.1966, 0.1966], atol=1e-4)
    assert np.isnan(s.grad.numpy()[1]).all()


def test_softmax_rows_sum_to_one_and_grads_to_zero():
    x = jg.from_numpy(np.random.default_rng(1).normal(size=(3, 4))).requires_grad_()
    p = F.softmax(x, dim=1)
    np.testing.assert_allclose(p.detach().numpy().sum(1), np.ones(3))
    (p * jg.from_numpy(np.arange(12.0).reshape(3, 4))).sum().backward()
    np.testing.assert_allclose(x.grad.numpy().sum(1), np.zeros(3), atol=1e-12)


def test_softmax_integer_input_and_implicit_dim():
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.softmax(jg.tensor([1, 2]), dim=0)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        out = F.softmax(jg.tensor([[0.0, 0.0]]))
    np.testing.assert_array_equal(out.numpy(), [[0.5, 0.5]])
    assert F.softmax(jg.tensor([1.0, 2.0]), 0, dtype=jg.float64).dtype == jg.float64
    assert jg.log_softmax(jg.tensor([1.0, 2.0]), 0).dtype == jg.float32


# ----- layer_norm, embedding, dropout, one_hot -------------------------------------------


def test_layer_norm_uses_biased_variance_and_constant_rows_have_zero_grad():
    out = F.layer_norm(jg.tensor([[1.0, 2.0, 3.0, 4.0]]), (4,))
    expected = (np.array([1, 2, 3, 4]) - 2.5) / np.sqrt(1.25 + 1e-5)
    np.testing.assert_allclose(out.numpy()[0], expected, rtol=1e-6)
    (gx,) = grads(lambda a: F.layer_norm(a, (3,)), [[1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(gx, [[0.0, 0.0, 0.0]])


def test_layer_norm_weight_grad_and_shape_error():
    x = jg.tensor([[1.0, 2.0, 4.0]])
    w = jg.tensor([1.0, 1.0, 1.0], requires_grad=True)
    (F.layer_norm(x, (3,), weight=w) * jg.tensor([1.0, 2.0, 3.0])).sum().backward()
    xhat = (np.array([1, 2, 4]) - 7 / 3) / np.sqrt(np.var([1, 2, 4]) + 1e-5)
    np.testing.assert_allclose(w.grad.numpy(), xhat * [1, 2, 3], rtol=1e-5)
    message = (r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\], but got "
               r"input of size\[2, 3\]")
    with pytest.raises(RuntimeError, match=message):
        F.layer_norm(jg.zeros(2, 3), (4,))


def test_embedding_duplicate_ids_accumulate_and_padding_row_gets_none():
    (gw,) = grads(lambda w: F.embedding(jg.tensor([1, 1, 0]), w), [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(gw, [[1, 1], [2, 2]])
    (gw,) = grads(lambda w: F.embedding(jg.tensor([0, 1, 1]), w, padding_idx=0),
                  [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(gw, [[0, 0], [2, 2]])


def test_embedding_errors():
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(jg.tensor([5]), jg.zeros(3, 2))
    with pytest.raises(RuntimeError, match="'indices'"):
        F.embedding(jg.tensor([1.0]), jg.zeros(3, 2))


def test_dropout_mask_statistics_and_scaling():
    jg.manual_seed(0)
    p = 0.3
    out = F.dropout(jg.ones(100_000), p)
    values = out.numpy()
    kept = values != 0
    assert abs(kept.mean() - (1 - p)) < 0.01
    np.testing.assert_allclose(values[kept], 1 / (1 - p), rtol=1e-6)
    x = jg.ones(1000, requires_grad=True)
    y = F.dropout(x, 0.5)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())


def test_dropout_edge_cases():
    x = jg.ones(3)
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), [0, 0, 0])
    assert F.dropout(x, 0.5, training=False) is x
    jg.manual_seed(1)
    first = F.dropout(jg.ones(8), 0.5).numpy()
    jg.manual_seed(1)
    np.testing.assert_array_equal(F.dropout(jg.ones(8), 0.5).numpy(), first)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.dropout(x, 1.5)


def test_one_hot():
    out = F.one_hot(jg.tensor([0, 2]))
    assert out.dtype == jg.int64
    np.testing.assert_array_equal(out.numpy(), [[1, 0, 0], [0, 0, 1]])
    assert F.one_hot(jg.tensor([[1]]), num_classes=4).shape == (1, 1, 4)
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        F.one_hot(jg.tensor([3]), 2)


# ----- element losses --------------------------------------------------------------------


def test_mse_loss_value_grad_and_size_warning():
    (ga,) = grads(lambda a: F.mse_loss(a, jg.zeros(2)), [1.0, 2.0])
    np.testing.assert_array_equal(ga, [1.0, 2.0])
    with pytest.warns(UserWarning, match=r"Using a target size \(.*\[2\]\)\) that is different to "
                                         r"the input size \(.*\[2, 1\]\)\)"):
        F.mse_loss(jg.ones(2, 1), jg.ones(2))


def test_l1_and_smooth_l1_gradients():
    (ga,) = grads(lambda a: F.l1_loss(a, jg.zeros(2)), [0.0, 1.0])
    np.testing.assert_array_equal(ga, [0.0, 0.5])
    (ga,) = grads(lambda a: F.smooth_l1_loss(a, jg.zeros(3)), [0.5, 1.0, 2.0])
    np.testing.assert_allclose(ga, [0.5 / 3, 1 / 3, 1 / 3])


def test_binary_cross_entropy_clamps_the_log():
    assert F.binary_cross_entropy(jg.tensor([0.0]), jg.tensor([1.0])).item() == 100.0
    (gp,) = grads(lambda p: F.binary_cross_entropy(p, jg.tensor([1.0])), [0.0])
    assert gp[0] == pytest.approx(-1e12, rel=1e-6)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(jg.tensor([1.5]), jg.tensor([1.0]))


def test_binary_cross_entropy_with_logits_is_stable():
    loss = F.binary_cross_entropy_with_logits(jg.tensor([-100.0]), jg.tensor([1.0]))
    assert loss.item() == pytest.approx(100.0)
    (gz,) = grads(lambda z: F.binary_cross_entropy_with_logits(z, jg.tensor([1.0])), [-100.0])
    np.testing.assert_allclose(gz, [-1.0])
    pos = F.binary_cross_entropy_with_logits(jg.tensor([0.0]), jg.tensor([1.0]),
                                             pos_weight=jg.tensor([3.0]))
    assert pos.item() == pytest.approx(3 * math.log(2), rel=1e-6)


# ----- attention and padding --------------------------------------------------------------


def test_sdpa_bool_mask_keeps_true_positions():
    rng = np.random.default_rng(2)
    q, k, v = (jg.from_numpy(rng.normal(size=shape)) for shape in ((2, 3), (3, 3), (3, 4)))
    mask = jg.tensor([[True, False, False], [True, True, False]])
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = q.numpy() @ k.numpy().T / math.sqrt(3)
    scores = np.where(mask.numpy(), scores, -np.inf)
    weights = np.exp(scores - scores.max(1, keepdims=True))
    weights /= weights.sum(1, keepdims=True)
    np.testing.assert_allclose(out.numpy(), weights @ v.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)


def test_pad_modes():
    (ga,) = grads(lambda a: F.pad(a, (1, 1)) * jg.tensor([1.0, 2.0, 3.0, 4.0]), [1.0, 1.0])
    np.testing.assert_array_equal(ga, [2.0, 3.0])
    with pytest.raises(NotImplementedError, match="'wrap'"):
        F.pad(jg.ones(2, 2), (1, 1), mode="wrap")


def test_activations_are_reexported():
    x = jg.tensor([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(F.relu(x).numpy(), [0.0, 0.0, 2.0])
    np.testing.assert_array_equal(F.relu6(jg.tensor([7.0])).numpy(), [6.0])
    np.testing.assert_allclose(F.leaky_relu(x, 0.1).numpy(), [-0.1, 0.0, 2.0])
    for name in ("gelu", "silu", "softplus", "elu", "hardtanh", "logsigmoid", "sigmoid", "tanh"):
        assert getattr(F, name)(x).shape == (3,)


# ----- reductions: PyTorch's tie and zero conventions -------------------------------------


def test_max_ties():
    (g,) = grads(lambda a: a.max(), [1.0, 3.0, 3.0])
    np.testing.assert_array_equal(g, [0, 0.5, 0.5])
    (g,) = grads(lambda a: a.amax(), [1.0, 3.0, 3.0])
    np.testing.assert_array_equal(g, [0, 0.5, 0.5])
    (g,) = grads(lambda a: a.min(), [2.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(g, [0, 1 / 3, 1 / 3, 1 / 3])
    values, indices = jg.tensor([1.0, 3.0, 3.0]).max(0)
    assert values.item() == 3.0 and indices.item() == 1 and indices.dtype == jg.int64
    (g,) = grads(lambda a: a.max(0).values, [1.0, 3.0, 3.0])
    np.testing.assert_array_equal(g, [0, 1, 0])
    (g,) = grads(lambda a: a.median(), [1.0, 2.0, 2.0, 3.0])
    np.testing.assert_array_equal(g, [0, 0.5, 0.5, 0])


def test_max_return_type_and_binary_form():
    result = jg.tensor([[1.0, 5.0], [7.0, 2.0]]).max(dim=1, keepdim=True)
    np.testing.assert_array_equal(result.values.numpy(), [[5.0], [7.0]])
    np.testing.assert_array_equal(result.indices.numpy(), [[1], [0]])
    assert repr(result).startswith("jitgrad.return_types.max(\nvalues=tensor(")
    np.testing.assert_array_equal(jg.max(jg.tensor([1.0, 4.0]), jg.tensor([3.0, 2.0])).numpy(),
                                  [3.0, 4.0])


def test_argmax_nan_and_ties():
    assert jg.tensor([1.0, float("nan"), 3.0]).argmax().item() == 1
    assert jg.tensor([3.0, 1.0, 3.0]).argmax().item() == 0
    assert not jg.tensor([1.0, 2.0], requires_grad=True).argmax().requires_grad


def test_prod_zero_gradients():
    (g,) = grads(lambda a: a.prod(), [2.0, 0.0, 3.0])
    np.testing.assert_array_equal(g, [0, 6, 0])
    (g,) = grads(lambda a: a.prod(), [0.0, 3.0, 0.0])
    np.testing.assert_array_equal(g, [0, 0, 0])
    assert jg.tensor([2, 3]).prod().dtype == jg.int64


def test_std_of_constant_input_has_zero_grad_and_dof_warning():
    a = jg.zeros(4, 3, requires_grad=True)
    a.std(dim=0).mean().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros((4, 3)))
    b = jg.ones(1, 3, requires_grad=True)
    with pytest.warns(UserWarning, match=r"std\(\): degrees of freedom is <= 0\. Correction "
                                         r"should be strictly less than the reduction factor"):
        out = b.std(dim=0)
    assert np.isnan(out.detach().numpy()).all()
    out.sum().backward()
    assert np.isnan(b.grad.numpy()).all()


def test_var_conventions():
    x = jg.tensor([1.0, 2.0, 3.0, 4.0])
    assert x.var().item() == pytest.approx(5 / 3)
    assert x.var(unbiased=False).item() == pytest.approx(1.25)
    assert jg.var(x, 0, correction=0).item() == pytest.approx(1.25)
    assert x.std(keepdims=True, axis=0).shape == (1,)
    with pytest.raises(RuntimeError, match="floating point"):
        jg.tensor([1, 2]).var()


def test_x_minus_mean_has_zero_gradient():
    (g,) = grads(lambda x: x - x.mean(), [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(g, [0, 0, 0, 0], atol=1e-7)


def test_logsumexp_all_neg_inf_slice():
    x = jg.tensor([[-math.inf, -math.inf], [1000.0, 1000.0]], dtype=jg.float64,
                  requires_grad=True)
    out = jg.logsumexp(x, 1)
    np.testing.assert_allclose(out.detach().numpy(), [-math.inf, 1000 + math.log(2)])
    out.sum().backward()
    assert np.isnan(x.grad.numpy()[0]).all()
    np.testing.assert_allclose(x.grad.numpy()[1], [0.5, 0.5])


def test_norm_gradient_at_zero_is_zero():
    (g,) = grads(lambda x: x.norm(), [0.0, 0.0])
    np.testing.assert_array_equal(g, [0.0, 0.0])
    (g,) = grads(lambda x: jg.linalg.vector_norm(x, 3), [0.0, 0.0])
    np.testing.assert_array_equal(g, [0.0, 0.0])
    assert jg.tensor([3.0, 4.0]).norm().item() == 5.0
    with pytest.raises(RuntimeError, match="not supported"):
        jg.linalg.norm(jg.ones(2, 2), ord="nuc")


def test_cumsum_and_cumprod_gradients():
    (g,) = grads(lambda x: x.cumsum(0), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(g, [3, 2, 1])
    (g,) = grads(lambda x: x.cumprod(0), [2.0, 0.0, 3.0])
    np.testing.assert_array_equal(g, [1, 8, 0])
    assert jg.tensor([1, 2]).cumsum(0).dtype == jg.int64


def test_sort_is_stable_and_topk_validates_k():
    values, indices = jg.tensor([2.0, 1.0, 2.0, 1.0]).sort(descending=True)
    np.testing.assert_array_equal(values.numpy(), [2, 2, 1, 1])
    np.testing.assert_array_equal(indices.numpy(), [0, 2, 1, 3])
    np.testing.assert_array_equal(jg.tensor([float("nan"), 1.0]).sort(descending=True).indices
                                  .numpy(), [0, 1])
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        jg.tensor([1.0, 2.0]).topk(3)


def test_reduction_aliases_and_empty_dims():
    x = jg.ones(2, 3)
    assert x.sum(axis=1, keepdims=True).shape == (2, 1)
    assert x.sum(dim=()).shape == ()
    assert jg.amax(x, dim=(0, 1)).shape == ()
    np.testing.assert_array_equal(jg.count_nonzero(jg.tensor([[0, 1], [2, 3]]), 0).numpy(), [1, 2])
    assert jg.any(jg.tensor([0, 1])).item() is True and jg.all(jg.tensor([0, 1])).item() is False


# ----- linear algebra errors --------------------------------------------------------------


def test_matrix_product_errors():
    with pytest.raises(RuntimeError, match="self must be a matrix"):
        jg.mm(jg.ones(2), jg.ones(2))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and "
                                           r"4x5\)"):
        F.linear(jg.ones(2, 3), jg.ones(5, 4))
    with pytest.raises(RuntimeError, match="1D tensors expected, but got 2D and 1D tensors"):
        jg.dot(jg.ones(2, 2), jg.ones(2))
    with pytest.raises(RuntimeError, match="batch2 tensor to be: \\[2, 3\\] but got: \\[2, 4\\]"):
        jg.bmm(jg.ones(2, 2, 3), jg.ones(2, 4, 5))


def test_einsum_size_one_operand_gets_a_full_shaped_grad():
    a = jg.tensor([2.0, 2.0], requires_grad=True)
    b = jg.tensor([2.0], requires_grad=True)
    y = jg.einsum("i,i", a, b)
    y.backward()
    assert y.item() == 8.0
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(b.grad.numpy(), [4.0])


SECOND_ORDER = {
    "softmax": lambda t: F.softmax(t, -1) * jg.from_numpy(np.arange(6.0).reshape(2, 3)),
    "log_softmax": lambda t: F.log_softmax(t, 0) * jg.from_numpy(np.arange(6.0).reshape(2, 3)),
    "layer_norm": lambda t: F.layer_norm(t, (3,)) * jg.from_numpy(np.arange(6.0).reshape(2, 3)),
    "logsumexp": lambda t: jg.logsumexp(t, 1),
    "std": lambda t: t.std(1),
    "prod": lambda t: t.prod(1),
    "norm": lambda t: t.norm(dim=1),
    "cumprod": lambda t: t.cumprod(1),
    "einsum": lambda t: jg.einsum("ij,ij->i", t, t),
    "cross_entropy": lambda t: F.cross_entropy(t, jg.tensor([2, 0])),
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_second_order_gradients(name):
    """Backward formulas run on Tensors under create_graph, so they differentiate again.

    (Piecewise-linear ops such as amax have a constant first derivative with no history,
    as in PyTorch, so they are not listed.)"""
    fn = SECOND_ORDER[name]
    x = jg.from_numpy(np.random.default_rng(3).normal(size=(2, 3))).requires_grad_()

    def first_derivative(t):
        with jg.enable_grad():  # gradcheck evaluates its function under no_grad
            return jg.autograd.grad(fn(t).sum(), t, create_graph=True)[0]

    assert first_derivative(x).requires_grad
    assert jg.autograd.gradcheck(first_derivative, (x,))


# (name, kwargs, input after b = 2 * [-1, 0.25, 2] is overwritten, grad of a for weights
# [1, 2, 3]) printed by torch 2.13 for F.<name>(b, inplace=True, **kwargs)
INPLACE_ACTIVATIONS = [
    ("relu", {}, [0.0, 0.5, 4.0], [0.0, 4.0, 6.0]),
    ("relu6", {}, [0.0, 0.5, 4.0], [0.0, 4.0, 6.0]),
    ("leaky_relu", {"negative_slope": 0.2}, [-0.4, 0.5, 4.0], [0.4, 4.0, 6.0]),
    ("elu", {"alpha": 0.5}, [-0.4323323667049408, 0.5, 4.0], [0.1353352665901184, 4.0, 6.0]),
    ("hardtanh", {"min_val": -0.5, "max_val": 1.0}, [-0.5, 0.5, 1.0], [0.0, 4.0, 0.0]),
    ("silu", {}, [-0.23840583860874176, 0.3112296760082245, 3.9280550479888916],
     [-0.18156850337982178, 2.9598448276519775, 6.315988063812256]),
]


@pytest.mark.parametrize("name, kwargs, written, grad", INPLACE_ACTIVATIONS,
                         ids=[case[0] for case in INPLACE_ACTIVATIONS])
def test_activation_inplace_flag_overwrites_input_and_keeps_gradients(name, kwargs, written,
                                                                      grad):
    a = jg.tensor([-1.0, 0.25, 2.0], requires_grad=True)
    b = a * 2
    out = getattr(F, name)(b, inplace=True, **kwargs)
    assert out is b
    np.testing.assert_allclose(b.detach().numpy(), written, rtol=1e-6)
    (out * jg.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), grad, rtol=1e-6)
    kept = jg.tensor([-1.0, 2.0])
    getattr(F, name)(kept, inplace=False, **kwargs)
    assert kept.tolist() == [-1.0, 2.0]


def test_leaky_relu_and_silu_modules_honour_inplace():
    x = jg.tensor([-1.0, 2.0])
    assert nn.LeakyReLU(0.5, inplace=True)(x) is x and x.tolist() == [-0.5, 2.0]
    y = jg.tensor([0.0, 1.0])
    assert nn.SiLU(inplace=True)(y) is y
    np.testing.assert_allclose(y.numpy(), [0.0, 1 / (1 + math.exp(-1))], rtol=1e-6)


# ----- normalize / cosine_similarity / kl_div --------------------------------------------

def _value_and_grads(fn, *values):
    """fn's output and the grads of sum(out * [1, 2, ...]) (out itself if 0-d)."""
    tensors = [jg.tensor(v, requires_grad=True) for v in values]
    out = fn(*tensors)
    weights = jg.arange(1, out.numel() + 1).view(out.shape).float()
    (out if out.ndim == 0 else (out * weights).sum()).backward()
    return out.detach().numpy(), [t.grad.numpy() for t in tensors]


# (name, fn, inputs, output, grads) printed by torch 2.13
SIMILARITY_CASES = [
    ("normalize", lambda x: F.normalize(x), ([[3.0, 4.0], [0.0, 0.0]],),
     [[0.6, 0.8], [0.0, 0.0]], [[[-0.064, 0.048], [3e12, 4e12]]]),
    ("normalize-p1-dim0", lambda x: F.normalize(x, p=1, dim=0), ([[3.0, -4.0], [1.0, 0.0]],),
     [[0.75, -1.0], [0.25, 0.0]], [[[-0.125, 0.0], [0.375, 1.0]]]),
    ("cosine", lambda a, b: F.cosine_similarity(a, b),
     ([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], [[4.0, 5.0, 6.0], [1.0, 1.0, 1.0]]),
     [0.9746317863464355, 0.0],
     [[[0.0522124245762825, 0.013053104281425476, -0.02610619366168976],
       [115470056.0, 115470056.0, 115470056.0]],
      [[-0.020172981545329094, -0.002373289316892624, 0.015426397323608398], [0.0, 0.0, 0.0]]]),
    ("cosine-broadcast", lambda a, b: F.cosine_similarity(a, b, dim=-1),
     ([[1.0, 2.0, 3.0], [-1.0, 0.0, 2.0]], [[4.0, 5.0, 6.0]]),
     [0.9746317863464355, 0.4077177345752716],
     [[[0.0522124245762825, 0.013053104281425476, -0.02610619366168976],
       [0.5708048343658447, 0.5096471905708313, 0.28540247678756714]],
      [[-0.16446271538734436, -0.05532364174723625, 0.15574485063552856]]]),
    ("kl-batchmean", lambda x, t: F.kl_div(x.log_softmax(1), t, reduction="batchmean"),
     ([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]], [[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]]),
     0.11812523007392883,
     [[[0.04501529037952423, -0.12763574719429016, 0.08262050151824951],
       [0.005970768630504608, -0.04402923583984375, 0.038058459758758545]],
      [[math.nan, 0.8572293519973755, 0.3572293817996979],
       [0.4710034132003784, 0.6737359762191772, 0.42914876341819763]]]),
    ("kl-none", lambda x, t: F.kl_div(x.log_softmax(1), t, reduction="none"),
     ([[1.0, 2.0, 3.0]], [[0.0, 0.5, 0.5]]), [[0.0, 0.3572293519973755, -0.14277061820030212]],
     [[[0.22507645189762115, -0.3881787657737732, 0.16310250759124756]],
      [[math.nan, 3.428917407989502, 2.143376350402832]]]),
    ("kl-log-target", lambda x, t: F.kl_div(x.log_softmax(1), t.log_softmax(1), reduction="sum",
                                            log_target=True),
     ([[1.0, 2.0, 3.0]], [[0.0, 1.0, 2.0]]), 0.0, [[[0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0]]]),
]


@pytest.mark.parametrize("name, fn, inputs, output, expected_grads", SIMILARITY_CASES,
                         ids=[case[0] for case in SIMILARITY_CASES])
def test_similarity_and_kl_div_match_torch(name, fn, inputs, output, expected_grads):
    out, grads = _value_and_grads(fn, *inputs)
    np.testing.assert_allclose(out, output, rtol=2e-6, atol=1e-6)
    for grad, expected in zip(grads, expected_grads, strict=True):
        np.testing.assert_allclose(grad, expected, rtol=2e-6, atol=1e-6)


def test_kl_div_mean_warns_and_rejects_unknown_reductions():
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        loss = F.kl_div(jg.tensor([[-1.0, -2.0]]), jg.tensor([[0.5, 0.5]]))
    assert loss.item() == pytest.approx(0.4034264087677002, rel=1e-6)
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        F.kl_div(jg.zeros(2), jg.zeros(2), reduction="avg")


@pytest.mark.parametrize("shape, target, error, message", [
    ((3, 4), jg.tensor([]), ValueError, r"Expected input batch_size \(3\) to match target "
                                        r"batch_size \(0\)"),
    ((4,), jg.tensor([]), RuntimeError, "expected target dtype to be Long or Byte, but got Float"),
    ((0, 4), jg.tensor([], dtype=jg.float64), RuntimeError, "but got Double"),
])
def test_float_targets_of_another_shape_raise_as_torchs_class_index_checks(shape, target, error,
                                                                          message):
    # fuzz seed 670546: torch takes them for class indices and checks the batch size first
    with pytest.raises(error, match=message):
        F.cross_entropy(jg.zeros(shape, dtype=jg.float64), target, reduction="none")
