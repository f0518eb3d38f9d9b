"""Recurrent layers: `RNN`, `LSTM`, `GRU` and their cells (torch.nn.RNN ... torch.nn.GRUCell).

Each layer is a Python loop over time steps of ordinary jitgrad ops (linear,
sigmoid, tanh, chunk, slicing, cat, stack), so autograd gives the gradients and
`jitgrad.compile` unrolls the loop (its trip count is the sequence length, a
shape) into one graph. The input projection of a whole layer is one `linear`
over all time steps; only the hidden projection runs per step.

Notes:
- The equations of one step of each cell: jitgrad/nn/modules/recurrence.py.
- Parameters carry PyTorch's names and shapes (`weight_ih_l{k}` (G*H, in),
  `weight_hh_l{k}` (G*H, H), `bias_ih_l{k}`, `bias_hh_l{k}` (G*H,), `_reverse`
  for the second direction; G = 1, 4, 3) and its init U(-1/sqrt(H), 1/sqrt(H)),
  so state_dicts move between jitgrad and PyTorch unchanged.
- Every input runs as packed data: a padded (T, B, in) batch is the packed batch
  with T steps of B rows. At step t only the first batch_sizes[t] rows advance;
  rows of sequences that ended are set aside as their final state (forward
  direction), or join with their initial state when they start (reverse).
- A direction whose T steps all have the same batch (a padded batch) runs as one
  fused op, `lstm_sequence`, `gru_sequence` or `rnn_sequence` (Note [Fused recurrent
  layers] in jitgrad/eager/ops/recurrent.py): the same equations with the time loop
  in numpy, so eager mode does not pay ~400 op dispatches per layer. Where torch's
  output is not saved for its backward (GRU, RNN, float64 LSTM) the layer returns a copy
  of the op's saved output (`_unsaved`), so in-place edits of it are allowed as in torch.
- `proj_size` (LSTM with projections) is refused with NotImplementedError.
"""

from __future__ import annotations

import warnings
from typing import Any

from jitgrad.eager.dtypes import float32
from jitgrad.eager.ops.creation import empty, zeros
from jitgrad.eager.ops.joining import cat, stack
from jitgrad.eager.ops.recurrent import gru_sequence, lstm_sequence, rnn_sequence
from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn.modules.module import Module
from jitgrad.nn.modules.recurrence import (
    State,
    gru_step,
    lstm_step,
    reset_uniform,
    rnn_relu_step,
    rnn_tanh_step,
    run_forward,
    run_reverse,
)
from jitgrad.nn.parameter import Parameter
from jitgrad.nn.utils.rnn import PackedSequence


