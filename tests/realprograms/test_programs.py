"""Conformance: PyTorch programs (tests/realprograms/programs/*.py, which `import torch`)
run unmodified through the import swap, eagerly and under `torch.compile` with the
"eager" and "numba" backends, and give the values of independent numpy references.

The programs are this project's own, written against the torch API in the style of the
programs inventoried in research/real_programs.md: the PyTorch tutorial's Legendre
polynomial fit with a custom autograd.Function (no randomness: exact values), a
makemore-style character MLP and GRU, a minGPT-style transformer block, an n-gram CNN
sentence classifier and MLPs with and without BatchNorm1d in the style of the tutorials'
text-CNN and batch-norm demos (their weights drawn with numpy, so they are compared with
torch's recorded losses).
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pytest
from scipy.special import erf

import jitgrad as jg
from jitgrad.run import run_script

PROGRAMS = os.path.join(os.path.dirname(__file__), "programs")


def run_program(name: str, *args: str) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph break or fallback would warn: none expected
        return run_script(os.path.join(PROGRAMS, name), args)


# ----- Legendre polynomial fit (custom autograd.Function, no randomness) -------------------


def legendre_fit_reference(steps: int) -> list[float]:
    """The program's loop in float64 numpy, gradients derived by hand."""
    x = np.linspace(-math.pi, math.pi, 2000)
    y = np.sin(x)
    a, b, c, d = 0.0, -1.0, 0.0, 0.3
    losses = []
    for _ in range(steps):
        t = c + d * x
        p3 = 0.5 * (5 * t**3 - 3 * t)
        residual = a + b * p3 - y
        losses.append(float(np.sum(residual**2)))
        g = 2 * residual
        g_t = g * b * 1.5 * (5 * t**2 - 1)
        grads = (g.sum(), (g * p3).sum(), g_t.sum(), (g_t * x).sum())
        a, b, c, d = (v - 5e-6 * dv for v, dv in zip((a, b, c, d), grads, strict=True))
    return losses


def test_legendre_fit_float64_follows_the_numpy_reference_step_by_step():
    result = run_program("legendre_fit.py", "--steps", "300", "--dtype", "float64")
    np.testing.assert_allclose(result["losses"], legendre_fit_reference(300), rtol=1e-10)


def test_legendre_fit_float32_reaches_torchs_final_loss():
    # torch 2.13 prints 8.943641662597656 after the tutorial's 2000 float32 steps
    # (research/real_programs.md §6.1); float64 gives 8.9436...
    result = run_program("legendre_fit.py")
    assert len(result["losses"]) == 2000
    np.testing.assert_allclose(result["losses"][-1], 8.943641662597656, rtol=1e-6)
    np.testing.assert_allclose(result["losses"][-1], legendre_fit_reference(2000)[-1], rtol=1e-5)


# ----- makemore-style character MLP ------------------------------------------------------


def char_mlp_reference(contexts, targets, params, steps):
    """Losses of the program's manual SGD in float64 numpy, gradients derived by hand."""
    C, W1, b1, W2, b2 = (p.astype(np.float64) for p in params)  # noqa: N806 - the program's names
    X, Y, n = contexts, targets, len(targets)  # noqa: N806
    losses = []
    for _ in range(steps):
        e = C[X].reshape(n, -1)
        h = np.tanh(e @ W1 + b1)
        logits = h @ W2 + b2
        z = logits - logits.max(1, keepdims=True)
        probs = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        losses.append(-np.mean(np.log(probs[np.arange(n), Y])))
        dlogits = probs.copy()
        dlogits[np.arange(n), Y] -= 1
        dlogits /= n
        dpre = dlogits @ W2.T * (1 - h**2)
        dC = np.zeros_like(C)
        np.add.at(dC, X, (dpre @ W1.T).reshape(C[X].shape))
        grads = (dC, e.T @ dpre, dpre.sum(0), h.T @ dlogits, dlogits.sum(0))
        C, W1, b1, W2, b2 = (p - 0.5 * g for p, g in zip((C, W1, b1, W2, b2), grads, strict=True))
    return losses, (C, W1, b1, W2, b2)


@pytest.fixture(scope="module")
def char_mlp_eager():
    return run_program("char_mlp.py", "--steps", "5")


