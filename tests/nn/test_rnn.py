"""Recurrent layers and packed sequences against a numpy re-implementation of the equations.

The numpy reference below is written from the published equations (Elman; Hochreiter &
Schmidhuber 1997; Cho et al. 2014 with PyTorch's r inside the hidden term), not from
jitgrad's code. Gradients are checked against central differences of that reference,
compiled runs against eager ones, and PyTorch's own numbers come from
fixtures/rnn_torch.npz (written by fixtures/make_rnn_fixtures.py with torch).
"""

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.eager.ops.recurrent import gru_sequence, lstm_sequence, rnn_sequence
from jitgrad.nn.modules.recurrence import gru_step, lstm_step, rnn_relu_step, rnn_tanh_step
from jitgrad.nn.utils import rnn as rnn_utils

FIXTURES = Path(__file__).with_name("fixtures") / "rnn_torch.npz"
IN, HIDDEN, STEPS, BATCH = 2, 3, 3, 2


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def np_step(mode, x, state, w_ih, w_hh, b_ih, b_hh):
    """One step of the published equations; state (h,) or (h, c), each (B, H)."""
    gx, gh = x @ w_ih.T + b_ih, state[0] @ w_hh.T + b_hh
    if mode == "rnn_tanh":
        return (np.tanh(gx + gh),)
    if mode == "rnn_relu":
        return (np.maximum(gx + gh, 0),)
    if mode == "lstm":
        i, f, g, o = np.split(gx + gh, 4, axis=1)
        c = sigmoid(f) * state[1] + sigmoid(i) * np.tanh(g)
        return sigmoid(o) * np.tanh(c), c
    r_x, z_x, n_x = np.split(gx, 3, axis=1)
    r_h, z_h, n_h = np.split(gh, 3, axis=1)
    r, z = sigmoid(r_x + r_h), sigmoid(z_x + z_h)
    n = np.tanh(n_x + r * n_h)
    return ((1 - z) * n + z * state[0],)


def np_rnn(cfg, params, x, h0):
    """Multi-layer (bi)directional recurrence over time-major x (T, B, in): (y, [h_n, ...])."""
    directions = 2 if cfg.bidirectional else 1
    layer_input, finals = x, []
    for layer in range(cfg.num_layers):
        outputs = []
        for direction in range(directions):
            suffix = f"_l{layer}" + ("_reverse" if direction else "")
            w_ih, w_hh = params["weight_ih" + suffix], params["weight_hh" + suffix]
            b_ih = params.get("bias_ih" + suffix, np.zeros(w_ih.shape[0]))
            b_hh = params.get("bias_hh" + suffix, np.zeros(w_ih.shape[0]))
            state = tuple(h[layer * directions + direction] for h in h0)
            out = np.zeros((x.shape[0], x.shape[1], w_hh.shape[1]))
            order = range(x.shape[0])[::-1] if direction else range(x.shape[0])
            for t in order:
                state = np_step(cfg.mode, layer_input[t], state, w_ih, w_hh, b_ih, b_hh)
                out[t] = state[0]
            outputs.append(out)
            finals.append(state)
        layer_input = np.concatenate(outputs, axis=2)
    return layer_input, [np.stack([f[k] for f in finals]) for k in range(len(h0))]


@dataclasses.dataclass(frozen=True)
class Config:
    mode: str
    num_layers: int = 1
    bidirectional: bool = False
    bias: bool = True
    batch_first: bool = False

    @property
    def states(self):
        return 2 if self.mode == "lstm" else 1

    def make(self, dtype=jg.float64, **extra):
        jg.manual_seed(0)
        kwargs = dict(num_layers=self.num_layers, bidirectional=self.bidirectional,
                      bias=self.bias, batch_first=self.batch_first, dtype=dtype, **extra)
        if self.mode.startswith("rnn"):
            return nn.RNN(IN, HIDDEN, nonlinearity=self.mode[4:], **kwargs)
        return {"lstm": nn.LSTM, "gru": nn.GRU}[self.mode](IN, HIDDEN, **kwargs)

    def __str__(self):
        flags = [f"{self.num_layers}layer", "bidir" * self.bidirectional,
                 "nobias" * (not self.bias), "batch_first" * self.batch_first]
        return "-".join([self.mode, *filter(None, flags)])


CONFIGS = [Config("rnn_tanh"), Config("rnn_relu", 2, batch_first=True),
           Config("rnn_tanh", 2, True, False), Config("lstm"), Config("lstm", 2, True),
           Config("lstm", 1, True, False, True), Config("gru"), Config("gru", 2, True, True),
           Config("gru", 1, True, False, True)]


