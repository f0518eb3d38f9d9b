"""RMSprop against values printed by torch 2.13.0 (float32, 3 steps on sum(p**2) from [1, -2])
and against the update rule written out in float64 numpy."""

import pickle

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import optim


def _quadratic_steps(steps=3, start=(1.0, -2.0), dtype=jg.float32, **kwargs):
    p = jg.tensor(list(start), dtype=dtype, requires_grad=True)
    opt = optim.RMSprop([p], **kwargs)
    for _ in range(steps):
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
    return p, opt


# (kwargs, param after 3 steps, {state key: value}) printed by torch 2.13.0
TORCH_VALUES = [
    (dict(lr=0.01), [0.7799822688102722, -1.775349497795105],
     {"square_avg": [0.09903009980916977, 0.43386614322662354]}),
    (dict(lr=0.01, momentum=0.9), [0.5529149770736694, -1.5441299676895142],
     {"square_avg": [0.09335708618164062, 0.42100733518600464],
      "momentum_buffer": [19.000303268432617, -19.681337356567383]}),
    (dict(lr=0.01, centered=True, weight_decay=0.1), [0.7780683636665344, -1.773335337638855],
     {"square_avg": [0.1090560331940651, 0.4780614972114563],
      "grad_avg": [0.05674956738948822, -0.11907951533794403]}),
    (dict(lr=0.01, alpha=0.9, eps=1e-3, maximize=True), [1.0744587182998657, -2.074122190475464],
     {"square_avg": [1.1521517038345337, 4.4705705642700195]}),
]


@pytest.mark.parametrize("kwargs, param, state", TORCH_VALUES,
                         ids=["plain", "momentum", "centered-wd", "maximize"])
def test_rmsprop_matches_torch_values(kwargs, param, state):
    p, opt = _quadratic_steps(**kwargs)
    # a few ulp: torch's float32 sqrt kernel rounds differently from numpy's in ~1/6 of cases
    np.testing.assert_allclose(p.detach().numpy(), param, rtol=2e-6)
    assert list(opt.state[p]) == ["step", *state]
    for key, value in state.items():
        np.testing.assert_allclose(opt.state[p][key].numpy(), value, rtol=2e-6)
    assert opt.state[p]["step"].dtype == jg.float32 and opt.state[p]["step"].item() == 3.0


def _reference(p, grads, lr, alpha, eps, weight_decay, momentum, centered, maximize):
    """The RMSprop rule in float64, one line per formula of torch/optim/rmsprop.py."""
    v, m, buf = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for g in grads:
        g = -g if maximize else g
        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        if centered:
            m = m + (1 - alpha) * (g - m)
            avg = np.sqrt(v - m * m) + eps
        else:
            avg = np.sqrt(v) + eps
        if momentum > 0:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
    return p


@pytest.mark.parametrize("config", [
    dict(lr=0.01, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
         maximize=False),
    dict(lr=0.05, alpha=0.9, eps=1e-6, weight_decay=0.1, momentum=0.5, centered=True,
         maximize=True),
], ids=["defaults", "everything"])
def test_rmsprop_matches_reference_float64(config):
    rng = np.random.default_rng(0)
    start, grads = rng.normal(size=5), rng.normal(size=(10, 5))
    p = jg.tensor(start, requires_grad=True)
    opt = optim.RMSprop([p], **config)
    for g in grads:
        p.grad = jg.tensor(g)
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), _reference(start, grads, **config), rtol=1e-12)


def test_rmsprop_defaults_and_state_dict_round_trip():
    p, opt = _quadratic_steps(momentum=0.9)
    group = opt.param_groups[0]
    assert (group["lr"], group["alpha"], group["eps"], group["centered"]) == (0.01, 0.99, 1e-8,
                                                                            False)
    q = jg.tensor([1.0, -2.0], requires_grad=True)
    resumed = optim.RMSprop([q], momentum=0.9)
    with jg.no_grad():
        q.copy_(p)
    resumed.load_state_dict(pickle.loads(pickle.dumps(opt.state_dict())))  # as torch.save would
    for model, o in ((p, opt), (q, resumed)):
        o.zero_grad()
        (model * model).sum().backward()
        o.step()
    np.testing.assert_array_equal(q.detach().numpy(), p.detach().numpy())


@pytest.mark.parametrize("kwargs, message", [
    (dict(lr=-1), "Invalid learning rate: -1"), (dict(eps=-1), "Invalid epsilon value: -1"),
    (dict(momentum=-1), "Invalid momentum value: -1"),
    (dict(weight_decay=-1), "Invalid weight_decay value: -1"),
    (dict(alpha=-1), "Invalid alpha value: -1"),
])
def test_rmsprop_constructor_errors_match_torch(kwargs, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        optim.RMSprop([jg.ones(1, requires_grad=True)], **kwargs)
