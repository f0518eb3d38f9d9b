"""`F.embedding`, `F.embedding_bag` (re-exported by jitgrad.nn.functional): rows of an
embedding table, and sums, means or maxima of bags of them.

embedding_bag is a composite: bags given as a 1-D input with `offsets` are laid out as a
padded (bags, longest bag) index matrix (computed from the offsets' values, read at call
time: in compiled code this is a graph break), then looked up with `embedding`, masked (entries
equal to padding_idx, and the padding of short bags, take no part) and reduced over the bag
dim. Gradients come from embedding, mul, sum and max: the max of a bag sends its gradient
to the first maximal entry, a mean divides by the bag's count of real entries, and an
empty bag gives zeros (no gradient), as PyTorch's embedding_bag.
"""

from __future__ import annotations

import math

import numpy as np

from jitgrad.eager.grad_mode import no_grad
from jitgrad.eager.ops import nn_ops
from jitgrad.eager.ops.checks import check_values
from jitgrad.eager.ops.comparison import where
from jitgrad.eager.ops.creation import tensor
from jitgrad.eager.tensor import Tensor

_MODES = ("sum", "mean", "max")


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of `weight` (num_embeddings, dim) picked by int `input` -> input.shape + (dim,).

    max_norm: first, under no_grad, each row that `input` picks and whose `norm_type`
    norm exceeds max_norm is scaled in place to norm max_norm (times max_norm /
    (norm + 1e-7), as torch.embedding_renorm_), so `weight` changes.
    Raises NotImplementedError for scale_grad_by_freq or sparse (jitgrad has no sparse
    gradients); IndexError/RuntimeError for bad ids (see nn_ops.embedding).
    """
    if scale_grad_by_freq or sparse:
        flag = "scale_grad_by_freq" if scale_grad_by_freq else "sparse"
        raise NotImplementedError(f"embedding: jitgrad does not implement {flag}=True (dense "
                                  "gradients only); leave it False")
    if max_norm is not None:
        embedding_renorm_(weight, input, max_norm, norm_type)
    return nn_ops.embedding(input, weight, padding_idx)


def embedding_renorm_(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> Tensor:
    """Scale the rows of `weight` picked by `input` whose norm exceeds max_norm, in place."""
    with no_grad():
        ids = input.reshape(-1).unique()
        rows = weight[ids]
        norms = rows.norm(p=norm_type, dim=1, keepdim=True).double()
        scale = where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).to(weight.dtype)
        weight[ids] = rows * scale
    return weight


def _bags_as_matrix(input: Tensor, offsets: Tensor, include_last_offset: bool
                    ) -> tuple[Tensor, Tensor]:
    """(index matrix (bags, longest), bool mask of real entries) from 1-D input + offsets.

    Raises RuntimeError for offsets not starting at 0 or past the input's end.
    """
    starts = [int(v) for v in offsets.tolist()]
    length = input.shape[0]
    if starts and starts[0] != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the "
                           f"mini-batch has to start from position 0. However, got {starts[0]}")
    if starts and starts[-1] > length:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {length} but "
                           f"got offsets[-1] of {starts[-1]}")
    ends = starts[1:] if include_last_offset else [*starts[1:], length]
    starts = starts[:len(ends)]
    longest = max([e - s for s, e in zip(starts, ends, strict=True)] + [1])
    positions = np.zeros((len(starts), longest), dtype=np.int64)
    real = np.zeros((len(starts), longest), dtype=bool)
    for bag, (start, end) in enumerate(zip(starts, ends, strict=True)):
        positions[bag, :end - start] = np.arange(start, end)
        real[bag, :end - start] = True
    where = tensor(positions)
    return input[where], tensor(real)


def _check_arguments(input: Tensor, offsets: Tensor | None, mode: str,
                     per_sample_weights: Tensor | None, scale_grad_by_freq: bool) -> None:
    if mode not in _MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if input._data.dtype.kind not in "iu":
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {input.type()} instead "
                           "(while checking arguments for embedding_bag)")
    if input.dim() == 2 and offsets is not None:
        raise ValueError("if input is 2D, then offsets has to be None, as input is treated is "
                         "a mini-batch of fixed length sequences. However, found offsets of "
                         f"type {type(offsets).__name__}")
    if input.dim() == 1 and (offsets is None or offsets.dim() != 1):
        raise ValueError(f"offsets has to be a 1D Tensor but got "
                         f"{None if offsets is None else offsets.dim()}")
    if input.dim() not in (1, 2):
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.dim()}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    if scale_grad_by_freq and mode == "max":
        raise ValueError("max mode does not support scaling the gradient by the frequency")


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """One reduced row per bag: (bags, embedding_dim).

    input: (bags, n) fixed-size bags, or 1-D with `offsets` (bag starts; with
    include_last_offset the last entry is the end). per_sample_weights (input's shape) scale
    each row first (mode="sum" only). max_norm renormalizes the rows used, in place.
    Raises ValueError / RuntimeError / NotImplementedError as PyTorch (scale_grad_by_freq
    and sparse are NotImplementedError, as for F.embedding).
    """
    _check_arguments(input, offsets, mode, per_sample_weights, scale_grad_by_freq)
    input = check_values(input, reject="outside", low=0, high=weight.shape[0],  # noqa: A001
                         error="RuntimeError", message="embedding_bag: Expected idx >= 0 && "
                         "idx < num_embeddings but found idx to be {bad}")
    ids, real_entries = input, input == input
    if input.dim() == 1:
        assert offsets is not None, "checked: 1-D input has offsets"
        ids, real_entries = _bags_as_matrix(input, offsets, include_last_offset)
        if per_sample_weights is not None:
            per_sample_weights = _bags_as_matrix(per_sample_weights, offsets,
                                                 include_last_offset)[0]
    if padding_idx is not None:
        real_entries = real_entries & (ids != padding_idx % weight.shape[0])
    rows = embedding(ids, weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)
    weights = real_entries.to(weight.dtype)
    if per_sample_weights is not None:
        weights = weights * per_sample_weights
    if mode == "max":
        filled = rows.masked_fill(~real_entries.unsqueeze(-1), -math.inf).max(1).values
        return filled.masked_fill(~real_entries.any(1, keepdim=True), 0.0)
    summed = (rows * weights.unsqueeze(-1)).sum(1)
    if mode == "sum":
        return summed
    return summed / real_entries.sum(1, keepdim=True).clamp(min=1).to(weight.dtype)


__all__ = ["embedding", "embedding_renorm_", "embedding_bag"]
