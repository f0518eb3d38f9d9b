"""Whole recurrent layer directions as one op each (`lstm_sequence`, `gru_sequence`,
`rnn_sequence`), as PyTorch's fused RNN ops.

Note [Fused recurrent layers]: written as ordinary ops, one LSTM step is a matmul, an
add, a chunk, three sigmoids, two tanhs, three multiplies and an add; a layer over 35
steps is some 400 ops forward and as many backward, and in eager mode the per-op cost
(dispatch, a graph node, saved values) is most of the time (measured: a 35-step LSTM
language-model step 140 ms against torch's 32.5 ms). `lstm_sequence` runs the time loop
in numpy inside one op: forward, the matmul with the hidden weights and the gate math of
every step; backward, the same loop reversed (backpropagation through time) with one
matmul for the weight gradient at the end.

Its one output packs everything the backward reads, (6, T, B, H): the hidden states h,
the cell states c and the four gate activations i, f, g, o of every step, so the backward
is a pure function of the saved inputs and that output (the registry's contract), and
`out[0]`, the layer's output, is a contiguous (T, B, H) tensor as PyTorch's. The backward
formula is written against `xp` like every other, so `create_graph=True` (double
backward) and the compiler's joint graphs get it too. The hidden bias is added to the
input projection before the op (`W_ih x + b_ih + b_hh`, rounded in that order where
PyTorch adds `W_hh h + b_hh` first: a rounding difference only).

Equations (PyTorch's gate order i, f, g, o; Hochreiter & Schmidhuber 1997):
a = gates_x[t] + h W_hh^T; i, f, o = sigmoid(a_i, a_f, a_o); g = tanh(a_g);
c' = f c + i g; h' = o tanh(c'). `reverse` runs t from T-1 down to 0.

The GRU (Cho et al. 2014, PyTorch's form: r scales the hidden term with its bias) and the
Elman RNN (tanh or relu) are the same construction: `gru_sequence` packs h, r, z, n and
the hidden term W_hn h + b_hn (5, T, B, H) and takes b_hn as an input (the r and z
biases are added to the input projection); `rnn_sequence` packs h alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager.ops.activation import sigmoid_forward
from jitgrad.eager.ops.registry import TensorMeta, apply_op, register
from jitgrad.eager.tensor import Tensor

_GATES = 4  # i, f, g, o
_PLANES = 2 + _GATES  # the packed output: h, c, then the gate activations


def _steps(count: int, reverse: bool) -> range:
    """The time steps in the order the forward runs them."""
    return range(count - 1, -1, -1) if reverse else range(count)


def _previous(order: list[int]) -> dict[int, int | None]:
    """For each step, the step that ran before it (None for the first)."""
    return {t: (None if n == 0 else order[n - 1]) for n, t in enumerate(order)}


def _stacked(xp: Any, pieces: list[Any], shape: tuple[int, int]) -> Any:
    """The (batch, width) `pieces` of every step as one (steps * batch, width) matrix."""
    rows = xp.cat([xp.reshape(p, (1, *shape)) for p in pieces], 0)
    return xp.reshape(rows, (len(pieces) * shape[0], shape[1]))


def _weight_grad(xp: Any, rows: list[Any], states: list[Any], shape: tuple[int, int],
                 hidden: int) -> Any:
    """sum over steps of rows_t^T states_t (rows (batch, width), states (batch, hidden)), as
    one matmul over the stacked steps: the hidden weights' gradient."""
    return xp.matmul(xp.swapaxes(_stacked(xp, rows, shape), 0, 1),
                     _stacked(xp, states, (shape[0], hidden)))


def _lstm_sequence_forward(gates_x: np.ndarray, h0: np.ndarray, c0: np.ndarray,
                           w_hh: np.ndarray, reverse: bool) -> np.ndarray:
    steps, batch, width = gates_x.shape
    hidden = width // _GATES
    out = np.empty((_PLANES, steps, batch, hidden), gates_x.dtype)
    h, c, w_t = h0, c0, w_hh.T
    for t in _steps(steps, reverse):
        a = gates_x[t] + h @ w_t
        s = sigmoid_forward(a)  # one call for the three sigmoid gates (g's part unused)
        i, f, o = s[:, :hidden], s[:, hidden:2 * hidden], s[:, 3 * hidden:]
        g = np.tanh(a[:, 2 * hidden:3 * hidden])
        c = f * c + i * g
        h = o * np.tanh(c)
        for k, value in enumerate((h, c, i, f, g, o)):
            out[k, t] = value
    return out


