"""MultiheadAttention and the Transformer modules against PyTorch 2.13's outputs and
gradients (fixtures/transformer.npz, written by fixtures/make_transformer_fixture.py), with
PyTorch's state_dict keys loaded as they are; then compiled against eager."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import nn
from tests.nn.compiled_parity import assert_compiled_matches_eager_in_one_graph

FIXTURE = dict(np.load(Path(__file__).with_name("fixtures") / "transformer.npz"))
L, S, N, E = 5, 6, 3, 8
MODULES = {
    "mha": lambda: nn.MultiheadAttention(E, 2),
    "mha_kdim_batch_first": lambda: nn.MultiheadAttention(E, 4, kdim=5, vdim=3,
                                                          batch_first=True),
    "encoder": lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(E, 2, 16, dropout=0.0),
                                             2),
    "encoder_layer_norm_first_gelu": lambda: nn.TransformerEncoderLayer(
        E, 4, 12, dropout=0.0, activation="gelu", norm_first=True, batch_first=True),
    "transformer": lambda: nn.Transformer(E, 2, 2, 1, 16, dropout=0.0),
}


def entries(name: str, kind: str) -> dict[str, np.ndarray]:
    prefix = f"{name}/{kind}/"
    return {k[len(prefix):]: v for k, v in FIXTURE.items() if k.startswith(prefix)}


def run(name: str, module, fn=None):
    """Output and the gradients of sum(y * cos(arange)) for the fixture's inputs."""
    inputs = [jg.tensor(FIXTURE[f"{name}/in{i}"], requires_grad=True)
              for i in range(sum(k.startswith(f"{name}/in") for k in FIXTURE))]
    masks = {k: jg.tensor(v) for k, v in entries(name, "mask").items()}
    y = (fn or module)(*inputs, **masks)
    y = y[0] if isinstance(y, tuple) else y
    (y * jg.tensor(np.cos(np.arange(y.numel())).reshape(y.shape))).sum().backward()
    return y, inputs


@pytest.mark.parametrize("name", sorted(MODULES))
def test_outputs_and_gradients_match_pytorch(name):
    module = MODULES[name]().double()
    state = entries(name, "sd")
    assert list(module.state_dict()) == list(state)  # PyTorch's keys, in PyTorch's order
    module.load_state_dict({k: jg.tensor(v) for k, v in state.items()})
    y, inputs = run(name, module)
    np.testing.assert_allclose(y.detach().numpy(), FIXTURE[f"{name}/y"], rtol=1e-10,
                               atol=1e-12)
    for i, t in enumerate(inputs):
        np.testing.assert_allclose(t.grad.numpy(), FIXTURE[f"{name}/gin{i}"], rtol=1e-9,
                                   atol=1e-12)
    grads = entries(name, "g")
    for key, p in module.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads[key], rtol=1e-9, atol=1e-12)


def test_attention_weights_and_masks():
    mha = nn.MultiheadAttention(E, 2, batch_first=True)
    q = jg.randn(N, L, E)
    bool_mask = jg.tensor(np.triu(np.ones((L, L), bool), 1))
    float_mask = nn.Transformer.generate_square_subsequent_mask(L)
    out_bool, w_bool = mha(q, q, q, attn_mask=bool_mask)
    out_float, w_float = mha(q, q, q, attn_mask=float_mask)
    out_causal, _ = mha(q, q, q, is_causal=True, need_weights=False)
    np.testing.assert_allclose(out_bool.detach().numpy(), out_float.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(out_causal.detach().numpy(), out_bool.detach().numpy(), rtol=1e-6)
    weights = w_bool.detach().numpy()
    assert weights.shape == (N, L, L)
    np.testing.assert_allclose(weights.sum(-1), np.ones((N, L)), rtol=1e-6)
    assert (weights[:, np.triu_indices(L, 1)[0], np.triu_indices(L, 1)[1]] == 0).all()
    _, per_head = mha(q, q, q, average_attn_weights=False)
    assert per_head.shape == (N, 2, L, L)
    unbatched, _ = mha(q[0], q[0], q[0])
    np.testing.assert_allclose(unbatched.detach().numpy(), mha(q, q, q)[0][0].detach().numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["eager", "numba"])
def test_compiled_encoder_matches_eager_in_one_graph(backend):
    jg.manual_seed(0)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, 2, 16, dropout=0.0,
                                                               batch_first=True), 2)
    x = jg.randn(N, L, E)
    padding = jg.tensor(np.array([[False] * (L - 1) + [True]] * N))

    def loss_of(x):
        return encoder(x, mask=nn.Transformer.generate_square_subsequent_mask(L),
                       src_key_padding_mask=padding).pow(2).mean()

    assert_compiled_matches_eager_in_one_graph(encoder, loss_of, x, backend)
