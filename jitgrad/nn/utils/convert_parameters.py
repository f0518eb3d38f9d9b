"""Flattening parameters into one vector and back (torch.nn.utils.parameters_to_vector)."""

from __future__ import annotations

from collections.abc import Iterable

from jitgrad.eager.ops.joining import cat
from jitgrad.eager.tensor import Tensor


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All parameters flattened and concatenated, shape (sum of numel,); differentiable."""
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Point each parameter's data at its slice of `vec` (shared memory, as PyTorch's `.data =`).

    Raises TypeError when `vec` is not a Tensor.
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected jitgrad.Tensor, but got: {type(vec).__name__}")
    offset = 0
    for param in parameters:
        n = param.numel()
        param._data = vec._data[offset:offset + n].reshape(param._data.shape)
        offset += n


__all__ = ["parameters_to_vector", "vector_to_parameters"]