def inputs(cfg, dtype=np.float64, seed=0):
    """x in the module's layout, h0 list of (L*D, B, H) arrays."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((STEPS, BATCH, IN)).astype(dtype)
    layers = cfg.num_layers * (2 if cfg.bidirectional else 1)
    h0 = [rng.standard_normal((layers, BATCH, HIDDEN)).astype(dtype) for _ in range(cfg.states)]
    return x, h0


def as_module_args(cfg, x, h0, requires_grad=False):
    xj = jg.tensor(x.transpose(1, 0, 2) if cfg.batch_first else x, requires_grad=requires_grad)
    hj = [jg.tensor(h, requires_grad=requires_grad) for h in h0]
    return xj, (tuple(hj) if cfg.states == 2 else hj[0])


def time_major(cfg, y):
    return y.transpose(1, 0, 2) if cfg.batch_first else y


def numpy_params(module):
    return {k: v.detach().numpy().astype(np.float64) for k, v in module.state_dict().items()}


def final_states(cfg, hn):
    return list(hn) if cfg.states == 2 else [hn]


@pytest.mark.parametrize("cfg", CONFIGS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("given_state", [True, False], ids=["h0", "zeros"])
def test_forward_matches_numpy(cfg, dtype, given_state):
    module = cfg.make(jg.float32 if dtype == np.float32 else jg.float64)
    x, h0 = inputs(cfg, dtype)
    if not given_state:
        h0 = [np.zeros_like(h) for h in h0]
    xj, hj = as_module_args(cfg, x, h0)
    y, hn = module(xj, hj if given_state else None)
    y_ref, hn_ref = np_rnn(cfg, numpy_params(module), x.astype(np.float64), h0)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    assert y.dtype == xj.dtype and y.shape == xj.shape[:2] + (y_ref.shape[2],)
    np.testing.assert_allclose(time_major(cfg, y.detach().numpy()), y_ref, rtol=rtol, atol=rtol)
    for got, want in zip(final_states(cfg, hn), hn_ref, strict=True):
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=rtol, atol=rtol)


def numerical_grad(f, array, eps=1e-6):
    grad = np.zeros_like(array)
    for index in np.ndindex(array.shape):
        saved = array[index]
        array[index] = saved + eps
        up = f()
        array[index] = saved - eps
        down = f()
        array[index] = saved
        grad[index] = (up - down) / (2 * eps)
    return grad


def weighted_loss(y, hn, weights):
    """sum(y * R) + sum(h_n * S) (+ sum(c_n * S')): every output reaches the loss."""
    total = (y * weights[0]).sum()
    for a, w in zip(hn, weights[1:], strict=True):
        total = total + (a * w).sum()
    return total


@pytest.mark.parametrize("cfg", CONFIGS, ids=str)
def test_gradients_match_central_differences_of_numpy(cfg):
    module = cfg.make()
    x, h0 = inputs(cfg)
    params = numpy_params(module)
    rng = np.random.default_rng(1)
    y_ref, hn_ref = np_rnn(cfg, params, x, h0)
    weights = [rng.standard_normal(a.shape) for a in [y_ref, *hn_ref]]
    xj, hj = as_module_args(cfg, x, h0, requires_grad=True)
    y, hn = module(xj, hj)
    y_tm = y.transpose(0, 1) if cfg.batch_first else y
    weighted_loss(y_tm, final_states(cfg, hn), [jg.tensor(w) for w in weights]).backward()

    def loss():
        y_np, hn_np = np_rnn(cfg, params, x, h0)
        return weighted_loss(y_np, hn_np, weights)

    np.testing.assert_allclose(time_major(cfg, xj.grad.numpy()), numerical_grad(loss, x),
                               rtol=1e-6, atol=1e-8)
    for hj_k, h in zip(final_states(cfg, hj), h0, strict=True):
        np.testing.assert_allclose(hj_k.grad.numpy(), numerical_grad(loss, h), rtol=1e-6,
                                   atol=1e-8)
    for name, param in module.named_parameters():
        np.testing.assert_allclose(param.grad.numpy(), numerical_grad(loss, params[name]),
                                   rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("step,gates", [(rnn_tanh_step, 1), (rnn_relu_step, 1), (lstm_step, 4),
                                        (gru_step, 3)], ids=lambda v: getattr(v, "__name__", v))
def test_step_functions_pass_gradcheck(step, gates):
    rng = np.random.default_rng(2)

    def t(*shape):
        return jg.tensor(rng.standard_normal(shape), requires_grad=True)

    gates_x, w_hh, b_hh = t(BATCH, gates * HIDDEN), t(gates * HIDDEN, HIDDEN), t(gates * HIDDEN)
    state = (t(BATCH, HIDDEN), t(BATCH, HIDDEN)) if step is lstm_step else (t(BATCH, HIDDEN),)
    assert jg.autograd.gradcheck(lambda g, w, b, *s: step(g, s, w, b),
                                 (gates_x, w_hh, b_hh, *state))


def _sequence_inputs(gates, states, seed=4):
    rng = np.random.default_rng(seed)

    def t(*shape):
        return jg.tensor(rng.standard_normal(shape), requires_grad=True)

    return [t(STEPS, BATCH, gates * HIDDEN)] + [t(BATCH, HIDDEN) for _ in range(states)] + \
        [t(gates * HIDDEN, HIDDEN)]


FUSED_SEQUENCES = {
    "lstm": lambda reverse: (lambda *a: lstm_sequence(*a, reverse=reverse),
                             _sequence_inputs(4, 2)),
    "gru": lambda reverse: (lambda *a: gru_sequence(*a, reverse=reverse),
                            _sequence_inputs(3, 1) + [jg.tensor(np.linspace(-1, 1, HIDDEN),
                                                                requires_grad=True)]),
    "rnn_tanh": lambda reverse: (lambda *a: rnn_sequence(*a, reverse=reverse),
                                 _sequence_inputs(1, 1)),
    "rnn_relu": lambda reverse: (lambda *a: rnn_sequence(*a, reverse=reverse, relu=True),
                                 _sequence_inputs(1, 1)),
}


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("kind", sorted(FUSED_SEQUENCES))
def test_fused_sequences_pass_gradcheck(kind, reverse):
    # Note [Fused recurrent layers]: the backward through time against finite differences
    fn, inputs = FUSED_SEQUENCES[kind](reverse)
    assert jg.autograd.gradcheck(fn, tuple(inputs))


FUSED_LAYERS = {"lstm": lambda: nn.LSTM(IN, HIDDEN, num_layers=2, bidirectional=True),
                "lstm_uni": lambda: nn.LSTM(IN, HIDDEN, num_layers=2),
                "gru": lambda: nn.GRU(IN, HIDDEN, num_layers=2, bidirectional=True),
                "gru_no_bias": lambda: nn.GRU(IN, HIDDEN, bias=False),
                "rnn_tanh": lambda: nn.RNN(IN, HIDDEN, num_layers=2, bidirectional=True),
                "rnn_relu": lambda: nn.RNN(IN, HIDDEN, nonlinearity="relu", bidirectional=True)}


@pytest.mark.parametrize("dtype", [jg.float32, jg.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("kind", sorted(FUSED_LAYERS))
def test_fused_layers_equal_the_layers_of_step_ops(monkeypatch, kind, dtype):
    # padded input runs the fused op; the same layer as the per-step ops (which packed
    # input of decreasing batch sizes still runs) must agree: values, gradients of every
    # input and parameter, and second derivatives (create_graph through the fused backward)
    jg.manual_seed(5)
    module = FUSED_LAYERS[kind]().to(dtype)
    lstm = isinstance(module, nn.LSTM)
    states = module.num_layers * (2 if module.bidirectional else 1)
    x = jg.randn(STEPS + 2, BATCH, IN, dtype=dtype, requires_grad=True)
    hx = [jg.randn(states, BATCH, HIDDEN, dtype=dtype, requires_grad=True)
          for _ in range(2 if lstm else 1)]
    results = []
    for fused in (True, False):
        monkeypatch.setattr(type(module), "_fused", fused)
        out, final = module(x, tuple(hx) if lstm else hx[0])
        final = final if lstm else (final,)
        loss = out.sin().sum() + sum((f * (k + 2)).pow(2).sum() for k, f in enumerate(final))
        leaves = [x, *hx, *module.parameters()]
        grads = jg.autograd.grad(loss, leaves, create_graph=True)
        second = jg.autograd.grad(sum((g * g).sum() for g in grads), [x, *hx])
        results.append([out, *final, *grads, *second])
    tolerance = {jg.float32: 3e-5, jg.float64: 1e-12}[dtype]
    for fused, steps in zip(*results, strict=True):
        np.testing.assert_allclose(fused.detach().numpy(), steps.detach().numpy(),
                                   rtol=tolerance, atol=tolerance)


COMPILED = [Config("rnn_relu"), Config("lstm", 1, True), Config("gru", 1, False, True, True)]


@pytest.mark.parametrize("backend", ["eager", "numba"])
@pytest.mark.parametrize("cfg", COMPILED, ids=str)
def test_compiled_values_and_gradients_equal_eager(cfg, backend):
    module = cfg.make(jg.float32)
    x, h0 = inputs(cfg, np.float32)
    rng = np.random.default_rng(3)
    y_ref, hn_ref = np_rnn(cfg, numpy_params(module), x.astype(np.float64), h0)
    weights = [jg.tensor(rng.standard_normal(a.shape).astype(np.float32))
               for a in [y_ref, *hn_ref]]

    def run(x, hx):
        y, hn = module(x, hx)
        y = y.transpose(0, 1) if cfg.batch_first else y
        return weighted_loss(y, final_states(cfg, hn), weights)

    results = []
    for fn in (run, jg.compile(run, backend=backend)):
        module.zero_grad()
        xj, hj = as_module_args(cfg, x, h0, requires_grad=True)
        loss = fn(xj, hj)
        loss.backward()
        results.append([loss, xj.grad, *[p.grad for p in module.parameters()]])
    for eager, compiled in zip(*results, strict=True):
        assert compiled.dtype == eager.dtype == jg.float32
        np.testing.assert_allclose(compiled.detach().numpy(), eager.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    report = jg.explain(run)(*as_module_args(cfg, x, h0))
    assert report.graph_count == 1 and report.graph_break_count == 0


class TinyLM(nn.Module):
    def __init__(self, vocab=7, embed=4, hidden=HIDDEN):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens, targets):
        output, _ = self.lstm(self.embedding(tokens))
        logits = self.head(output)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def test_embedding_lstm_linear_cross_entropy_compiles_to_one_graph():
    jg.manual_seed(0)
    model = TinyLM()
    rng = np.random.default_rng(4)
    tokens, targets = (jg.tensor(rng.integers(0, 7, (BATCH, 5))) for _ in range(2))
    report = jg.explain(model)(tokens, targets)
    assert report.graph_count == 1 and report.graph_break_count == 0
    compiled = jg.compile(model, backend="eager")
    np.testing.assert_allclose(compiled(tokens, targets).item(), model(tokens, targets).item(),
                               rtol=1e-6)


EXPECTED_KEYS = {  # printed by torch 2.13: {k: tuple(v.shape) for k in state_dict()}
    "lstm_2layer_bidir": [
        ("weight_ih_l0", (16, 3)), ("weight_hh_l0", (16, 4)), ("bias_ih_l0", (16,)),
        ("bias_hh_l0", (16,)), ("weight_ih_l0_reverse", (16, 3)),
        ("weight_hh_l0_reverse", (16, 4)), ("bias_ih_l0_reverse", (16,)),
        ("bias_hh_l0_reverse", (16,)), ("weight_ih_l1", (16, 8)), ("weight_hh_l1", (16, 4)),
        ("bias_ih_l1", (16,)), ("bias_hh_l1", (16,)), ("weight_ih_l1_reverse", (16, 8)),
        ("weight_hh_l1_reverse", (16, 4)), ("bias_ih_l1_reverse", (16,)),
        ("bias_hh_l1_reverse", (16,))],
    "gru_2layer_bidir_nobias": [
        ("weight_ih_l0", (12, 3)), ("weight_hh_l0", (12, 4)), ("weight_ih_l0_reverse", (12, 3)),
        ("weight_hh_l0_reverse", (12, 4)), ("weight_ih_l1", (12, 8)), ("weight_hh_l1", (12, 4)),
        ("weight_ih_l1_reverse", (12, 8)), ("weight_hh_l1_reverse", (12, 4))],
    "rnn_relu_batch_first": [("weight_ih_l0", (4, 3)), ("weight_hh_l0", (4, 4)),
                             ("bias_ih_l0", (4,)), ("bias_hh_l0", (4,))],
}
FIXTURE_MODULES = {
    "rnn_tanh_2layer_bidir": lambda: nn.RNN(3, 4, num_layers=2, bidirectional=True),
    "rnn_relu_batch_first": lambda: nn.RNN(3, 4, nonlinearity="relu", batch_first=True),
    "lstm_2layer_bidir": lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True),
    "gru_2layer_bidir_nobias": lambda: nn.GRU(3, 4, num_layers=2, bidirectional=True,
                                              bias=False),
}


@pytest.mark.parametrize("case", sorted(EXPECTED_KEYS))
def test_state_dict_names_and_shapes_are_pytorchs(case):
    state = FIXTURE_MODULES[case]().state_dict()
    assert [(k, tuple(v.shape)) for k, v in state.items()] == EXPECTED_KEYS[case]


@pytest.mark.parametrize("case", sorted(FIXTURE_MODULES))
def test_pytorch_state_dict_loads_and_gives_pytorchs_outputs(case):
    arrays = np.load(FIXTURES)
    module = FIXTURE_MODULES[case]().double()
    fields = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith(case + "/")}
    module.load_state_dict({k: jg.tensor(v) for k, v in fields.items() if "_l" in k})
    h0 = [jg.tensor(fields[f"h0{k}"]) for k in range(2) if f"h0{k}" in fields]
    y, hn = module(jg.tensor(fields["x"]), tuple(h0) if len(h0) == 2 else h0[0])
    np.testing.assert_allclose(y.detach().numpy(), fields["y"], rtol=1e-12, atol=1e-14)
    for k, h in enumerate(hn if len(h0) == 2 else (hn,)):
        np.testing.assert_allclose(h.detach().numpy(), fields[f"hn{k}"], rtol=1e-12, atol=1e-14)


def test_init_is_uniform_within_one_over_sqrt_hidden():
    module = nn.LSTM(5, 16, num_layers=2)
    values = np.concatenate([p.detach().numpy().ravel() for p in module.parameters()])
    bound = 1 / np.sqrt(16)
    assert values.dtype == np.float32 and np.abs(values).max() <= bound
    assert np.abs(values).max() > 0.95 * bound and abs(values.mean()) < 0.02


@pytest.mark.parametrize("cfg", [Config("lstm", 2, True), Config("gru", 1, True),
                                 Config("rnn_tanh", 2)], ids=str)
def test_packed_sequence_matches_each_sequence_run_alone(cfg):
    module = cfg.make()
    rng = np.random.default_rng(5)
    lengths = [2, 4, 1, 3]
    seqs = [jg.tensor(rng.standard_normal((n, IN)), requires_grad=True) for n in lengths]
    layers = cfg.num_layers * (2 if cfg.bidirectional else 1)
    h0 = [jg.tensor(rng.standard_normal((layers, len(lengths), HIDDEN)))
          for _ in range(cfg.states)]
    packed = rnn_utils.pack_sequence(seqs, enforce_sorted=False)
    out, hn = module(packed, tuple(h0) if cfg.states == 2 else h0[0])
    assert isinstance(out, rnn_utils.PackedSequence)
    padded, out_lengths = rnn_utils.pad_packed_sequence(out, batch_first=True)
    assert out_lengths.tolist() == lengths and out_lengths.dtype == jg.int64
    padded.sum().backward()
    for b, seq in enumerate(seqs):
        grad_packed = seq.grad.numpy().copy()
        seq.grad = None
        alone = [h[:, b] for h in h0]
        y, hb = module(seq, tuple(alone) if cfg.states == 2 else alone[0])
        y.sum().backward()
        np.testing.assert_allclose(padded[b, :lengths[b]].detach().numpy(), y.detach().numpy(),
                                   rtol=1e-12, atol=1e-14)
        assert not padded[b, lengths[b]:].detach().numpy().any()
        for got, want in zip(final_states(cfg, hn), final_states(cfg, hb), strict=True):
            np.testing.assert_allclose(got[:, b].detach().numpy(), want.detach().numpy(),
                                       rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(grad_packed, seq.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_packed_sequence_under_compile_equals_eager():
    module = Config("gru").make()
    x = jg.tensor(np.random.default_rng(6).standard_normal((4, 3, IN)))

    def run(x):
        packed = rnn_utils.pack_padded_sequence(x, [4, 2, 3], enforce_sorted=False)
        out, h = module(packed)
        return rnn_utils.pad_packed_sequence(out, total_length=5)[0], h

    for eager, compiled in zip(run(x), jg.compile(run, backend="eager")(x), strict=True):
        np.testing.assert_allclose(compiled.detach().numpy(), eager.detach().numpy(),
                                   rtol=1e-12)
    # batch sizes are data (Tensor.tolist()) and the packing helpers are not traced:
    # packing, the packed forward and unpacking each end a graph and run between graphs
    assert jg.explain(run)(x).graph_break_count == 3


def test_pack_padded_sequence_layout_and_errors():
    x = jg.arange(12.0).reshape(3, 4, 1)  # (T, B, 1)
    packed = rnn_utils.pack_padded_sequence(x, jg.tensor([3, 3, 2, 1]))
    assert packed.batch_sizes.tolist() == [4, 3, 2] and packed.batch_sizes.dtype == jg.int64
    assert packed.data.reshape(-1).tolist() == [0, 1, 2, 3, 4, 5, 6, 8, 9]
    assert packed.sorted_indices is None and packed.unsorted_indices is None
    unsorted = rnn_utils.pack_padded_sequence(x.transpose(0, 1), [1, 3, 2, 3], batch_first=True,
                                              enforce_sorted=False)
    assert unsorted.sorted_indices.tolist() == [1, 3, 2, 0]
    assert unsorted.unsorted_indices.tolist() == [3, 0, 2, 1]
    padded, lengths = rnn_utils.pad_packed_sequence(unsorted, padding_value=-1.0, total_length=4)
    assert lengths.tolist() == [1, 3, 2, 3]
    assert padded[:, :, 0].tolist() == [[0, 1, 2, 3], [-1, 5, 6, 7], [-1, 9, -1, 11],
                                        [-1, -1, -1, -1]]
    with pytest.raises(RuntimeError, match="enforce_sorted"):
        rnn_utils.pack_padded_sequence(x, [1, 3, 2, 3])
    with pytest.raises(RuntimeError, match="greater than 0"):
        rnn_utils.pack_padded_sequence(x, [3, 2, 1, 0])
    with pytest.raises(ValueError, match="total_length"):
        rnn_utils.pad_packed_sequence(packed, total_length=2)


def test_pad_sequence_sides_values_and_layouts():
    a, b = jg.tensor([[1.0], [2.0], [3.0]]), jg.tensor([[4.0]])
    assert rnn_utils.pad_sequence([a, b])[:, :, 0].tolist() == [[1, 4], [2, 0], [3, 0]]
    right = rnn_utils.pad_sequence([a, b], batch_first=True, padding_value=9.0)
    assert right[:, :, 0].tolist() == [[1, 2, 3], [4, 9, 9]]
    left = rnn_utils.pad_sequence([a, b], batch_first=True, padding_side="left")
    assert left[:, :, 0].tolist() == [[1, 2, 3], [0, 0, 4]]
    with pytest.raises(ValueError, match="padding_side"):
        rnn_utils.pad_sequence([a, b], padding_side="middle")


@pytest.mark.parametrize("cell_cls,mode", [(nn.RNNCell, "rnn_tanh"), (nn.LSTMCell, "lstm"),
                                           (nn.GRUCell, "gru")], ids=lambda v: str(v))
def test_cells_match_numpy_batched_unbatched_and_default_state(cell_cls, mode):
    jg.manual_seed(0)
    cell = cell_cls(IN, HIDDEN, dtype=jg.float64)
    assert [k for k in cell.state_dict()] == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    p = numpy_params(cell)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((BATCH, IN))
    state = [rng.standard_normal((BATCH, HIDDEN)) for _ in range(2 if mode == "lstm" else 1)]
    want = np_step(mode, x, state, p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
    hx = [jg.tensor(s) for s in state]
    got = cell(jg.tensor(x), tuple(hx) if mode == "lstm" else hx[0])
    one = cell(jg.tensor(x[0]), tuple(h[0] for h in hx) if mode == "lstm" else hx[0][0])
    zero = cell(jg.tensor(x))
    want_zero = np_step(mode, x, [np.zeros_like(s) for s in state], p["weight_ih"],
                        p["weight_hh"], p["bias_ih"], p["bias_hh"])
    for g, o, z, w, wz in zip(*(r if mode == "lstm" else (r,) for r in (got, one, zero)),
                              want, want_zero, strict=True):
        np.testing.assert_allclose(g.detach().numpy(), w, rtol=1e-12)
        np.testing.assert_allclose(o.detach().numpy(), w[0], rtol=1e-12)
        np.testing.assert_allclose(z.detach().numpy(), wz, rtol=1e-12)


@pytest.mark.parametrize("cfg", [Config("lstm", 2, True), Config("gru")], ids=str)
def test_unbatched_input_equals_a_batch_of_one(cfg):
    module = cfg.make()
    x, h0 = inputs(cfg)
    y, hn = module(jg.tensor(x[:, 0]), tuple(jg.tensor(h[:, 0]) for h in h0)
                   if cfg.states == 2 else jg.tensor(h0[0][:, 0]))
    y_ref, hn_ref = np_rnn(cfg, numpy_params(module), x[:, :1], [h[:, :1] for h in h0])
    np.testing.assert_allclose(y.detach().numpy(), y_ref[:, 0], rtol=1e-12)
    for got, want in zip(final_states(cfg, hn), hn_ref, strict=True):
        np.testing.assert_allclose(got.detach().numpy(), want[:, 0], rtol=1e-12)


def test_dropout_applies_between_layers_in_training_only():
    cfg = Config("lstm", 2)
    module = cfg.make(dropout=1.0)
    x, h0 = inputs(cfg)
    params = numpy_params(module)
    zeros = [np.zeros_like(h) for h in h0]
    y, (h, c) = module(jg.tensor(x))  # p = 1 zeroes layer 0's output on its way to layer 1
    layer1 = {k.replace("_l1", "_l0"): v for k, v in params.items() if "_l1" in k}
    y_ref, hn_ref = np_rnn(Config("lstm"), layer1, np.zeros((STEPS, BATCH, HIDDEN)),
                           [z[1:] for z in zeros])
    np.testing.assert_allclose(y.detach().numpy(), y_ref, rtol=1e-12)
    np.testing.assert_allclose(h[1].detach().numpy(), hn_ref[0][0], rtol=1e-12)
    module.eval()
    y, _ = module(jg.tensor(x))
    np.testing.assert_allclose(y.detach().numpy(), np_rnn(cfg, params, x, zeros)[0], rtol=1e-12)


def test_dropout_between_layers_compiles_into_the_one_graph():
    module = Config("lstm", 2).make(jg.float32, dropout=0.5)
    x = jg.tensor(inputs(Config("lstm", 2), np.float32)[0])

    def run(x):
        return module(x)[0]

    report = jg.explain(run)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
    jg.manual_seed(3)
    eager = run(x)
    jg.manual_seed(3)
    np.testing.assert_allclose(jg.compile(run, backend="eager")(x).detach().numpy(),
                               eager.detach().numpy(), rtol=1e-6)


def test_refusals_and_user_errors_name_the_problem():
    with pytest.raises(NotImplementedError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="dropout"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.5)
    lstm = nn.LSTM(3, 4)
    with pytest.raises(RuntimeError, match="Expected 3, got 5"):
        lstm(jg.zeros(2, 1, 5))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(1, 2, 4\)"):
        lstm(jg.zeros(6, 2, 3), (jg.zeros(1, 2, 4), jg.zeros(1, 3, 4)))
    with pytest.raises(ValueError, match="2D or 3D"):
        lstm(jg.zeros(1, 6, 2, 3))
    with pytest.raises(RuntimeError, match="hx should also be 2-D"):
        nn.GRU(3, 4)(jg.zeros(6, 3), jg.zeros(1, 1, 4))


def test_flatten_parameters_and_all_weights_follow_pytorch():
    gru = nn.GRU(3, 4, num_layers=2, bias=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gru.flatten_parameters()
    assert [[tuple(w.shape) for w in group] for group in gru.all_weights] == \
        [[(12, 3), (12, 4)], [(12, 4), (12, 4)]]
    assert repr(gru) == "GRU(3, 4, num_layers=2, bias=False)"


def test_reprs_are_torchs():
    # torch's RNN repr leaves out the nonlinearity; its RNNCell's shows it
    assert repr(nn.RNN(3, 4, nonlinearity="relu")) == "RNN(3, 4)"
    assert repr(nn.RNNCell(3, 4, nonlinearity="relu")) == "RNNCell(3, 4, nonlinearity=relu)"
    assert repr(nn.RNNCell(3, 4, bias=False)) == "RNNCell(3, 4, bias=False)"
    assert repr(nn.GRUCell(3, 4, bias=False)) == "GRUCell(3, 4, bias=False)"
    assert repr(nn.LSTMCell(3, 4)) == "LSTMCell(3, 4)"


@pytest.mark.parametrize("cls", [nn.GRU, nn.RNN], ids=lambda c: c.__name__)
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, False), (1, True)])
def test_gru_and_rnn_outputs_may_be_edited_in_place_before_backward(cls, layers, bidirectional):
    """torch's GRU and RNN do not save their output: `out += 1` then backward works and
    leaves the gradients of out.sum() unchanged (the fused op's saved output is not the
    user's tensor)."""
    grads = []
    for edit in (False, True):
        jg.manual_seed(0)
        module = cls(3, 4, num_layers=layers, bidirectional=bidirectional)
        x = jg.tensor(np.random.RandomState(1).randn(5, 2, 3).astype(np.float32),
                      requires_grad=True)
        out, h = module(x)
        if edit:
            out += 1.0
            h.mul_(2.0)
        out.sum().backward()
        grads.append([x.grad.numpy()] + [p.grad.numpy() for p in module.parameters()])
    for plain, edited in zip(*grads, strict=True):
        np.testing.assert_allclose(edited, plain, rtol=1e-6)


def test_lstm_output_edited_in_place_fails_backward_as_torchs_in_float32_only():
    """torch's float32 CPU LSTM saves its output (one direction), so backward after an
    in-place edit raises; its float64 LSTM does not. The final states are copies."""
    lstm = nn.LSTM(3, 4)
    out, (h, c) = lstm(jg.ones(5, 2, 3))
    h.add_(1.0)
    c.add_(1.0)
    (out.sum() + c.sum()).backward()
    out, _ = lstm(jg.ones(5, 2, 3))
    out.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    lstm = nn.LSTM(3, 4).double()
    x = jg.tensor(np.random.default_rng(7).standard_normal((5, 2, 3)), requires_grad=True)
    lstm(x)[0].sum().backward()
    plain = x.grad.numpy().copy()
    x.grad = None
    out, _ = lstm(x)
    out.add_(1.0)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), plain, rtol=1e-12)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN], ids=lambda c: c.__name__)
