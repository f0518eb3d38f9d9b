"""Behaviour of the API added for the real programs (issue 6), against numpy references,
hand-computed values and figures measured with torch 2.13 (quoted where used)."""

import math

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck

# ----- unique / bincount / histc ------------------------------------------------------


def test_unique_matches_numpy_with_inverse_and_counts():
    data = np.random.default_rng(0).integers(0, 5, size=(4, 6))
    values, inverse, counts = jg.unique(jg.tensor(data), return_inverse=True, return_counts=True)
    ref_values, ref_inverse, ref_counts = np.unique(data, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), ref_values)
    np.testing.assert_array_equal(inverse.numpy(), ref_inverse.reshape(4, 6))
    np.testing.assert_array_equal(counts.numpy(), ref_counts)
    assert values.dtype == jg.int64 and inverse.dtype == jg.int64 and counts.dtype == jg.int64


def test_unique_along_a_dim_and_of_floats():
    rows = jg.tensor([[1, 2], [1, 2], [0, 1]])
    values, counts = rows.unique(dim=0, return_counts=True)  # torch 2.13: [[0,1],[1,2]], [1,2]
    assert values.tolist() == [[0, 1], [1, 2]] and counts.tolist() == [1, 2]
    floats = jg.tensor([0.5, -1.0, 0.5, 2.0])
    out = jg.unique(floats, sorted=False)  # torch's CPU kernel sorts anyway
    assert out.tolist() == [-1.0, 0.5, 2.0] and out.dtype == jg.float32


def test_bincount_gradient_goes_to_the_weights():
    ids = jg.tensor([1, 3, 3, 0, 5])
    weights = jg.tensor([0.5, 1.0, 2.0, 3.0, 4.0], dtype=jg.float64, requires_grad=True)
    out = jg.bincount(ids, weights)
    assert out.tolist() == [3.0, 0.5, 0.0, 3.0, 0.0, 4.0] and out.dtype == jg.float64
    assert gradcheck(lambda w: jg.bincount(ids, w, minlength=8), (weights,))
    (out * jg.arange(6.0, dtype=jg.float64)).sum().backward()
    assert weights.grad.tolist() == [1.0, 3.0, 3.0, 0.0, 5.0]


