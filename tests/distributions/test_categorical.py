"""Categorical against values printed by torch 2.13.0 (CPU) for the same parameters: probs,
logits, log_prob, entropy and their gradients, shapes, validation errors; sampling by its
frequencies; a loss using it compiled against eager (the distribution's calls are graph
breaks: the tracer builds no jitgrad objects other than nn layers, see the test)."""

import math

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck
from jitgrad.distributions import Categorical, Distribution

PROBS = [[0.2, 0.3, 0.5], [1.0, 1.0, 2.0]]


def test_probs_logits_log_prob_and_entropy_match_torch():
    c = Categorical(probs=jg.tensor(PROBS))
    assert repr(c) == "Categorical(probs: jitgrad.Size([2, 3]))"
    np.testing.assert_allclose(c.probs.numpy(), [[0.2, 0.3, 0.5], [0.25, 0.25, 0.5]], rtol=1e-7)
    np.testing.assert_allclose(c.logits.numpy(), [[-1.6094379425, -1.2039728165, -0.6931471825],
                                                  [-1.3862943649, -1.3862943649, -0.6931471825]],
                               rtol=1e-7)
    assert repr(c) == "Categorical(probs: jitgrad.Size([2, 3]), logits: jitgrad.Size([2, 3]))"
    assert (c.batch_shape, c.event_shape, c.param_shape) == ((2,), (), (2, 3))
    np.testing.assert_allclose(c.log_prob(jg.tensor([2, 0])).numpy(),
                               [-0.6931471825, -1.3862943649], rtol=1e-7)
    np.testing.assert_allclose(c.log_prob(jg.tensor([[2], [1]])).numpy(),
                               [[-0.6931471825, -0.6931471825], [-1.2039728165, -1.3862943649]],
                               rtol=1e-7)
    np.testing.assert_allclose(c.log_prob(jg.tensor([2.0, 0.0])).numpy(),
                               [-0.6931471825, -1.3862943649], rtol=1e-7)
    np.testing.assert_allclose(c.entropy().numpy(), [1.0296530724, 1.0397207737], rtol=1e-7)
    np.testing.assert_allclose(c.perplexity().numpy(), [2.8000941277, 2.8284270763], rtol=1e-6)
    assert c.mode.tolist() == [2, 2] and np.isnan(c.mean.numpy()).all()
    assert np.isnan(c.variance.numpy()).all() and c.mean.shape == (2,)
    assert repr(c.support) == "IntegerInterval(lower_bound=0, upper_bound=2)"
    assert c.enumerate_support().tolist() == [[0, 0], [1, 1], [2, 2]]
    assert c.enumerate_support(expand=False).tolist() == [[0], [1], [2]]


def test_gradients_through_logits_match_torch_and_gradcheck():
    logits = jg.tensor([1.0, -1.0, 0.5], requires_grad=True)
    d = Categorical(logits=logits)
    np.testing.assert_allclose(d.logits.detach().numpy(), [-0.5549569130, -2.5549569130,
                                                           -1.0549569130], rtol=1e-7)
    d.log_prob(jg.tensor(1)).backward()
    np.testing.assert_allclose(logits.grad.numpy(), [-0.5740969777, 0.9223043919, -0.3482074440],
                               rtol=1e-6)
    logits.grad = None
    Categorical(logits=logits).entropy().backward()
    np.testing.assert_allclose(logits.grad.numpy(), [-0.1891620159, 0.1297908723, 0.0593711734],
                               rtol=1e-6)
    p = jg.tensor([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]], dtype=jg.float64, requires_grad=True)
    assert gradcheck(lambda p: Categorical(probs=p).entropy(), (p,))
    assert gradcheck(lambda p: Categorical(probs=p).log_prob(jg.tensor([1, 2])), (p,))


def test_edge_values_match_torch():
    assert Categorical(logits=jg.tensor([0.0, -math.inf])).entropy().item() == 0.0
    zero = Categorical(probs=jg.tensor([0.0, 1.0]))
    np.testing.assert_allclose(zero.entropy().item(), 1.1920930376e-07, rtol=1e-6)
    np.testing.assert_allclose(zero.logits.numpy(), [-1.5942384720e+01, -1.1920930376e-07],
                               rtol=1e-6)
    np.testing.assert_allclose(Categorical(probs=jg.tensor([0.25, 0.75], dtype=jg.float64))
                               .entropy().item(), 0.5623351446, rtol=1e-9)
    expanded = Categorical(probs=jg.tensor([0.2, 0.8])).expand((3,))
    assert expanded.batch_shape == (3,) and expanded.probs.shape == (3, 2)
    assert expanded.log_prob(jg.tensor([1, 0, 1])).shape == (3,)
    unchecked = Categorical(probs=jg.tensor([0.5, -0.1, 0.6]), validate_args=False)
    np.testing.assert_allclose(unchecked.probs.numpy(), [0.5, -0.1, 0.6], rtol=1e-6)