def test_input_dtype_and_empty_sequence_errors_are_torchs(cls):
    module = cls(3, 4)
    for x in (jg.zeros(5, 2, 3, dtype=jg.float64), jg.zeros(5, 2, 3, dtype=jg.int64)):
        with pytest.raises(ValueError, match=r"RNN input dtype \(jitgrad\.\w+\) does not "
                                             r"match weight dtype \(jitgrad\.float32\)"):
            module(x)
    with pytest.raises(ValueError, match="does not match weight dtype"):
        module(rnn_utils.pack_sequence([jg.zeros(2, 3, dtype=jg.float64)]))
    for x in (jg.zeros(0, 2, 3), jg.zeros(0, 3)):
        with pytest.raises(RuntimeError, match="sequence length to be larger than 0"):
            module(x)
    with pytest.raises(RuntimeError, match="sequence length to be larger than 0"):
        cls(3, 4, batch_first=True)(jg.zeros(2, 0, 3))
    with pytest.raises(RuntimeError, match="sequence length to be larger than 0"):
        jg.compile(module, backend="eager")(jg.zeros(0, 2, 3))


def test_lstm_state_errors_are_torchs():
    lstm = nn.LSTM(3, 4)
    with pytest.raises(RuntimeError, match=r"hx and cx should also be 3-D but got "
                                           r"\(2-D, 3-D\) tensors"):
        lstm(jg.zeros(5, 2, 3), (jg.zeros(2, 4), jg.zeros(1, 2, 4)))
    with pytest.raises(RuntimeError, match=r"unbatched 2-D input, hx and cx should also be "
                                           r"2-D but got \(3-D, 2-D\)"):
        lstm(jg.zeros(5, 3), (jg.zeros(1, 1, 4), jg.zeros(1, 4)))
    with pytest.raises(IndexError):  # torch reads hx[0], hx[1] of a lone tensor too
        lstm(jg.zeros(5, 2, 3), jg.zeros(1, 2, 4))
    out, (h, c) = nn.LSTM(3, 4, num_layers=2)(jg.zeros(5, 2, 3), [jg.ones(2, 2, 4)] * 2)
    assert tuple(out.shape) == (5, 2, 4) and tuple(c.shape) == (2, 2, 4)