@pytest.mark.parametrize(("call", "error", "pattern"), [
    (lambda: jg.bincount(jg.tensor([-1, 2])), RuntimeError, r"1-d non-negative integral"),
    (lambda: jg.bincount(jg.tensor([[1, 2]])), RuntimeError, r"got shape \(1, 2\)"),
    (lambda: jg.bincount(jg.tensor([1.0, 2.0])), NotImplementedError, r"'Float'"),
    (lambda: jg.bincount(jg.tensor([1, 2]), jg.ones(3)), RuntimeError, r"same length"),
    (lambda: jg.histc(jg.tensor([1, 2]), bins=4), NotImplementedError, r"'Long'"),
    (lambda: jg.histc(jg.ones(3), bins=4, min=3, max=1), RuntimeError, r"max must be larger"),
    (lambda: jg.histc(jg.tensor([1.0, math.inf])), RuntimeError, r"not finite"),
])
def test_counting_errors(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_histc_values_measured_with_torch():
    # torch 2.13: histc([0,1,2,3,4,4.5], bins=4, min=0, max=4) = [1,1,1,2] (4.5 dropped,
    # 4 in the last bin); histc([1,1,1], bins=4) = [0,0,3,0] (range widened to [0, 2])
    x = jg.tensor([0.0, 1, 2, 3, 4, 4.5])
    assert jg.histc(x, bins=4, min=0, max=4).tolist() == [1.0, 1.0, 1.0, 2.0]
    assert jg.histc(jg.tensor([1.0, 1, 1]), bins=4).tolist() == [0.0, 0.0, 3.0, 0.0]
    hist, edges = jg.histogram(jg.tensor([1.0, 2, 1, 4, 0.5]), bins=jg.tensor([0.0, 1, 3, 5]),
                               weight=jg.full((5,), 2.0))
    assert hist.tolist() == [2.0, 6.0, 2.0] and edges.tolist() == [0.0, 1.0, 3.0, 5.0]


def test_histogram_result_prints_as_torch_return_types():
    # torch 2.13 prints torch.return_types.histogram(\nhist=tensor([2., 1.]),\nbin_edges=...)
    result = jg.histogram(jg.tensor([1.0, 2, 1]), bins=2)
    assert repr(result) == ("jitgrad.return_types.histogram(\nhist=tensor([2., 1.]),\n"
                            "bin_edges=tensor([1.0000, 1.5000, 2.0000]))")


# ----- squeeze_ / unsqueeze_ ---------------------------------------------------------------


def test_unsqueeze_in_place_keeps_the_tensor_and_records_history():
    a = jg.tensor([1.0, 2.0, 3.0], dtype=jg.float64, requires_grad=True)
    b = a * 2
    assert b.unsqueeze_(0) is b and b.shape == (1, 3) and b._version == 1
    (b * jg.tensor([[1.0, 10.0, 100.0]], dtype=jg.float64)).sum().backward()
    assert a.grad.tolist() == [2.0, 20.0, 200.0]
    assert gradcheck(lambda x: (x * 1).unsqueeze_(1).squeeze_(1).unsqueeze_(-1), (a,))


def test_squeeze_in_place_of_a_view_keeps_its_base_and_storage():
    base = jg.zeros(2, 1, 3)
    view = base[0]
    view.squeeze_(0)
    assert view.shape == (3,) and view._base is base
    view[1] = 5.0
    assert base[0, 0].tolist() == [0.0, 5.0, 0.0]
    x = jg.ones(2, 1, 1)
    assert x.squeeze_((1, 2)).shape == (2,) and jg.ones(1, 3, 1).squeeze_().shape == (3,)


def test_in_place_view_op_on_a_leaf_that_requires_grad_is_refused():
    a = jg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        a.unsqueeze_(0)
    with jg.no_grad():
        a.unsqueeze_(0)
    assert a.shape == (1, 3) and a.requires_grad


# ----- optimizers and schedulers ----------------------------------------------------------


def test_adadelta_matches_a_float64_reference():
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(5, 4))
    grads = [rng.normal(size=(5, 4)) for _ in range(4)]
    lr, rho, eps, wd = 0.7, 0.8, 1e-5, 0.1
    w = jg.nn.Parameter(jg.tensor(w0))
    optimizer = jg.optim.Adadelta([w], lr=lr, rho=rho, eps=eps, weight_decay=wd)
    p, square_avg, acc_delta = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    for g in grads:
        w.grad = jg.tensor(g)
        optimizer.step()
        g = g + wd * p
        square_avg = rho * square_avg + (1 - rho) * g * g
        delta = np.sqrt(acc_delta + eps) / np.sqrt(square_avg + eps) * g
        acc_delta = rho * acc_delta + (1 - rho) * delta * delta
        p = p - lr * delta
    np.testing.assert_allclose(w.detach().numpy(), p, rtol=1e-12)
    assert float(optimizer.state[w]["step"]) == 4.0
    with pytest.raises(ValueError, match="Invalid rho value: 1.5"):
        jg.optim.Adadelta([w], rho=1.5)


def test_one_cycle_lr_matches_torch_figures():
    # torch 2.13, SGD(momentum=0.9) + OneCycleLR(max_lr=0.5, total_steps=20):
    # (step, lr, momentum) = (0, 0.020000000000000018, 0.95), (1, 0.06583592135001265,
    # 0.9404508497187474), (5, 0.5, 0.85), (6, 0.49373200311754367, 0.8512536043909088),
    # (19, 2e-06, 0.95)
    expected = {0: (0.020000000000000018, 0.95), 1: (0.06583592135001265, 0.9404508497187474),
                5: (0.5, 0.85), 6: (0.49373200311754367, 0.8512536043909088), 19: (2e-06, 0.95)}
    p = jg.nn.Parameter(jg.zeros(2))
    optimizer = jg.optim.SGD([p], lr=0.1, momentum=0.9)
    scheduler = jg.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.5, total_steps=20)
    for step in range(20):
        if step in expected:
            assert (scheduler.get_last_lr()[0], optimizer.param_groups[0]["momentum"]) == \
                expected[step]
        optimizer.step()
        scheduler.step()
    with pytest.raises(ValueError, match="Tried to step 21 times"):
        scheduler.step()