@pytest.mark.parametrize(("call", "pattern"), [
    (lambda: Categorical(probs=jg.ones(2), logits=jg.ones(2)), "Either `probs` or `logits`"),
    (lambda: Categorical(), "Either `probs` or `logits`"),
    (lambda: Categorical(probs=jg.tensor(1.0)), "`probs` parameter must be at least one-dim"),
    (lambda: Categorical(probs=jg.tensor([0.5, -0.1, 0.6])),
     r"Expected parameter probs \(Tensor of shape \(3,\)\) of distribution Categorical\(probs: "
     r"jitgrad.Size\(\[3\]\)\) to satisfy the constraint Simplex\(\)"),
    (lambda: Categorical(logits=jg.tensor([0.0, math.nan])),
     r"constraint IndependentConstraint\(Real\(\), 1\)"),
    (lambda: Categorical(probs=jg.tensor(PROBS)).log_prob(jg.tensor([3, 0])),
     r"to be within the support \(IntegerInterval\(lower_bound=0, upper_bound=2\)\)"),
    (lambda: Categorical(probs=jg.tensor(PROBS)).log_prob(jg.tensor([1.5, 0.0])),
     "within the support"),
    (lambda: Categorical(probs=jg.tensor(PROBS)).log_prob(jg.tensor([1, 0, 1])),
     r"Value is not broadcastable with batch_shape\+event_shape"),
])
def test_validation_errors_follow_torch(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


def test_default_validation_can_be_switched_off():
    try:
        Distribution.set_default_validate_args(False)
        c = Categorical(probs=jg.tensor([0.5, -0.1, 0.6]))  # not checked
        with pytest.raises(RuntimeError, match="out of bounds"):  # gather's error, as torch's
            c.log_prob(jg.tensor(5))
    finally:
        Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError, match="Simplex"):
        Categorical(probs=jg.tensor([0.5, -0.1, 0.6]))


def test_samples_have_torch_shapes_and_frequencies():
    c = Categorical(probs=jg.tensor(PROBS))
    assert c.sample().shape == (2,) and c.sample().dtype == jg.int64
    assert c.sample((5,)).shape == (5, 2) and c.sample((4, 3)).shape == (4, 3, 2)
    with pytest.raises(NotImplementedError):
        c.rsample()
    with pytest.warns(FutureWarning, match="sample_n"):
        assert c.sample_n(3).shape == (3, 2)
    jg.manual_seed(0)
    draws = Categorical(probs=jg.tensor([0.1, 0.2, 0.7])).sample((20000,))
    frequencies = np.bincount(draws.numpy(), minlength=3) / 20000
    np.testing.assert_allclose(frequencies, [0.1, 0.2, 0.7], atol=0.015)  # ~4 sigma


def _policy_loss(logits, actions):
    dist = Categorical(logits=logits, validate_args=False)
    return -(dist.log_prob(actions).mean()) - 0.01 * dist.entropy().mean()


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_policy_gradient_loss_compiled_gives_eager_values_and_gradients(backend):
    logits = jg.tensor(np.random.default_rng(0).normal(size=(6, 4)), requires_grad=True)
    actions = jg.tensor([0, 3, 1, 1, 2, 0])
    # the tracer does not construct jitgrad classes other than nn layers, nor call their
    # methods: Categorical(...), log_prob and entropy run eagerly at graph breaks
    report = jg.explain(_policy_loss)(logits, actions)
    # (how many breaks a call reports depends on the resume functions compiled before it)
    kinds = [b.kind for b in report.break_reasons]
    assert kinds and set(kinds) == {"UNSUPPORTED_CALL"}
    logits.grad = None
    expected = _policy_loss(logits, actions)
    expected.backward()
    grad = logits.grad.numpy().copy()
    logits.grad = None
    got = jg.compile(_policy_loss, backend=backend)(logits, actions)
    got.backward()
    np.testing.assert_allclose(got.item(), expected.item(), rtol=1e-12)
    np.testing.assert_allclose(logits.grad.numpy(), grad, rtol=1e-10, atol=1e-14)
