"""One time step of each recurrent cell, and the loops over a layer's time steps
(jitgrad/nn/modules/rnn.py builds the layers and cells on them).

Equations, gates stacked in PyTorch's order (Hochreiter & Schmidhuber 1997;
Cho et al. 2014, with PyTorch's placement of r inside the hidden term):
RNN  h' = act(W_ih x + b_ih + W_hh h + b_hh), act tanh or relu.
LSTM i, f, g, o = chunks of W_ih x + b_ih + W_hh h + b_hh;
     c' = sigmoid(f) * c + sigmoid(i) * tanh(g), h' = sigmoid(o) * tanh(c').
GRU  r, z from sigmoid of the sum of the first two chunks of both projections;
     n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from jitgrad.eager.ops.activation import sigmoid
from jitgrad.eager.ops.joining import cat
from jitgrad.eager.ops.pointwise import relu, tanh
from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn import init
from jitgrad.nn.modules.module import Module

State = tuple[Tensor, ...]  # (h,) for RNN and GRU, (h, c) for LSTM; each (batch, hidden)
Step = Callable[[Tensor, State, Tensor, Tensor | None], State]


def rnn_tanh_step(gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
    """h' = tanh(gates_x + h @ w_hh.T + b_hh); gates_x = x @ w_ih.T + b_ih, (batch, H)."""
    return (tanh(gates_x + F.linear(state[0], w_hh, b_hh)),)


def rnn_relu_step(gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
    """h' = relu(gates_x + h @ w_hh.T + b_hh); gates_x = x @ w_ih.T + b_ih, (batch, H)."""
    return (relu(gates_x + F.linear(state[0], w_hh, b_hh)),)


def lstm_step(gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
    """(h', c') of one LSTM step; gates_x = x @ w_ih.T + b_ih, (batch, 4H), chunks i, f, g, o."""
    h, c = state
    i, f, g, o = (gates_x + F.linear(h, w_hh, b_hh)).chunk(4, 1)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    return sigmoid(o) * tanh(c), c


def gru_step(gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
    """h' of one GRU step; gates_x = x @ w_ih.T + b_ih, (batch, 3H), chunks r, z, n."""
    h = state[0]
    r_x, z_x, n_x = gates_x.chunk(3, 1)
    r_h, z_h, n_h = F.linear(h, w_hh, b_hh).chunk(3, 1)
    r = sigmoid(r_x + r_h)
    z = sigmoid(z_x + z_h)
    n = tanh(n_x + r * n_h)
    return ((1 - z) * n + z * h,)


def _slice_state(state: State, start: int, stop: int) -> State:
    return tuple([s[start:stop] for s in state])


def run_forward(step: Step, gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None,
                batch_sizes: list[int]) -> tuple[Tensor, State]:
    """One direction forward in time over packed data: (outputs (N, H), final state).

    gates_x: (N, G*H), N = sum(batch_sizes); state: the initial (B, H) tensors,
    B = batch_sizes[0]. A sequence's final state is taken at its last step.
    """
    outputs, finished, offset = [], [], 0
    for size in batch_sizes:
        if size < state[0].shape[0]:
            finished.append(_slice_state(state, size, state[0].shape[0]))
            state = _slice_state(state, 0, size)
        state = step(gates_x[offset:offset + size], state, w_hh, b_hh)
        offset += size
        outputs.append(state[0])
    if finished:
        finished.append(state)
        state = tuple([cat([part[k] for part in finished[::-1]], 0) for k in range(len(state))])
    return cat(outputs, 0), state


def run_reverse(step: Step, gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None,
                batch_sizes: list[int]) -> tuple[Tensor, State]:
    """One direction backward in time over packed data: (outputs (N, H), final state).

    Shapes as `run_forward`; a sequence starts from its initial state at its own
    last step and ends at step 0.
    """
    initial, outputs, offset = state, [], sum(batch_sizes)
    if batch_sizes[-1] < batch_sizes[0]:
        state = _slice_state(initial, 0, batch_sizes[-1])
    for size in batch_sizes[::-1]:
        if size > state[0].shape[0]:
            start = state[0].shape[0]
            state = tuple([cat([s, s0[start:size]], 0)
                           for s, s0 in zip(state, initial, strict=True)])
        offset -= size
        state = step(gates_x[offset:offset + size], state, w_hh, b_hh)
        outputs.append(state[0])
    return cat(outputs[::-1], 0), state


def reset_uniform(module: Module, hidden_size: int) -> None:
    """Every parameter ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), PyTorch's RNN init."""
    bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
    for weight in module.parameters():
        init.uniform_(weight, -bound, bound)