def test_char_mlp_eager_follows_the_numpy_reference(char_mlp_eager):
    result = char_mlp_eager
    initial = [p.numpy() for p in result["initial"]]
    losses, final = char_mlp_reference(result["X"].numpy(), result["Y"].numpy(), initial, 5)
    np.testing.assert_allclose(result["losses"], losses, rtol=1e-5)
    for param, expected in zip(result["parameters"], final, strict=True):
        np.testing.assert_allclose(param.detach().numpy(), expected, rtol=1e-4, atol=1e-6)
    assert result["losses"][-1] < result["losses"][0]


def test_char_mlp_loss_compiles_to_one_graph(char_mlp_eager):
    result = char_mlp_eager
    report = jg.explain(result["loss_of"])(result["X"], result["Y"], *result["parameters"])
    assert (report.graph_count, report.graph_break_count) == (1, 0)


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_char_mlp_compiled_matches_eager(backend, char_mlp_eager):
    jg.reset()
    compiled = run_program("char_mlp.py", "--steps", "5", "--compile", backend)
    np.testing.assert_allclose(compiled["losses"], char_mlp_eager["losses"], rtol=1e-5)
    for got, expected in zip(compiled["parameters"], char_mlp_eager["parameters"], strict=True):
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)


# ----- minGPT-style transformer block ------------------------------------------------------