def _lstm_sequence_backward(xp: Any, ctx: Any, g: Any, h0: Any, c0: Any, w_hh: Any,
                            out: Any) -> tuple:
    """Backpropagation through time over the packed output (see the module Note).

    Per step, from the gradients gh, gc reaching h' and c' (the step's own output plus
    what the later step sends back): gc += gh o (1 - tanh(c')^2); the gate gradients
    (gc g, gc c, gc i, gh tanh(c')) times the activations' derivatives give ga, the
    gradient of the step's pre-activations (its part of gates_x); the earlier step gets
    ga W_hh and gc f. The weight gradient is sum_t ga_t^T h_{t-1}, one matmul.
    """
    steps, batch, width = ctx.input_metadata[0][0]
    reverse = ctx.params["reverse"]
    order = list(_steps(steps, reverse))

    def plane(k: int, t: int) -> Any:
        return xp.getitem(out, (k, t))

    def grad(k: int, t: int) -> Any:
        return xp.getitem(g, (k, t))

    earlier = _previous(order)

    def before(k: int, t: int, first: Any) -> Any:
        """Plane k of the step before t; `first` (the initial state) before the first step."""
        prev = earlier[t]
        return first if prev is None else plane(k, prev)

    pre_activations: dict[int, Any] = {}
    gh_next = gc_next = None
    for t in reversed(order):
        i, f, gate, o, c = plane(2, t), plane(3, t), plane(4, t), plane(5, t), plane(1, t)
        c_prev = before(1, t, c0)
        gh = grad(0, t) if gh_next is None else grad(0, t) + gh_next
        tanh_c = xp.tanh(c)
        gc = grad(1, t) + gh * o * (1 - tanh_c * tanh_c)
        gc = gc if gc_next is None else gc + gc_next
        ga = xp.cat([(grad(2, t) + gc * gate) * i * (1 - i),
                     (grad(3, t) + gc * c_prev) * f * (1 - f),
                     (grad(4, t) + gc * i) * (1 - gate * gate),
                     (grad(5, t) + gh * tanh_c) * o * (1 - o)], 1)
        pre_activations[t] = ga
        gh_next = xp.matmul(ga, w_hh)
        gc_next = gc * f
    grad_gates = xp.reshape(_stacked(xp, [pre_activations[t] for t in range(steps)],
                                     (batch, width)), (steps, batch, width))
    grad_w_hh = None
    if ctx.needs_input_grad[3]:
        grad_w_hh = _weight_grad(xp, [pre_activations[t] for t in range(steps)],
                                 [before(0, t, h0) for t in range(steps)], (batch, width),
                                 width // _GATES)
    return grad_gates, gh_next, gc_next, grad_w_hh


def _lstm_sequence_meta(gates_x: Any, h0: Any, c0: Any, w_hh: Any, reverse: bool) -> Any:
    steps, batch, width = gates_x.shape
    return TensorMeta((_PLANES, steps, batch, width // _GATES), gates_x.dtype)


LSTM_SEQUENCE = register(
    "lstm_sequence", _lstm_sequence_forward, _lstm_sequence_backward,
    saves=("h0", "c0", "w_hh", "out"), meta=_lstm_sequence_meta,
    source="backpropagation through time of the LSTM equations (Note [Fused recurrent layers])")


def lstm_sequence(gates_x: Tensor, h0: Tensor, c0: Tensor, w_hh: Tensor,
                  reverse: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """One LSTM layer direction over T steps of B rows: (outputs (T, B, H), final h, final c).

    gates_x: (T, B, 4H) = x W_ih^T + b_ih + b_hh for every step; h0, c0: (B, H);
    w_hh: (4H, H). All of one float dtype (the layer's parameters').
    """
    packed = apply_op(LSTM_SEQUENCE, (gates_x, h0, c0, w_hh),
                      (gates_x._data, h0._data, c0._data, w_hh._data), {"reverse": reverse})
    last = 0 if reverse else gates_x.shape[0] - 1
    return packed[0], packed[0, last], packed[1, last]


def _gru_sequence_forward(gates_x: np.ndarray, h0: np.ndarray, w_hh: np.ndarray,
                          b_hn: np.ndarray, reverse: bool) -> np.ndarray:
    steps, batch, width = gates_x.shape
    hidden = width // 3
    out = np.empty((5, steps, batch, hidden), gates_x.dtype)
    h, w_t = h0, w_hh.T
    for t in _steps(steps, reverse):
        a_h = h @ w_t
        s = sigmoid_forward(gates_x[t, :, :2 * hidden] + a_h[:, :2 * hidden])
        r, z = s[:, :hidden], s[:, hidden:]
        term = a_h[:, 2 * hidden:] + b_hn
        n = np.tanh(gates_x[t, :, 2 * hidden:] + r * term)
        h = (1 - z) * n + z * h
        for k, value in enumerate((h, r, z, n, term)):
            out[k, t] = value
    return out


def _gru_sequence_backward(xp: Any, ctx: Any, g: Any, h0: Any, w_hh: Any, out: Any) -> tuple:
    """Backpropagation through time of h' = (1 - z) n + z h (see the module Note): per step,
    gn = gh (1 - z), gz = gh (h - n), the pre-activation of n gets gn (1 - n^2), r gets
    that times the hidden term, the hidden term that times r; the earlier step gets the
    hidden pre-activations' gradient times W_hh plus gh z."""
    steps, batch, width = ctx.input_metadata[0][0]
    order = list(_steps(steps, ctx.params["reverse"]))
    earlier = _previous(order)

    def plane(k: int, t: int) -> Any:
        return xp.getitem(out, (k, t))

    def grad(k: int, t: int) -> Any:
        return xp.getitem(g, (k, t))

    def before(k: int, t: int, first: Any) -> Any:
        """Plane k of the step before t; `first` (the initial state) before the first step."""
        prev = earlier[t]
        return first if prev is None else plane(k, prev)

    inputs_part: dict[int, Any] = {}
    hidden_part: dict[int, Any] = {}
    gh_next = None
    for t in reversed(order):
        r, z, n, term = plane(1, t), plane(2, t), plane(3, t), plane(4, t)
        h_prev = before(0, t, h0)
        gh = grad(0, t) if gh_next is None else grad(0, t) + gh_next
        pre_n = (grad(3, t) + gh * (1 - z)) * (1 - n * n)
        pre_r = (grad(1, t) + pre_n * term) * r * (1 - r)
        pre_z = (grad(2, t) + gh * (h_prev - n)) * z * (1 - z)
        g_term = grad(4, t) + pre_n * r
        inputs_part[t] = xp.cat([pre_r, pre_z, pre_n], 1)
        hidden_part[t] = xp.cat([pre_r, pre_z, g_term], 1)
        gh_next = xp.matmul(hidden_part[t], w_hh) + gh * z
    grad_gates = xp.reshape(_stacked(xp, [inputs_part[t] for t in range(steps)],
                                     (batch, width)), (steps, batch, width))
    grad_w_hh = grad_b_hn = None
    if ctx.needs_input_grad[2]:
        grad_w_hh = _weight_grad(xp, [hidden_part[t] for t in range(steps)],
                                 [before(0, t, h0) for t in range(steps)], (batch, width),
                                 width // 3)
    if ctx.needs_input_grad[3]:
        hidden = width // 3
        grad_b_hn = xp.sum(xp.cat([xp.getitem(hidden_part[t], (slice(None), slice(
            2 * hidden, None))) for t in range(steps)], 0), (0,))
    return grad_gates, gh_next, grad_w_hh, grad_b_hn


def _gru_sequence_meta(gates_x: Any, h0: Any, w_hh: Any, b_hn: Any, reverse: bool) -> Any:
    steps, batch, width = gates_x.shape
    return TensorMeta((5, steps, batch, width // 3), gates_x.dtype)


GRU_SEQUENCE = register(
    "gru_sequence", _gru_sequence_forward, _gru_sequence_backward,
    saves=("h0", "w_hh", "out"), meta=_gru_sequence_meta,
    source="backpropagation through time of the GRU equations (Note [Fused recurrent layers])")


def gru_sequence(gates_x: Tensor, h0: Tensor, w_hh: Tensor, b_hn: Tensor,
                 reverse: bool = False) -> tuple[Tensor, Tensor]:
    """One GRU layer direction over T steps: (outputs (T, B, H), final h).

    gates_x: (T, B, 3H) = x W_ih^T + b_ih, plus b_hr and b_hz on the r and z chunks;
    h0: (B, H); w_hh: (3H, H); b_hn: (H,), the hidden bias of n (zeros without bias).
    """
    packed = apply_op(GRU_SEQUENCE, (gates_x, h0, w_hh, b_hn),
                      (gates_x._data, h0._data, w_hh._data, b_hn._data), {"reverse": reverse})
    return packed[0], packed[0, 0 if reverse else gates_x.shape[0] - 1]


def _rnn_sequence_forward(gates_x: np.ndarray, h0: np.ndarray, w_hh: np.ndarray,
                          reverse: bool, relu: bool) -> np.ndarray:
    steps, batch, hidden = gates_x.shape
    out = np.empty((1, steps, batch, hidden), gates_x.dtype)
    h, w_t = h0, w_hh.T
    for t in _steps(steps, reverse):
        a = gates_x[t] + h @ w_t
        h = np.maximum(a, 0) if relu else np.tanh(a)
        out[0, t] = h
    return out


def _rnn_sequence_backward(xp: Any, ctx: Any, g: Any, h0: Any, w_hh: Any, out: Any) -> tuple:
    """Backpropagation through time of h' = act(a): a's gradient is gh (1 - h'^2) for tanh,
    gh where h' > 0 for relu; the earlier step gets it times W_hh."""
    steps, batch, hidden = ctx.input_metadata[0][0]
    order = list(_steps(steps, ctx.params["reverse"]))
    earlier = _previous(order)
    pre: dict[int, Any] = {}
    gh_next = None
    for t in reversed(order):
        h = xp.getitem(out, (0, t))
        gh = xp.getitem(g, (0, t)) if gh_next is None else xp.getitem(g, (0, t)) + gh_next
        # relu: as its own backward, zero where h' <= 0 (a NaN h' passes gh)
        pre[t] = xp.where(h <= 0, 0.0, gh) if ctx.params["relu"] else gh * (1 - h * h)
        gh_next = xp.matmul(pre[t], w_hh)
    grad_gates = xp.reshape(_stacked(xp, [pre[t] for t in range(steps)], (batch, hidden)),
                            (steps, batch, hidden))
    grad_w_hh = None
    if ctx.needs_input_grad[2]:
        grad_w_hh = _weight_grad(xp, [pre[t] for t in range(steps)],
                                 [h0 if earlier[t] is None else xp.getitem(out, (0, earlier[t]))
                                  for t in range(steps)], (batch, hidden), hidden)
    return grad_gates, gh_next, grad_w_hh


def _rnn_sequence_meta(gates_x: Any, h0: Any, w_hh: Any, reverse: bool, relu: bool) -> Any:
    return TensorMeta((1, *gates_x.shape), gates_x.dtype)


RNN_SEQUENCE = register(
    "rnn_sequence", _rnn_sequence_forward, _rnn_sequence_backward,
    saves=("h0", "w_hh", "out"), meta=_rnn_sequence_meta,
    source="backpropagation through time of the Elman RNN (Note [Fused recurrent layers])")


def rnn_sequence(gates_x: Tensor, h0: Tensor, w_hh: Tensor, reverse: bool = False,
                 relu: bool = False) -> tuple[Tensor, Tensor]:
    """One Elman RNN layer direction over T steps: (outputs (T, B, H), final h).

    gates_x: (T, B, H) = x W_ih^T + b_ih + b_hh; h0: (B, H); w_hh: (H, H); relu: the
    nonlinearity is relu (else tanh).
    """
    packed = apply_op(RNN_SEQUENCE, (gates_x, h0, w_hh),
                      (gates_x._data, h0._data, w_hh._data), {"reverse": reverse, "relu": relu})
    return packed[0], packed[0, 0 if reverse else gates_x.shape[0] - 1]
