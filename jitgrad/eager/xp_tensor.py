"""The Tensor side of the backward-formula namespace (see jitgrad.eager.xp).

Each name mirrors `xp.NumpyNamespace` with the same arguments, computed with jitgrad
ops so that `create_graph=True` records the backward pass itself. `tensor_methods.install`
copies them onto `xp.TENSOR` (this module needs every op module, which import xp).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager.ops import (
    activation,
    comparison,
    conv,
    creation,
    indexing,
    joining,
    linalg,
    pointwise,
    pointwise_math,
    reduction,
    shape,
    sorting,
)
from jitgrad.eager.ops._binary import binary
from jitgrad.eager.ops.nn_ops import EMBEDDING_BACKWARD, embedding
from jitgrad.eager.ops.registry import ANY_KIND, apply_op, register
from jitgrad.eager.tensor import Tensor

exp = pointwise.exp
log = pointwise.log
tanh = pointwise.tanh
log1p = pointwise.log1p
sqrt = pointwise.sqrt
sin = pointwise.sin
cos = pointwise.cos
abs = pointwise.abs  # noqa: A001
sign = pointwise.sign
erf = pointwise.erf
trunc = pointwise.trunc
sinh = pointwise_math.sinh
cosh = pointwise_math.cosh
lgamma = pointwise_math.lgamma
digamma = pointwise_math.digamma
polygamma = pointwise_math.polygamma
i0 = pointwise_math.i0
i1 = pointwise_math.i1
sigmoid = activation.sigmoid
where = comparison.where
matmul = linalg.matmul
reshape = shape.reshape
expand = shape.expand
permute = shape.permute
swapaxes = shape.transpose
clone = shape.clone
flip = joining.flip
roll = joining.roll


def cat(tensors: list[Tensor], dim: int) -> Tensor:
    return joining.cat(tensors, dim)


def _numpy_index(index: Any) -> Any:
    """Index tensors inside an index become their arrays (indices carry no gradient)."""
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, tuple):
        return tuple(i._data if isinstance(i, Tensor) else i for i in index)
    return index


def getitem(x: Tensor, index: Any) -> Tensor:
    return indexing.index_with(x, _numpy_index(index))


def index_add_into(shape: tuple[int, ...], index: Any, values: Tensor) -> Tensor:
    return indexing.index_add_into(shape, _numpy_index(index), values)


def embedding_backward(g: Tensor, indices: Tensor, num_weights: int) -> Tensor:
    return apply_op(EMBEDDING_BACKWARD, (g, indices), (g._data, indices._data),
                    {"num_weights": num_weights})


def embedding_rows(weight: Tensor, indices: Tensor) -> Tensor:
    return embedding(indices, weight)


# plain arrays (np.zeros_like would keep a traced tensor's fake array type, whose values
# cannot be read, where these constants are real)
def zeros(shape: tuple[int, ...], like: Any) -> Tensor:
    return Tensor._make(np.zeros(shape, dtype=like._data.dtype))


# Note [Zero gradients read their gradient]: a formula's zero gradient (fill's, copy's
# for the overwritten self) is an op of the gradient it replaces, not a constant: in a
# traced backward graph the zeros then stay connected to the tangent that produced them,
# so pruning the terms of outputs that got no gradient (codegen.autograd.without_tangents)
# still computes what eager computes with those zeros (the layer_norm backward of a -inf
# row gives NaN from a zero gradient, fuzz seed 664842; a constant looked absent).
ZEROS_LIKE = register("zeros_like", lambda x: np.zeros(np.shape(x), dtype=x.dtype), None,
                      source="constant: no derivative", scalar=lambda s, x: 0,
                      scalar_kinds=ANY_KIND)


def zeros_like(x: Tensor) -> Tensor:
    return apply_op(ZEROS_LIKE, (x,), (x._data,))


def ones_like(x: Tensor) -> Tensor:
    return Tensor._make(np.ones(x._data.shape, dtype=x._data.dtype))


def sum_to(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum a broadcast tensor down to `shape` (the engine's sum_to, recorded)."""
    shape = tuple(shape)
    have = x._data.shape
    if have == shape:
        return x
    lead = len(have) - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and have[lead + i] != 1)
    if dims:
        x = reduction.sum(x, dims, True)
    return reshape(x, shape)


def maximum(a: Any, b: Any) -> Tensor:
    return binary(comparison.MAXIMUM, a, b)  # numbers allowed, as np.maximum


def minimum(a: Any, b: Any) -> Tensor:
    return binary(comparison.MINIMUM, a, b)


def floor_divide(a: Any, b: Any) -> Tensor:
    return pointwise.div(a, b, rounding_mode="floor")  # zero gradient, unlike `//`


def cast(x: Tensor, np_dtype: Any) -> Tensor:
    return creation.to_dtype(x, np_dtype)


def sum(x: Tensor, dims: tuple[int, ...] | None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return reduction.sum(x, dims, keepdim)


def amax(x: Tensor, dims: tuple[int, ...] | None, keepdim: bool = False) -> Tensor:
    return reduction.amax(x, dims, keepdim)


def prod(x: Tensor, dims: tuple[int, ...] | None, keepdim: bool = False) -> Tensor:
    return reduction.prod(x, dims, keepdim)


def cumsum(x: Tensor, dim: int) -> Tensor:
    return sorting.cumsum(x, dim)


def cumprod(x: Tensor, dim: int) -> Tensor:
    return sorting.cumprod(x, dim)


def take_along_dim(x: Tensor, index: Any, dim: int) -> Tensor:
    index = index if isinstance(index, Tensor) else Tensor._make(np.asarray(index))
    return sorting.take_along(x, index, dim)


def put_along_dim(shape: tuple[int, ...], dim: int, index: Any, values: Tensor) -> Tensor:
    index = index if isinstance(index, Tensor) else Tensor._make(np.asarray(index))
    return sorting.put_along(values, index, shape, dim)


def eye_mask(n: int, shape: tuple[int, ...]) -> Tensor:
    return Tensor._make(np.eye(n, dtype=np.bool_).reshape(shape))


def einsum(equation: str, *operands: Tensor) -> Tensor:
    return linalg.einsum(equation, *operands)


def unfold2d(x: Tensor, kernel: tuple[int, int], stride: tuple[int, int],
             dilation: tuple[int, int]) -> Tensor:
    return conv.unfold2d(x, kernel, stride, dilation)


def fold2d(patches: Tensor, shape: tuple[int, ...], kernel: tuple[int, int],
           stride: tuple[int, int], dilation: tuple[int, int]) -> Tensor:
    return conv.fold2d(patches, shape, kernel, stride, dilation)