def block_reference(x, params):
    """The block's forward in float64 numpy from its state_dict-named parameters."""

    def linear(v, name):
        return v @ params[f"{name}.weight"].T + params[f"{name}.bias"]

    def layer_norm(v, name):
        mean = v.mean(-1, keepdims=True)
        var = v.var(-1, keepdims=True)
        return (v - mean) / np.sqrt(var + 1e-5) * params[f"{name}.weight"] + params[f"{name}.bias"]

    batch, time, channels = x.shape
    heads = 4
    q, k, v = np.split(linear(layer_norm(x, "ln_1"), "attn.c_attn"), 3, axis=2)
    q, k, v = (t.reshape(batch, time, heads, -1).transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(channels // heads)
    scores = np.where(np.tril(np.ones((time, time))) == 0, -np.inf, scores)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    attended = (weights @ v).transpose(0, 2, 1, 3).reshape(batch, time, channels)
    x = x + linear(attended, "attn.c_proj")
    hidden = linear(layer_norm(x, "ln_2"), "mlp.c_fc")
    return x + linear(0.5 * hidden * (1 + erf(hidden / math.sqrt(2))), "mlp.c_proj")


def test_attention_block_float64_forward_matches_numpy():
    result = run_program("attention_block.py", "--dtype", "float64")
    params = {name: t.detach().numpy() for name, t in result["block"].state_dict().items()}
    expected = block_reference(result["x"].numpy(), params)
    np.testing.assert_allclose(result["out"].detach().numpy(), expected, rtol=1e-10, atol=1e-12)
    block, x = result["block"], result["x"].detach().requires_grad_()
    assert jg.autograd.gradcheck(lambda v: block(v).pow(2).mean(), (x,))


@pytest.fixture(scope="module")
def attention_block_eager():
    return run_program("attention_block.py")


def test_attention_block_compiles_to_one_graph(attention_block_eager):
    report = jg.explain(attention_block_eager["block"])(attention_block_eager["x"])
    assert (report.graph_count, report.graph_break_count) == (1, 0)


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_attention_block_compiled_forward_and_backward_match_eager(backend,
                                                                   attention_block_eager):
    jg.reset()
    compiled = run_program("attention_block.py", "--compile", backend)
    np.testing.assert_allclose(compiled["out"].detach().numpy(),
                               attention_block_eager["out"].detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    assert attention_block_eager["grads"].keys() == compiled["grads"].keys()
    assert len(compiled["grads"]) == 12
    for name, grad in attention_block_eager["grads"].items():
        np.testing.assert_allclose(compiled["grads"][name].numpy(), grad.numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=name)


# ----- makemore-style GRU (DataLoader, AdamW, a Python loop over time steps) -------------------


@pytest.fixture(scope="module")
def char_gru_eager():
    return run_program("char_gru.py", "--steps", "4")


def test_char_gru_forward_compiles_to_one_graph_and_trains(char_gru_eager):
    result = char_gru_eager
    inputs, targets = next(iter(result["loader"]))
    # capture is what this checks (the unrolled time loop is one graph): the eager backend
    # saves the numba compiles, which the char MLP and attention block tests cover
    report = jg.explain(jg.compile(result["model"], backend="eager"))(inputs, targets)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    losses = result["losses"]
    assert len(losses) == 8 and losses[-1] < losses[0]
    # the loss at initialization is that of near-uniform predictions over 13 characters
    np.testing.assert_allclose(losses[0], math.log(13), rtol=0.15)


@pytest.mark.parametrize("backend", ["eager"])  # numba: 38 s of compiles from a cold cache
def test_char_gru_compiled_training_matches_eager(backend, char_gru_eager):
    jg.reset()
    compiled = run_program("char_gru.py", "--steps", "4", "--compile", backend)
    np.testing.assert_allclose(compiled["losses"], char_gru_eager["losses"], rtol=1e-5)
    for (name, got), expected in zip(compiled["model"].named_parameters(),
                                     char_gru_eager["model"].parameters(), strict=True):
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=name)


# ----- n-gram CNN sentence classifier (a max-pool layer built in forward) -----------------

# torch 2.13's losses for `ngram_cnn.py --steps 12` (same numpy-drawn initial weights)
NGRAM_CNN_TORCH_LOSSES = [0.6773772239685059, 0.6604595184326172, 0.6446897983551025,
                          0.6285139918327332, 0.6118304133415222, 0.5942943692207336,
                          0.5774953961372375, 0.5600692629814148, 0.5415101647377014,
                          0.5219307541847229, 0.5010784268379211, 0.4789639711380005]


@pytest.fixture(scope="module")
def ngram_cnn_eager():
    return run_program("ngram_cnn.py", "--steps", "12")


def test_ngram_cnn_eager_follows_torchs_losses(ngram_cnn_eager):
    np.testing.assert_allclose(ngram_cnn_eager["losses"], NGRAM_CNN_TORCH_LOSSES, rtol=2e-6)


def test_ngram_cnn_forward_with_its_pool_layers_is_one_graph(ngram_cnn_eager):
    report = jg.explain(ngram_cnn_eager["model"])(ngram_cnn_eager["words"])
    assert (report.graph_count, report.graph_break_count) == (1, 0)


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_ngram_cnn_compiled_training_matches_eager(backend, ngram_cnn_eager):
    jg.reset()
    compiled = run_program("ngram_cnn.py", "--steps", "12", "--compile", backend)
    np.testing.assert_allclose(compiled["losses"], ngram_cnn_eager["losses"], rtol=1e-5)
    assert compiled["predictions"] == ngram_cnn_eager["predictions"]


# ----- MLPs with and without BatchNorm1d, train and eval modes ----------------------------

# torch 2.13's test losses (eval mode, before each epoch) of `batchnorm_mlp.py --epochs 3`;
# the net without batch norm is deterministic to rounding, the other's redundant input
# normalization has zero-gradient parameters that Adam turns rounding noise into steps
# for, so it is compared to a band
BATCHNORM_TORCH_TEST_LOSSES = ([29.314533233642578, 26.1013240814209, 21.083988189697266],
                               [27.06267738342285, 22.48038673400879, 21.392187118530273])


@pytest.fixture(scope="module")
def batchnorm_eager():
    return run_program("batchnorm_mlp.py", "--epochs", "3")


def test_batchnorm_mlps_eager_follow_torchs_test_losses(batchnorm_eager):
    plain, normed = batchnorm_eager["test_losses"]
    np.testing.assert_allclose(plain, BATCHNORM_TORCH_TEST_LOSSES[0], rtol=1e-6)
    # the batch statistics are accumulated in float64 (Note [Accumulating float sums]) where
    # torch's batch_norm accumulates in float32: the first epoch agrees to 1e-7 and training
    # grows the rounding difference to ~0.15% by the third
    np.testing.assert_allclose(normed[0], BATCHNORM_TORCH_TEST_LOSSES[1][0], rtol=1e-6)
    np.testing.assert_allclose(normed, BATCHNORM_TORCH_TEST_LOSSES[1], rtol=5e-3)
    bn = batchnorm_eager["nets"][1].bns[0]
    assert bn.num_batches_tracked.item() == 3 * 7 and bn.training  # eval only to test


def test_batchnorm_mlps_compiled_match_eager(batchnorm_eager):
    jg.reset()
    compiled = run_program("batchnorm_mlp.py", "--epochs", "3", "--compile", "eager")
    for got, expected in zip(compiled["test_losses"] + compiled["train_losses"],
                             batchnorm_eager["test_losses"] + batchnorm_eager["train_losses"],
                             strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5)
    for got, expected in zip(compiled["nets"][1].state_dict().values(),
                             batchnorm_eager["nets"][1].state_dict().values(), strict=True):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-4, atol=1e-6)
