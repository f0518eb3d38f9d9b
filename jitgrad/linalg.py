"""`jitgrad.linalg`: the vector norms of `torch.linalg` (matrix decompositions are not
provided)."""

from __future__ import annotations

from typing import Any

from jitgrad.eager.ops.reduction import vector_norm
from jitgrad.eager.tensor import Tensor


def norm(input: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
         dtype: Any = None) -> Tensor:
    """`torch.linalg.norm` for vector norms and the Frobenius norm.

    ord=None: the 2-norm of all entries (or of `dim`); a number: the vector p-norm over
    `dim` (a 1-D input, or an int dim); 'fro': the 2-norm over the given dims.
    Raises RuntimeError for matrix norms other than 'fro' (ord='nuc', 2-D numeric ord).
    """
    if ord is None or ord == "fro":
        return vector_norm(input, 2, dim, keepdim, dtype=dtype)
    matrix = (dim is None and input.ndim == 2) or (isinstance(dim, (tuple, list)) and len(dim) == 2)
    if isinstance(ord, str) or matrix:
        raise RuntimeError(f"linalg.norm: the matrix norm ord={ord!r} is not supported by jitgrad; "
                           "use ord=None/'fro', or linalg.vector_norm for entrywise norms")
    return vector_norm(input, ord, dim, keepdim, dtype=dtype)


__all__ = ["norm", "vector_norm"]