@pytest.mark.parametrize("cell_cls", [nn.RNNCell, nn.LSTMCell, nn.GRUCell],
                         ids=lambda c: c.__name__)
def test_cell_loop_without_a_state_compiles_to_one_graph(cell_cls):
    """A cell called without a state inside a compiled loop (the decoder pattern) traces
    into one graph and gives eager's values and gradients."""
    cell = cell_cls(3, 4)
    x = jg.tensor(np.random.default_rng(5).standard_normal((3, 2, 3)).astype(np.float32))

    def run(x):
        total, state = 0.0, None
        for t in range(x.shape[0]):
            state = cell(x[t], state)
            total = total + (state[0] if isinstance(state, tuple) else state).pow(2).sum()
        return total

    report = jg.explain(run)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
    results = []
    for fn in (run, jg.compile(run, backend="eager")):
        cell.zero_grad()
        loss = fn(x)
        loss.backward()
        results.append([loss, *[p.grad for p in cell.parameters()]])
    for eager, compiled in zip(*results, strict=True):
        np.testing.assert_allclose(compiled.detach().numpy(), eager.detach().numpy(), rtol=1e-6)


def test_packed_sequence_to_cpu_and_dtype_conversions_follow_torch():
    """`packed.to(device)` as tutorials write it: self when nothing changes; a dtype change
    converts data only (batch_sizes and the indices keep int64)."""
    x = jg.tensor(np.random.default_rng(6).standard_normal((3, 5, 2)).astype(np.float32))
    packed = rnn_utils.pack_padded_sequence(x, [2, 5, 3], batch_first=True,
                                            enforce_sorted=False)
    assert packed.to("cpu") is packed and packed.cpu() is packed
    assert packed.to(jg.float32) is packed and packed.float() is packed
    assert not packed.is_cuda
    wide = packed.double()
    assert isinstance(wide, rnn_utils.PackedSequence) and wide.data.dtype == jg.float64
    np.testing.assert_array_equal(wide.data.numpy(), packed.data.numpy().astype(np.float64))
    assert wide.batch_sizes is packed.batch_sizes
    assert wide.sorted_indices.tolist() == [1, 2, 0] and wide.unsorted_indices.dtype == jg.int64
    assert packed.long().data.dtype == jg.int64
    with pytest.raises(RuntimeError, match="CPU only"):
        packed.cuda()
    gru = nn.GRU(2, 3, batch_first=True).double()
    out, h = gru(wide)
    ref, _ = gru(x.double()[1:2])
    np.testing.assert_allclose(h[0, 1].detach().numpy(), ref[0, -1].detach().numpy(),
                               rtol=1e-12)
    assert out.data.dtype == jg.float64