def test_one_cycle_lr_three_phase_linear_with_betas():
    p = jg.nn.Parameter(jg.zeros(2))
    optimizer = jg.optim.AdamW([p], lr=0.1)
    scheduler = jg.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=1.0, epochs=2, steps_per_epoch=5, pct_start=0.3,
        anneal_strategy="linear", three_phase=True, div_factor=10.0, final_div_factor=2.0)
    lrs, beta1s = [], []
    for _ in range(10):
        lrs.append(scheduler.get_last_lr()[0])
        beta1s.append(optimizer.param_groups[0]["betas"][0])
        optimizer.step()
        scheduler.step()
    # phases end at steps 2, 4 and 9: 0.1 -> 1.0 -> 0.1 -> 0.05, linearly
    np.testing.assert_allclose(lrs, [0.1, 0.55, 1.0, 0.55, 0.1, 0.09, 0.08, 0.07, 0.06, 0.05])
    np.testing.assert_allclose(beta1s[:5], [0.95, 0.9, 0.85, 0.9, 0.95])
    with pytest.raises(ValueError, match="either total_steps OR"):
        jg.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1.0)


# ----- modules ------------------------------------------------------------------------


def test_full_backward_hook_sees_and_replaces_grad_input():
    layer = jg.nn.Linear(3, 2).double()
    calls = []

    def hook(module, grad_input, grad_output):
        calls.append((module, grad_input, grad_output))
        return (grad_input[0] * 10,)

    handle = layer.register_full_backward_hook(hook)
    x = jg.ones(4, 3, dtype=jg.float64, requires_grad=True)
    layer(x).sum().backward()
    (module, (grad_x,), (grad_y,)), = calls
    assert module is layer
    np.testing.assert_array_equal(grad_y.numpy(), np.ones((4, 2)))
    expected = np.ones((4, 2)) @ layer.weight.detach().numpy()
    np.testing.assert_allclose(grad_x.numpy(), expected)
    np.testing.assert_allclose(x.grad.numpy(), 10 * expected)
    np.testing.assert_allclose(layer.weight.grad.numpy(), np.full((2, 3), 4.0))
    handle.remove()
    x.grad = None
    layer(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), expected)
    assert len(calls) == 1


def test_full_backward_hook_without_input_grad_gets_none():
    layer = jg.nn.Linear(3, 2)
    seen = []
    layer.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go[0].shape)))
    layer(jg.ones(4, 3)).sum().backward()
    assert seen == [((None,), (4, 2))]


def test_embedding_max_norm_renormalizes_the_rows_it_looks_up():
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(6, 3)) * 2
    emb = jg.nn.Embedding(6, 3, max_norm=1.5).double()
    with jg.no_grad():
        emb.weight.copy_(jg.tensor(w0))
    ids = np.array([[1, 4, 1], [5, 0, 2]])
    out = emb(jg.tensor(ids))
    expected = w0.copy()
    for i in np.unique(ids):
        norm = np.linalg.norm(w0[i])
        if norm > 1.5:
            expected[i] = w0[i] * (1.5 / (norm + 1e-7))
    np.testing.assert_allclose(emb.weight.detach().numpy(), expected, rtol=1e-14)
    np.testing.assert_allclose(out.detach().numpy(), expected[ids], rtol=1e-14)
    assert np.linalg.norm(emb.weight.detach().numpy()[3]) == np.linalg.norm(w0[3])  # not looked up
    assert "max_norm=1.5" in repr(emb)
    with pytest.raises(NotImplementedError, match="sparse=True"):
        jg.nn.Embedding(6, 3, sparse=True)(jg.tensor([1]))


# ----- convolution and pooling -------------------------------------------------------------


