"""Optimizers: update rules against hand-written numpy over several steps, PyTorch's measured
values (research/eager_autograd.md §3.2, torch 2.13.0 CPU), state, state dicts, errors."""

import copy
import pickle

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import optim


def _quadratic_steps(optimizer_cls, steps=3, start=(1.0, -2.0), **kwargs):
    """Minimise sum(p**2) from `start`; returns (param, optimizer)."""
    p = jg.tensor(list(start), requires_grad=True)
    opt = optimizer_cls([p], **kwargs)
    for _ in range(steps):
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
    return p, opt


# ----- values measured with torch 2.13.0 (float32, 3 steps on sum(p**2) from [1, -2]) -----

def test_sgd_nesterov_matches_torch_bit_for_bit():
    p, opt = _quadratic_steps(optim.SGD, lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)
    # torch: [-0.11165107786655426, 0.22330215573310852]; exact because add(alpha=) is an FMA
    np.testing.assert_array_equal(p.detach().numpy(),
                                  np.array([-0.11165107786655426, 0.22330215573310852], np.float32))
    np.testing.assert_array_equal(opt.state[p]["momentum_buffer"].numpy(),
                                  np.array([3.186910390853882, -6.373820781707764], np.float32))


def test_sgd_first_momentum_step_copies_the_gradient():
    p = jg.tensor([1.0, 1.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = jg.tensor([3.0, 3.0])
    opt.step()
    np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(), [3.0, 3.0])
    np.testing.assert_allclose(p.detach().numpy(), [0.7, 0.7], rtol=1e-7)
    assert opt.state[p]["momentum_buffer"]._data is not p.grad._data


def test_adam_matches_torch_values():
    p, opt = _quadratic_steps(optim.Adam, lr=0.1)
    np.testing.assert_array_equal(p.detach().numpy(),
                                  np.array([0.7015863060951233, -1.7006233930587769], np.float32))
    state = opt.state[p]
    np.testing.assert_allclose(state["exp_avg"].numpy(), [0.4840824604034424, -1.0260332822799683],
                               rtol=1e-7)
    assert state["step"].dtype == jg.float32 and state["step"].ndim == 0
    assert state["step"].item() == 3.0


def test_adamw_matches_torch_values():
    p, opt = _quadratic_steps(optim.AdamW, lr=0.1)
    np.testing.assert_array_equal(p.detach().numpy(),
                                  np.array([0.6989112496376038, -1.6949446201324463], np.float32))
    assert opt.defaults["weight_decay"] == 0.01 and opt.defaults["decoupled_weight_decay"]


def test_adam_amsgrad_l2_maximize_matches_torch_values():
    p, opt = _quadratic_steps(optim.Adam, lr=0.1, amsgrad=True, weight_decay=0.1, maximize=True)
    np.testing.assert_allclose(p.detach().numpy(), [1.3004900217056274, -2.3003523349761963],
                               rtol=1e-7)
    np.testing.assert_allclose(opt.state[p]["max_exp_avg_sq"].numpy(),
                               [0.013166084885597229, 0.04778926074504852], rtol=1e-6)


def test_sgd_dampening_and_plain_match_torch_values():
    p, _ = _quadratic_steps(optim.SGD, lr=0.1, momentum=0.9, dampening=0.5)
    np.testing.assert_array_equal(p.detach().numpy(),
                                  np.array([0.25200003385543823, -0.5040000677108765], np.float32))
    p, opt = _quadratic_steps(optim.SGD, lr=0.1)
    np.testing.assert_array_equal(p.detach().numpy(),
                                  np.array([0.5119999647140503, -1.0239999294281006], np.float32))
    assert len(opt.state) == 0  # no momentum: no state at all


# ----- update formulas against a float64 numpy reference over random gradients -------------

def _reference_sgd(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                   maximize=False):
    buf = None
    for g in grads:
        g = -g if maximize else g
        g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def _reference_adam(p, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                    amsgrad=False, decoupled=False, maximize=False):
    b1, b2 = betas
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    vmax = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = -g if maximize else g
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        vhat = (vmax if amsgrad else v) / (1 - b2**t)
        p = p - lr * (m / (1 - b1**t)) / (np.sqrt(vhat) + eps)
    return p


def _run(optimizer_cls, p0, grads, **kwargs):
    p = jg.tensor(p0, requires_grad=True)
    opt = optimizer_cls([p], **kwargs)
    for g in grads:
        p.grad = jg.tensor(g)
        opt.step()
    return p.detach().numpy()


SGD_CONFIGS = [
    dict(lr=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01),
    dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1),
    dict(lr=0.05, momentum=0.5, maximize=True),
]