@pytest.mark.parametrize("cell_cls", [nn.RNNCell, nn.LSTMCell, nn.GRUCell],
                         ids=lambda c: c.__name__)
def test_cell_state_shape_errors_are_torchs(cell_cls):
    """A state of the wrong batch or hidden size raises as torch's cells do, where it used
    to broadcast (a 1-D state beside a batch gave a silently wrong (B, H) result)."""
    cell = cell_cls(3, 4)

    def state(*shape):
        return (jg.zeros(*shape), jg.zeros(*shape)) if cell_cls is nn.LSTMCell else \
            jg.zeros(*shape)

    with pytest.raises(RuntimeError, match="Input batch size 2 doesn't match hidden0 batch "
                                           "size 4"):
        cell(jg.zeros(2, 3), state(4))
    with pytest.raises(RuntimeError, match="Input batch size 3 doesn't match hidden0 batch "
                                           "size 2"):
        cell(jg.zeros(3, 3), state(2, 4))
    with pytest.raises(RuntimeError, match="hidden0 has inconsistent hidden_size: got 1, "
                                           "expected 4"):
        cell(jg.zeros(3), state(1, 4))
    with pytest.raises(RuntimeError, match="hidden0 has inconsistent hidden_size: got 5"):
        cell(jg.zeros(2, 3), state(2, 5))
    with pytest.raises(RuntimeError, match="inconsistent input_size: got 5 expected 3"):
        cell(jg.zeros(2, 5))
    with pytest.raises(ValueError, match="Expected h.* to be 1D or 2D, got 3D"):
        cell(jg.zeros(2, 3), state(1, 2, 4))
    out = cell(jg.zeros(3), state(4))
    assert [tuple(s.shape) for s in (out if isinstance(out, tuple) else (out,))] == \
        [(4,)] * (2 if cell_cls is nn.LSTMCell else 1)


