"""The Tensor side of the backward-formula namespace (see jitgrad.eager.xp).

Each name mirrors `xp.NumpyNamespace` with the same arguments, computed with jitgrad
ops so that `create_graph=True` records the backward pass itself.
"""

from __future__ import annotations

from typing import Any

from jitgrad.eager.ops import creation, linalg, pointwise, reduction, shape
from jitgrad.eager.tensor import Tensor

exp = pointwise.exp
log = pointwise.log
tanh = pointwise.tanh
matmul = linalg.matmul
reshape = shape.reshape
expand = shape.expand
permute = shape.permute


def cast(x: Tensor, np_dtype: Any) -> Tensor:
    return creation.to_dtype(x, np_dtype)


def sum(x: Tensor, dims: tuple[int, ...] | None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return reduction.sum(x, dims, keepdim)