ADAM_CONFIGS = [
    (optim.Adam, dict(lr=0.01), {}),
    (optim.Adam, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1), {}),
    (optim.Adam, dict(lr=0.01, amsgrad=True, maximize=True), {}),
    (optim.AdamW, dict(lr=0.01, weight_decay=0.1), dict(decoupled=True)),
    (optim.AdamW, dict(lr=0.01, amsgrad=True), dict(decoupled=True, weight_decay=0.01)),
]


@pytest.mark.parametrize("config", SGD_CONFIGS, ids=str)
def test_sgd_matches_reference_float64(config):
    rng = np.random.default_rng(0)
    p0, grads = rng.normal(size=6), rng.normal(size=(5, 6))
    np.testing.assert_allclose(_run(optim.SGD, p0, grads, **config),
                               _reference_sgd(p0, grads, **config), rtol=1e-12)


@pytest.mark.parametrize("case", ADAM_CONFIGS, ids=lambda c: f"{c[0].__name__}-{c[1]}")
def test_adam_matches_reference_float64(case):
    cls, config, extra = case
    rng = np.random.default_rng(1)
    p0, grads = rng.normal(size=6), rng.normal(size=(5, 6))
    reference = _reference_adam(p0, grads, **{**config, **extra})
    np.testing.assert_allclose(_run(cls, p0, grads, **config), reference, rtol=1e-12)


def test_adam_float32_stays_within_a_few_ulp_of_float64_reference():
    rng = np.random.default_rng(2)
    p0, grads = rng.normal(size=64), rng.normal(size=(20, 64))
    got = _run(optim.Adam, p0.astype(np.float32), grads.astype(np.float32), lr=0.01)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _reference_adam(p0, grads, lr=0.01), rtol=2e-5, atol=1e-6)


# ----- behaviour ------------------------------------------------------------------------------