def test_lstm_cell_hx_must_be_a_pair_of_tensors():
    with pytest.raises(TypeError, match="must be tuple of Tensors, not Tensor"):
        nn.LSTMCell(3, 4)(jg.zeros(2, 3), jg.zeros(2, 4))
    with pytest.raises(RuntimeError, match=r"hidden1 has inconsistent hidden_size: got 5"):
        nn.LSTMCell(3, 4)(jg.zeros(2, 3), [jg.zeros(2, 4), jg.zeros(2, 5)])


def test_unpack_and_unpad_sequence_return_the_callers_sequences():
    rng = np.random.default_rng(8)
    arrays = [rng.standard_normal((n, 2)).astype(np.float32) for n in (2, 4, 3)]
    seqs = [jg.tensor(a, requires_grad=True) for a in arrays]
    back = rnn_utils.unpack_sequence(rnn_utils.pack_sequence(seqs, enforce_sorted=False))
    assert [tuple(t.shape) for t in back] == [(2, 2), (4, 2), (3, 2)]
    for got, want in zip(back, arrays, strict=True):
        np.testing.assert_array_equal(got.detach().numpy(), want)
    sum([(t * (k + 1)).sum() for k, t in enumerate(back)]).backward()
    for k, seq in enumerate(seqs):
        np.testing.assert_array_equal(seq.grad.numpy(), np.full(arrays[k].shape, k + 1.0))
    for batch_first in (False, True):
        padded = rnn_utils.pad_sequence(seqs, batch_first=batch_first, padding_value=9.0)
        shape = tuple(padded.shape)
        for lengths in ([2, 4, 3], jg.tensor([2, 4, 3])):
            out = rnn_utils.unpad_sequence(padded, lengths, batch_first=batch_first)
            for got, want in zip(out, arrays, strict=True):
                np.testing.assert_array_equal(got.detach().numpy(), want)
        assert tuple(padded.shape) == shape
