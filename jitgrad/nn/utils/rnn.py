"""Variable-length batches for recurrent layers (torch.nn.utils.rnn).

A `PackedSequence` stores a batch of sequences time step by time step, without
padding: `data` (sum(lengths), *) holds step 0 of every sequence, then step 1 of
every sequence still running, and so on; `batch_sizes` (int64, one per step) says
how many rows each step has. The sequences are ordered by decreasing length;
`sorted_indices` maps that order to the caller's batch order (None when the
caller's batch was already sorted) and `unsorted_indices` is its inverse.

Every function here is written with differentiable jitgrad ops (slicing, cat,
stack, index_select), so gradients flow from packed data back to padded input.
Batch sizes and lengths are read as Python ints (`tolist`), which is a concrete
value: inside `jitgrad.compile` that reading ends the graph.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from jitgrad.eager.dtypes import float32, float64, int64
from jitgrad.eager.ops.creation import full, tensor
from jitgrad.eager.ops.joining import cat, stack
from jitgrad.eager.tensor import Tensor


class PackedSequence(NamedTuple):
    """A packed batch of variable-length sequences (see the module docstring).

    data: (sum(lengths), *); batch_sizes: int64 (max_length,), non-increasing;
    sorted_indices, unsorted_indices: int64 (batch,) or both None.
    """

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """`data.to(*args, **kwargs)`: self when that returns data itself, else a copy with
        the indices on the new data's device and batch_sizes unchanged (torch's rule)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        sorted_indices, unsorted_indices = [
            None if t is None else t.to(data.device)
            for t in (self.sorted_indices, self.unsorted_indices)]
        return PackedSequence(data, self.batch_sizes, sorted_indices, unsorted_indices)

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def cuda(self) -> PackedSequence:
        """Raises: RuntimeError (jitgrad runs on the CPU only), as Tensor.cuda."""
        return self.to("cuda")

    def double(self) -> PackedSequence:
        return self.to(dtype=float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=float32)

    def long(self) -> PackedSequence:
        return self.to(dtype=int64)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def _lengths_list(lengths: Tensor | list[int] | tuple[int, ...]) -> list[int]:
    if isinstance(lengths, Tensor):
        return [int(n) for n in lengths.tolist()]
    return [int(n) for n in lengths]


def _sort_order(lengths: list[int], enforce_sorted: bool) -> list[int] | None:
    """The batch order by decreasing length, or None when it is the given order.

    Raises: RuntimeError if enforce_sorted and lengths are not sorted decreasingly.
    """
    is_sorted = all(a >= b for a, b in zip(lengths, lengths[1:], strict=False))
    if enforce_sorted:
        if not is_sorted:
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability.")
        return None
    return [int(i) for i in np.argsort(-np.asarray(lengths), kind="stable")]


def _batch_sizes(lengths: list[int]) -> list[int]:
    """Rows per time step of sequences with these lengths, sorted decreasingly."""
    return [sum(1 for n in lengths if n > t) for t in range(lengths[0])]


def pack_padded_sequence(input: Tensor, lengths: Tensor | list[int],
                         batch_first: bool = False, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) (or (B, T, *) with batch_first) of sequences.

    lengths: B positive ints (list or int64 tensor), each at most T. With
    enforce_sorted=False the batch is sorted by decreasing length first and the
    PackedSequence records the permutation.
    Raises: RuntimeError for unsorted lengths with enforce_sorted, for a length
    below 1 or above T.
    """
    lengths = _lengths_list(lengths)
    padded = input.transpose(0, 1) if batch_first else input
    if len(lengths) != padded.shape[1]:
        raise RuntimeError(f"pack_padded_sequence: expected {padded.shape[1]} lengths (the batch "
                           f"size), got {len(lengths)}")
    order = _sort_order(lengths, enforce_sorted)
    sorted_indices = unsorted_indices = None
    if order is not None:
        sorted_indices = tensor(order, dtype=int64)
        unsorted_indices = tensor([int(i) for i in np.argsort(order)], dtype=int64)
        padded = padded.index_select(1, sorted_indices)
        lengths = [lengths[i] for i in order]
    if lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element "
                           "in 'lengths' that is <= 0")
    if lengths[0] > padded.shape[0]:
        raise RuntimeError(f"pack_padded_sequence: a length ({lengths[0]}) exceeds the padded "
                           f"sequence length ({padded.shape[0]})")
    batch_sizes = _batch_sizes(lengths)
    data = cat([padded[t, :size] for t, size in enumerate(batch_sizes)], 0)
    return PackedSequence(data, tensor(batch_sizes, dtype=int64), sorted_indices,
                          unsorted_indices)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Undo `pack_padded_sequence`: (padded (T, B, *) or (B, T, *), lengths int64 (B,)).

    The batch comes back in the caller's original order; T is the longest length,
    or total_length when given. Raises: ValueError if total_length is below it.
    """
    data, batch_sizes = sequence.data, [int(n) for n in sequence.batch_sizes.tolist()]
    max_length, batch = len(batch_sizes), batch_sizes[0]
    if total_length is not None:
        if total_length < max_length:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {max_length}")
    else:
        total_length = max_length
    steps, offset = [], 0
    for size in batch_sizes:
        rows = data[offset:offset + size]
        offset += size
        if size < batch:
            rows = cat([rows, full((batch - size, *data.shape[1:]), padding_value,
                                   dtype=data.dtype)], 0)
        steps.append(rows)
    for _ in range(total_length - max_length):
        steps.append(full((batch, *data.shape[1:]), padding_value, dtype=data.dtype))
    padded = stack(steps, 0)
    lengths = [sum(1 for size in batch_sizes if size > b) for b in range(batch)]
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = [lengths[i] for i in sequence.unsorted_indices.tolist()]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, tensor(lengths, dtype=int64)


def pad_sequence(sequences: list[Tensor] | tuple[Tensor, ...], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Stack sequences of shapes (L_i, *) into (T, B, *) (or (B, T, *)), T = max L_i.

    Shorter sequences are filled with padding_value on the padding_side ("right"
    or "left"). Raises: ValueError for another padding_side.
    """
    if padding_side not in ("right", "left"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    max_length = max(seq.shape[0] for seq in sequences)
    padded = []
    for seq in sequences:
        missing = max_length - seq.shape[0]
        if missing:
            fill = full((missing, *seq.shape[1:]), padding_value, dtype=seq.dtype)
            seq = cat([seq, fill] if padding_side == "right" else [fill, seq], 0)
        padded.append(seq)
    return stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences: list[Tensor] | tuple[Tensor, ...],
                  enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences of shapes (L_i, *) (pad_sequence, then pack_padded_sequence)."""
    lengths = [seq.shape[0] for seq in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor | list[int],
                   batch_first: bool = False) -> list[Tensor]:
    """Undo `pad_sequence`: the B sequences of a padded (T, B, *) (or (B, T, *)) batch, the
    b-th its first lengths[b] steps, (lengths[b], *). Views of the input; torch also
    transposes a time-major input in place, which this leaves alone."""
    batch_major = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [seq[:length] for seq, length in zip(batch_major, _lengths_list(lengths),
                                                 strict=True)]


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """Undo `pack_sequence`: the packed sequences, (L_i, *) each, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "pack_sequence", "unpad_sequence", "unpack_sequence"]