def test_step_skips_parameters_without_grad_and_creates_no_state():
    a = jg.tensor([1.0], requires_grad=True)
    b = jg.tensor([2.0], requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = jg.tensor([1.0])
    opt.step()
    assert b.item() == 2.0 and b not in opt.state and a in opt.state


def test_step_updates_in_place_keeping_identity_and_bumping_version():
    p = jg.tensor([1.0, 2.0], requires_grad=True)
    data, version = p._data, p._version
    opt = optim.SGD([p], lr=0.5)
    p.grad = jg.tensor([1.0, 1.0])
    opt.step()
    assert p._data is data and p._version == version + 1
    assert p.is_leaf and p.requires_grad
    np.testing.assert_allclose(p.detach().numpy(), [0.5, 1.5])


def test_step_with_closure_returns_loss_and_runs_with_grad():
    p = jg.tensor([3.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with jg.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 9.0
    np.testing.assert_allclose(p.detach().numpy(), [1.5])


def test_zero_grad_sets_none_by_default_or_zeros_in_place():
    p = jg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    (p * p).sum().backward()
    grad = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is grad
    np.testing.assert_array_equal(grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert p.grad is None


def test_param_groups_take_defaults_and_overrides():
    a = jg.tensor([1.0], requires_grad=True)
    b = jg.tensor([1.0], requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.1}], lr=0.01, momentum=0.9)
    assert opt.param_groups[0]["lr"] == 0.01 and opt.param_groups[1]["lr"] == 0.1
    assert opt.param_groups[1]["momentum"] == 0.9 and opt.param_groups[1]["params"] == [b]
    a.grad, b.grad = jg.tensor([1.0]), jg.tensor([1.0])
    opt.step()
    np.testing.assert_allclose([a.item(), b.item()], [0.99, 0.9], rtol=1e-6)


def test_parameters_from_a_generator_and_add_param_group():
    model_params = (jg.tensor([float(i)], requires_grad=True) for i in range(3))
    opt = optim.Adam(model_params)
    extra = jg.tensor([1.0], requires_grad=True)
    opt.add_param_group({"params": [extra], "lr": 0.5})
    assert len(opt.param_groups) == 2 and opt.param_groups[1]["betas"] == (0.9, 0.999)
    assert opt.param_groups[1]["lr"] == 0.5 and len(opt.param_groups[0]["params"]) == 3


@pytest.mark.parametrize("make, error, message", [
    (lambda p: optim.SGD([], lr=0.1), ValueError, "optimizer got an empty parameter list"),
    (lambda p: optim.SGD([p * 2], lr=0.1), ValueError, "can't optimize a non-leaf Tensor"),
    (lambda p: optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1), ValueError,
     "some parameters appear in more than one parameter group"),
    (lambda p: optim.SGD([p], lr=0.1, nesterov=True), ValueError,
     "Nesterov momentum requires a momentum and zero dampening"),
    (lambda p: optim.SGD(p, lr=0.1), TypeError,
     "params argument given to the optimizer should be an iterable of Tensors or dicts, but "
     "got jitgrad.FloatTensor"),
    (lambda p: optim.SGD([1], lr=0.1), TypeError,
     "optimizer can only optimize Tensors, but one of the params is int"),
    (lambda p: optim.Adam([p], lr=-1), ValueError, "Invalid learning rate: -1"),
    (lambda p: optim.Adam([p], betas=(1.0, 0.9)), ValueError,
     "Invalid beta parameter at index 0: 1.0"),
    (lambda p: optim.AdamW([p], eps=-1.0), ValueError, "Invalid epsilon value: -1.0"),
])
def test_constructor_errors_match_torch(make, error, message):
    p = jg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(error) as info:
        make(p)
    assert str(info.value) == message


def test_duplicate_parameter_in_a_group_warns():
    p = jg.tensor([1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="duplicate parameters"):
        optim.SGD([p, p], lr=0.1)


def test_repr_lists_groups_with_sorted_keys():
    p = jg.tensor([1.0], requires_grad=True)
    text = repr(optim.SGD([p], lr=0.01, momentum=0.9))
    assert text == ("SGD (\nParameter Group 0\n    dampening: 0\n    lr: 0.01\n"
                    "    maximize: False\n    momentum: 0.9\n    nesterov: False\n"
                    "    weight_decay: 0\n)")


# ----- state dicts ------------------------------------------------------------------------------

def test_state_dict_layout_uses_running_indices():
    a = jg.tensor([1.0, -2.0], requires_grad=True)
    b = jg.tensor([0.5], requires_grad=True)
    c = jg.tensor([0.5], requires_grad=True)
    opt = optim.AdamW([{"params": [a, b]}, {"params": [c], "lr": 0.5}], lr=0.1)
    (a * a).sum().backward()
    opt.step()
    sd = opt.state_dict()
    assert list(sd["state"]) == [0]
    assert sorted(sd["state"][0]) == ["exp_avg", "exp_avg_sq", "step"]
    assert sd["state"][0]["exp_avg"] is opt.state[a]["exp_avg"]  # not a copy, as in torch
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sd["param_groups"][1] == {"lr": 0.5, "betas": (0.9, 0.999), "eps": 1e-8,
                                     "weight_decay": 0.01, "amsgrad": False, "maximize": False,
                                     "decoupled_weight_decay": True, "params": [2]}


def test_state_dict_round_trip_continues_identically():
    rng = np.random.default_rng(3)
    p0, grads = rng.normal(size=4).astype(np.float32), rng.normal(size=(6, 4)).astype(np.float32)
    p = jg.tensor(p0, requires_grad=True)
    opt = optim.Adam([p], lr=0.05, amsgrad=True)
    for g in grads[:3]:
        p.grad = jg.tensor(g)
        opt.step()
    saved = pickle.loads(pickle.dumps(opt.state_dict()))  # as torch.save/torch.load would

    q = jg.tensor(p.detach().numpy().copy(), requires_grad=True)
    opt2 = optim.Adam([q], lr=0.5)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == 0.05 and opt2.param_groups[0]["params"][0] is q
    assert opt2.state[q]["step"].item() == 3.0
    for g in grads[3:]:
        p.grad, q.grad = jg.tensor(g), jg.tensor(g)
        opt.step()
        opt2.step()
    np.testing.assert_array_equal(q.detach().numpy(), p.detach().numpy())


def test_load_state_dict_casts_state_to_parameter_dtype_but_not_step():
    p = jg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adam([p])
    p.grad = jg.tensor([1.0, 1.0])
    opt.step()
    q = jg.tensor([1.0, 2.0], dtype=jg.float64, requires_grad=True)
    opt2 = optim.Adam([q])
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    assert opt2.state[q]["exp_avg"].dtype == jg.float64
    assert opt2.state[q]["step"].dtype == jg.float32


def test_load_state_dict_errors_on_group_mismatch():
    a = jg.tensor([1.0], requires_grad=True)
    b = jg.tensor([1.0], requires_grad=True)
    sd = optim.SGD([a, b]).state_dict()
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.SGD([{"params": [a]}, {"params": [b]}]).load_state_dict(sd)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        optim.SGD([a]).load_state_dict(sd)