def test_conv2d_second_order_gradients_run_through_fold_and_unfold():
    rng = np.random.default_rng(1)
    x = jg.tensor(rng.normal(size=(1, 2, 5, 4)), requires_grad=True)
    w = jg.tensor(rng.normal(size=(3, 2, 2, 2)), requires_grad=True)

    def input_gradient(w):
        with jg.enable_grad():  # gradcheck's numerical pass runs without grad mode
            out = jg.nn.functional.conv2d(x, w, stride=(2, 1), padding=1)
            (grad_x,) = jg.autograd.grad(out.pow(2).sum(), x, create_graph=True)
        return grad_x

    assert gradcheck(input_gradient, (w,))


def test_conv2d_module_init_and_errors():
    jg.manual_seed(0)
    conv = jg.nn.Conv2d(2, 4, 3, stride=2, padding=1)
    assert conv.weight.shape == (4, 2, 3, 3) and conv.bias.shape == (4,)
    bound = 1 / math.sqrt(2 * 3 * 3)  # kaiming_uniform_(a=sqrt(5)) and the bias: U(-b, b)
    assert conv.weight.abs().max().item() <= bound and conv.bias.abs().max().item() <= bound
    assert repr(conv) == "Conv2d(2, 4, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))"
    assert conv(jg.ones(5, 2, 8, 7)).shape == (5, 4, 4, 4)
    with pytest.raises(RuntimeError, match=r"expected input\[1, 3, 8, 8\] to have 2 channels"):
        conv(jg.ones(1, 3, 8, 8))
    with pytest.raises(RuntimeError, match="Calculated output size is too small"):
        jg.nn.Conv2d(1, 1, 5)(jg.ones(1, 1, 3, 3))
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        jg.nn.MaxPool2d(2, padding=2)(jg.ones(1, 1, 6, 6))


def test_max_pool2d_gradient_goes_to_the_first_maximum():
    x = jg.tensor([[[[1.0, 3.0], [3.0, 0.0]]]], requires_grad=True)
    jg.nn.MaxPool2d(2)(x).sum().backward()
    assert x.grad.tolist() == [[[[0.0, 1.0], [0.0, 0.0]]]]  # torch 2.13 gives the same


def test_full_backward_hook_with_several_inputs_and_outputs_matches_torch():
    class Mix(jg.nn.Module):
        def forward(self, a, b, k):
            return a * b, (a + b * k).sum(0)

    module, seen = Mix(), []

    def hook(mod, grad_input, grad_output):
        seen.append(([None if g is None else g.tolist() for g in grad_input],
                     [g.tolist() for g in grad_output]))
        return (grad_input[0] * 2, grad_input[1], grad_input[2])

    module.register_full_backward_hook(hook)
    a = jg.tensor([1.0, 2.0], requires_grad=True)
    x, y = module(a, jg.tensor([3.0, 4.0]), 5.0)
    (x.sum() * 3 + y * 7).backward()
    # torch 2.13: grad_input ([16, 19], zeros for b (no grad), None for the float),
    # grad_output ([3, 3], 7); a.grad = 2 * [16, 19]
    assert seen == [([[16.0, 19.0], [0.0, 0.0], None], [[3.0, 3.0], 7.0])]
    assert a.grad.tolist() == [32.0, 38.0]


# ----- in-place writes into 0-d op results ---------------------------------------------------


def test_accumulating_into_a_0d_result_in_place():
    # makemore part 1: log_likelihood = 0.0; log_likelihood += torch.log(prob) in a loop
    probs = jg.tensor([[0.5, 0.25], [0.125, 1.0]])
    total = 0.0
    for i, j in [(0, 0), (0, 1), (1, 0)]:
        total += jg.log(probs[i, j])
    np.testing.assert_allclose(total.item(), np.log(0.5 * 0.25 * 0.125), rtol=1e-6)
    value = jg.tensor(2.0).exp()
    value[...] = 5.0
    assert value.item() == 5.0 and value.zero_().item() == 0.0


def test_in_place_write_into_a_saved_0d_output_is_still_detected():
    x = jg.tensor(1.0, requires_grad=True)
    e = x.exp()
    e += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        e.backward()