class RNNBase(Module):
    """The multi-layer, optionally bidirectional recurrence shared by RNN, LSTM and GRU.

    Input (T, B, input_size), (B, T, input_size) with batch_first, (T, input_size)
    unbatched, or a PackedSequence. Output (T, B, D*H) (same layout as the input)
    and the final state (num_layers*D, B, H) per state tensor, D = 2 if
    bidirectional. Dropout with probability `dropout` is applied to each layer's
    output but the last, in training mode.
    """

    _gate_count = 1
    _state_count = 1
    _fused = False  # whether `_run_fused` runs a whole direction as one op

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _check_sizes(hidden_size, num_layers, dropout, proj_size)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, 0
        self._flat_weights_names = []
        directions = 2 if bidirectional else 1
        gates = self._gate_count * hidden_size
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes: dict[str, tuple[int, ...]] = {"weight_ih": (gates, layer_input),
                                                      "weight_hh": (gates, hidden_size)}
                if bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                for name, shape in shapes.items():
                    setattr(self, name + suffix, Parameter(empty(*shape, dtype=dtype)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        reset_uniform(self, self.hidden_size)

    def flatten_parameters(self) -> None:
        """Does nothing: PyTorch packs cuDNN weights here; jitgrad has no such layout."""

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """Per layer and direction: [weight_ih, weight_hh(, bias_ih, bias_hh)]."""
        per_group = 4 if self.bias else 2
        names = self._flat_weights_names
        return [[getattr(self, name) for name in names[k:k + per_group]]
                for k in range(0, len(names), per_group)]

    def forward(self, input: Tensor | PackedSequence,
                hx: Tensor | tuple[Tensor, Tensor] | None = None) -> tuple[Any, Any]:
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if input.dim() not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{input.dim()}D tensor instead")
        batched = input.dim() == 3
        states = self._states_of(hx, batched)
        if not batched:
            x = input.unsqueeze(1)
            states = tuple([s.unsqueeze(1) for s in states]) if states is not None else None
        elif self.batch_first:
            x = input.transpose(0, 1)
        else:
            x = input
        steps, batch = x.shape[0], x.shape[1]
        self._check_input(x)
        states = self._initial_states(states, batch, x)
        if steps == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        output, final = self._run_layers(x.reshape(steps * batch, x.shape[2]),
                                         [batch] * steps, states)
        output = output.reshape(steps, batch, output.shape[1])
        if not batched:
            return output.squeeze(1), self._pack_state(tuple([s.squeeze(1) for s in final]))
        if self.batch_first:
            output = output.transpose(0, 1)
        return output, self._pack_state(final)

    def _forward_packed(self, input: PackedSequence, hx: Any) -> tuple[PackedSequence, Any]:
        data, sorted_indices, unsorted_indices = input.data, input.sorted_indices, \
            input.unsorted_indices
        batch_sizes = [int(n) for n in input.batch_sizes.tolist()]
        self._check_input(data)
        states = self._states_of(hx, True)
        if states is not None and sorted_indices is not None:
            states = tuple([s.index_select(1, sorted_indices) for s in states])
        states = self._initial_states(states, batch_sizes[0], data)
        output, final = self._run_layers(data, batch_sizes, states)
        if unsorted_indices is not None:
            final = tuple([s.index_select(1, unsorted_indices) for s in final])
        packed = PackedSequence(output, input.batch_sizes, sorted_indices, unsorted_indices)
        return packed, self._pack_state(final)

    def _states_of(self, hx: Any, batched: bool) -> State | None:
        """hx as a tuple of state tensors (None stays None); checks their dimensions."""
        if hx is None:
            return None
        states = (hx[0], hx[1]) if self._state_count == 2 else (hx,)
        expected = 3 if batched else 2
        dims = [s.dim() for s in states]  # a list, not a generator: traced code runs this
        if dims == [expected] * len(dims):
            return states
        kind = f"{'batched 3' if batched else 'unbatched 2'}-D input"
        if self._state_count == 2:
            raise RuntimeError(f"For {kind}, hx and cx should also be {expected}-D but got "
                               f"({dims[0]}-D, {dims[1]}-D) tensors")
        raise RuntimeError(f"For {kind}, hx should also be {expected}-D but got {dims[0]}-D "
                           "tensor")

    def _check_input(self, input: Tensor) -> None:
        """Raises: ValueError if input's dtype is not the weights', RuntimeError if its last
        size is not input_size (torch's classes and messages)."""
        weight_dtype = getattr(self, self._flat_weights_names[0]).dtype
        if input.dtype != weight_dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({weight_dtype}). Convert input: input.to({weight_dtype}), or "
                             f"convert model: model.to({input.dtype})")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")

    def _initial_states(self, states: State | None, batch: int, input: Tensor) -> State:
        """The given states, checked against (num_layers*D, batch, H), or zeros of that shape."""
        shape = (self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)
        if states is None:
            return tuple([zeros(*shape, dtype=input.dtype) for _ in range(self._state_count)])
        for k, s in enumerate(states):
            if tuple(s.shape) != shape:
                which = "hidden" if self._state_count == 1 else f"hidden[{k}]"
                raise RuntimeError(f"Expected {which} size {shape}, got {list(s.shape)}")
        return states

    def _fuses(self, gates_x: Tensor, state: State, w_hh: Tensor, batch_sizes: list[int]) -> bool:
        """Whether a direction runs as one fused op: the layer has one (LSTM), every step
        has the same batch, and the operands share one float dtype."""
        if not self._fused or min(batch_sizes) != max(batch_sizes):
            return False
        dtype = gates_x.dtype
        return (gates_x.is_floating_point() and w_hh.dtype == dtype
                and state[0].dtype == dtype and state[-1].dtype == dtype)

    def _run_fused(self, gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None,
                   steps: int, reverse: bool) -> tuple[Tensor, State]:
        raise NotImplementedError(f"{type(self).__name__} has no fused direction")

    def _pack_state(self, final: State) -> Any:
        return final if self._state_count == 2 else final[0]

    def _run_layers(self, data: Tensor, batch_sizes: list[int],
                    states: State) -> tuple[Tensor, State]:
        """All layers over packed data (N, in): (last layer's output (N, D*H), final states)."""
        directions = 2 if self.bidirectional else 1
        per_group = 4 if self.bias else 2
        names, finals = self._flat_weights_names, []
        for layer in range(self.num_layers):
            if layer and self.dropout and self.training:
                data = F.dropout(data, self.dropout, True)
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                weights = [getattr(self, n) for n in names[index * per_group:][:per_group]]
                w_ih, w_hh = weights[0], weights[1]
                b_ih, b_hh = (weights[2], weights[3]) if self.bias else (None, None)
                gates_x, state = F.linear(data, w_ih, b_ih), tuple([s[index] for s in states])
                if self._fuses(gates_x, state, w_hh, batch_sizes):
                    output, final = self._run_fused(gates_x, state, w_hh, b_hh,
                                                    len(batch_sizes), bool(direction))
                else:
                    run = run_reverse if direction else run_forward
                    output, final = run(self._step, gates_x, state, w_hh, b_hh, batch_sizes)
                outputs.append(output)
                finals.append(final)
            data = outputs[0] if directions == 1 else cat(outputs, 1)
        return data, tuple([stack([f[k] for f in finals], 0) for k in range(self._state_count)])

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        defaults = {"num_layers": 1, "bias": True, "batch_first": False, "dropout": 0.0,
                    "bidirectional": False}
        for name, default in defaults.items():
            if getattr(self, name) != default:
                text += f", {name}={getattr(self, name)}"
        return text


def _unsaved(output: Tensor) -> Tensor:
    """A copy of a fused direction's output, a view of what its op saved for the backward:
    torch's GRU, RNN and float64 LSTM outputs are not saved, so a user may edit them in place
    (`out += skip`) and still call backward. torch's float32 CPU LSTM (its mkldnn kernel)
    saves its output and raises there, so that LSTM keeps the view."""
    return output.clone()


def _check_sizes(hidden_size: int, num_layers: int, dropout: float, proj_size: int) -> None:
    """Raises: ValueError/TypeError as torch for bad sizes; NotImplementedError for proj_size."""
    if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or \
            not 0 <= dropout <= 1:
        raise ValueError("dropout should be a number in range [0, 1] representing the "
                         "probability of an element being zeroed")
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                      "non-zero dropout expects num_layers greater than 1, but got "
                      f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
    if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
        raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
    if hidden_size <= 0:
        raise ValueError("hidden_size must be greater than zero")
    if num_layers <= 0:
        raise ValueError("num_layers must be greater than zero")
    if proj_size:
        raise NotImplementedError("jitgrad.nn.LSTM: proj_size (LSTM with projections) is not "
                                  "supported; use proj_size=0")


class RNN(RNNBase):
    """Elman RNN, h' = act(W_ih x + b_ih + W_hh h + b_hh), act = tanh or relu (torch.nn.RNN).

    Raises: ValueError for another nonlinearity. See RNNBase for shapes.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(f"RNN_{nonlinearity.upper()}", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, device=device, dtype=dtype)

    _fused = True

    def _step(self, gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
        if self.nonlinearity == "tanh":
            return rnn_tanh_step(gates_x, state, w_hh, b_hh)
        return rnn_relu_step(gates_x, state, w_hh, b_hh)

    def _run_fused(self, gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None,
                   steps: int, reverse: bool) -> tuple[Tensor, State]:
        """One direction over `steps` equal batches as `rnn_sequence`: (outputs (N, H),
        (final h,))."""
        if b_hh is not None:
            gates_x = gates_x + b_hh
        rows, width = gates_x.shape
        outputs, h = rnn_sequence(gates_x.reshape(steps, rows // steps, width), state[0], w_hh,
                                  reverse, self.nonlinearity == "relu")
        return _unsaved(outputs.reshape(rows, width)), (h,)


class LSTM(RNNBase):
    """Long short-term memory (torch.nn.LSTM); hx and the final state are (h, c).

    See RNNBase for shapes; proj_size other than 0 raises NotImplementedError.
    """

    _gate_count = 4
    _state_count = 2

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device: Any = None, dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)

    _fused = True

    def _step(self, gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
        return lstm_step(gates_x, state, w_hh, b_hh)

    def _run_fused(self, gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None,
                   steps: int, reverse: bool) -> tuple[Tensor, State]:
        """One direction over `steps` equal batches as `lstm_sequence`: (outputs (N, H),
        (final h, final c))."""
        if b_hh is not None:
            gates_x = gates_x + b_hh
        rows, width = gates_x.shape
        outputs, h, c = lstm_sequence(gates_x.reshape(steps, rows // steps, width),
                                      state[0], state[1], w_hh, reverse)
        outputs = outputs.reshape(rows, self.hidden_size)
        return (outputs if gates_x.dtype == float32 else _unsaved(outputs)), (h, c)


class GRU(RNNBase):
    """Gated recurrent unit (torch.nn.GRU). See RNNBase for shapes."""

    _gate_count = 3

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)

    _fused = True

    def _step(self, gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
        return gru_step(gates_x, state, w_hh, b_hh)

    def _run_fused(self, gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None,
                   steps: int, reverse: bool) -> tuple[Tensor, State]:
        """One direction over `steps` equal batches as `gru_sequence`: (outputs (N, H),
        (final h,)); the r and z hidden biases join the input projection, b_hn stays inside
        r's product."""
        hidden = self.hidden_size
        if b_hh is None:
            b_hn = zeros(hidden, dtype=gates_x.dtype)
        else:
            gates_x = gates_x + cat([b_hh[:2 * hidden], zeros(hidden, dtype=b_hh.dtype)])
            b_hn = b_hh[2 * hidden:]
        rows, width = gates_x.shape
        outputs, h = gru_sequence(gates_x.reshape(steps, rows // steps, width), state[0], w_hh,
                                  b_hn, reverse)
        return _unsaved(outputs.reshape(rows, hidden)), (h,)


class RNNCellBase(Module):
    """One time step: input (B, input_size) or (input_size,), state (B, H) or (H,).

    Parameters weight_ih (G*H, input_size), weight_hh (G*H, H), bias_ih, bias_hh (G*H,).
    A missing state starts at zeros. Raises ValueError for input that is not 1-D or 2-D.
    """

    _gate_count = 1
    _state_count = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gates = self._gate_count * hidden_size
        self.weight_ih = Parameter(empty(gates, input_size, dtype=dtype))
        self.weight_hh = Parameter(empty(gates, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(gates, dtype=dtype))
            self.bias_hh = Parameter(empty(gates, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        reset_uniform(self, self.hidden_size)

    def forward(self, input: Tensor, hx: Any = None) -> Any:
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.dim()}D instead")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            # a list, not a generator: compiled code traces this, and generators break graphs
            states = tuple([zeros(x.shape[0], self.hidden_size, dtype=x.dtype)
                            for _ in range(self._state_count)])
        else:
            states = self._given_states(hx, batched)
            states = states if batched else tuple([s.unsqueeze(0) for s in states])
        self._check_sizes(x, states)
        states = self._step(F.linear(x, self.weight_ih, self.bias_ih), states,
                            self.weight_hh, self.bias_hh)
        states = states if batched else tuple([s.squeeze(0) for s in states])
        return states if self._state_count == 2 else states[0]

    def _given_states(self, hx: Any, batched: bool) -> State:
        """hx as a tuple of state tensors, each 1-D or 2-D.

        Raises: TypeError for an LSTMCell's batched hx that is not a tuple or list (torch's
        lstm_cell argument error); ValueError for a state of another dimension.
        """
        name = type(self).__name__
        if self._state_count == 1:
            if hx.dim() not in (1, 2):
                raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {hx.dim()}D "
                                 "instead")
            return (hx,)
        if batched and not isinstance(hx, (tuple, list)):
            raise TypeError("lstm_cell(): argument 'hx' (position 2) must be tuple of Tensors, "
                            f"not {type(hx).__name__}")
        states = (hx[0], hx[1])
        for k, state in enumerate(states):
            if state.dim() not in (1, 2):
                raise ValueError(f"{name}: Expected hx[{k}] to be 1D or 2D, got {state.dim()}D "
                                 "instead")
        return states

    def _check_sizes(self, x: Tensor, states: State) -> None:
        """Raises: RuntimeError with torch's message when x (B, in) or a state (B, H) has
        another input size, batch or hidden size (a 1-D state beside a batch included)."""
        if x.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {x.shape[1]} expected "
                               f"{self.input_size}")
        for k, state in enumerate(states):
            if state.shape[0] != x.shape[0]:
                raise RuntimeError(f"Input batch size {x.shape[0]} doesn't match hidden{k} "
                                   f"batch size {state.shape[0]}")
            hidden = state.shape[1] if state.dim() > 1 else None
            if state.dim() != 2 or hidden != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {hidden}, "
                                   f"expected {self.hidden_size}")

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            text += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":  # RNNCell only, as torch's
            text += f", nonlinearity={self.nonlinearity}"
        return text


class RNNCell(RNNCellBase):
    """One Elman RNN step (torch.nn.RNNCell); nonlinearity "tanh" or "relu"."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def _step(self, gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
        if self.nonlinearity == "tanh":
            return rnn_tanh_step(gates_x, state, w_hh, b_hh)
        return rnn_relu_step(gates_x, state, w_hh, b_hh)


class LSTMCell(RNNCellBase):
    """One LSTM step (torch.nn.LSTMCell): (h, c) -> (h', c')."""

    _gate_count = 4
    _state_count = 2

    def _step(self, gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
        return lstm_step(gates_x, state, w_hh, b_hh)


class GRUCell(RNNCellBase):
    """One GRU step (torch.nn.GRUCell)."""

    _gate_count = 3

    def _step(self, gates_x: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
        return gru_step(gates_x, state, w_hh, b_hh)


__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
