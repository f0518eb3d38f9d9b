"""Array namespaces that backward formulas are written against.

Every backward formula (see `ops/registry.py`) uses Python operators plus the functions
below, so one formula runs on three kinds of values:
- `NUMPY`: raw numpy arrays, the default fast path of `backward()`;
- `TENSOR`: jitgrad Tensors, used when `create_graph=True`, so formulas record history
  and higher-order gradients come for free;
- the compiler's graph values (a later layer provides a third namespace with the same
  names).
Both namespaces here define exactly the same names; `tests/eager/test_xp.py` checks it.
Dims are tuples of non-negative ints; shapes are tuples.

This module is in eager's lowest layer (Note [Eager layers] in tensor_methods.py): the
array kernels that an op's forward shares with NUMPY (matmul, sum_to, the accumulating
scans, embedding's row index-add, conv's windows) are defined here, where both reach
them; TENSOR's functions, written with the ops, are copied in by `tensor_methods.install`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import special

if TYPE_CHECKING:
    from jitgrad.eager.node import Node

Pair = tuple[int, int]


def _keep_dtype(out: Any, x: Any) -> Any:
    """scipy's result in x's float dtype (scipy computes float16/float32 wider)."""
    dtype = getattr(x, "dtype", None)
    return out if dtype is None or out.dtype == dtype else out.astype(dtype)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.matmul, with a stack of matrices times one matrix, (..., m, k) @ (k, n), run as one
    (M, k) @ (k, n) product: numpy makes one small gemm call per matrix of the stack, ten
    times slower for a language model's (35, 20, 200) @ (200, 8000) decoder."""
    if a.ndim > 2 and b.ndim == 2:
        rows = int(np.prod(a.shape[:-1]))  # not -1: a may be empty
        return np.matmul(a.reshape(rows, a.shape[-1]), b).reshape(*a.shape[:-1], b.shape[-1])
    return np.matmul(a, b)


def sum_to(grad: np.ndarray, shape: tuple[int, ...], node: Node | None = None,
           index: int = 0) -> np.ndarray:
    """Sum a broadcast gradient down to `shape`. Raises RuntimeError if not broadcastable
    (naming `node`, whose gradient for input `index` it is)."""
    lead = grad.ndim - len(shape)
    if lead < 0 or any(s != 1 and s != g for s, g in zip(shape, grad.shape[lead:], strict=True)):
        name = node.name() if node is not None else "backward"
        raise RuntimeError(f"Function {name} returned an invalid gradient at index {index} - "
                           f"got {list(grad.shape)} but expected shape compatible with "
                           f"{list(shape)}")
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                     if s == 1 and grad.shape[lead + i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad.reshape(shape)


def scan_accumulating(scan: Any, x: np.ndarray, dim: int, out_dtype: Any = None) -> np.ndarray:
    """`scan` (np.add.accumulate or np.multiply.accumulate) along `dim`, float16/float32
    accumulated in float64 and rounded once at the end, as PyTorch's CPU kernels accumulate
    (acc_type): a float32 cumsum of 2^25 ones ends at 2^25, not at 2^24 where float32 steps
    stop adding 1. Narrow ints and bool widen to 64 bits as in np.cumsum. The ufunc method,
    not np.cumsum, so numpy's inf * 0 warnings come from a jitgrad module (silenced in
    jitgrad/eager/__init__.py)."""
    if out_dtype is None and x.dtype.kind in "biu" and x.dtype.itemsize < 8:
        out_dtype = np.dtype(np.uint64 if x.dtype.kind == "u" else np.int64)
    result_dtype = np.dtype(out_dtype or x.dtype)
    if result_dtype.kind == "f" and result_dtype.itemsize < 8:
        return scan(x, axis=dim, dtype=np.float64).astype(result_dtype)
    return scan(x, axis=dim, dtype=out_dtype)


def embedding_backward_forward(g: np.ndarray, indices: np.ndarray, num_weights: int
                               ) -> np.ndarray:
    """(num_weights, dim) zeros with each row of g (indices.shape + (dim,)) added into the
    row its id names; repeated ids accumulate (numpy's `add.at`)."""
    out = np.zeros((num_weights,) + g.shape[indices.ndim:], dtype=g.dtype)
    # the row count is spelled out: -1 is ambiguous when a row is empty (dim 0)
    np.add.at(out, indices.reshape(-1), g.reshape((indices.size,) + out.shape[1:]))
    return out


def output_size(size: int, kernel: int, stride: int, dilation: int) -> int:
    """Number of windows along one dim of `size` (no padding; ops/conv.py)."""
    return (size - dilation * (kernel - 1) - 1) // stride + 1


def _windows(x: np.ndarray, kernel: Pair, stride: Pair, dilation: Pair) -> np.ndarray:
    """The (N, OH, OW, C, kh, kw) windows as a strided view of x (N, C, H, W)."""
    n, c, _, _ = x.shape
    sn, sc, sh, sw = x.strides
    oh = output_size(x.shape[2], kernel[0], stride[0], dilation[0])
    ow = output_size(x.shape[3], kernel[1], stride[1], dilation[1])
    return np.lib.stride_tricks.as_strided(
        x, shape=(n, oh, ow, c, kernel[0], kernel[1]),
        strides=(sn, sh * stride[0], sw * stride[1], sc, sh * dilation[0], sw * dilation[1]),
        writeable=False)


def unfold_forward(x: np.ndarray, kernel: Pair, stride: Pair, dilation: Pair) -> np.ndarray:
    """unfold2d's forward: the windows of x (N, C, H, W), a contiguous (N, OH, OW, C, kh, kw)."""
    return np.ascontiguousarray(_windows(x, kernel, stride, dilation))


def fold_forward(patches: np.ndarray, shape: tuple[int, ...], kernel: Pair, stride: Pair,
                 dilation: Pair) -> np.ndarray:
    """fold2d's forward: windows (N, OH, OW, C, kh, kw) added into zeros of `shape`."""
    out = np.zeros(shape, dtype=patches.dtype)
    _, oh, ow, _, _, _ = patches.shape
    as_channels_first = patches.transpose(0, 3, 4, 5, 1, 2)  # (N, C, kh, kw, OH, OW)
    for i in range(kernel[0]):  # one strided slice-add per kernel position
        rows = slice(i * dilation[0], i * dilation[0] + stride[0] * (oh - 1) + 1, stride[0])
        for j in range(kernel[1]):
            cols = slice(j * dilation[1], j * dilation[1] + stride[1] * (ow - 1) + 1, stride[1])
            out[:, :, rows, cols] += as_channels_first[:, :, i, j]
    return out


class NumpyNamespace:
    """Backward-formula functions over numpy arrays."""

    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    log1p = staticmethod(np.log1p)
    sqrt = staticmethod(np.sqrt)
    tanh = staticmethod(np.tanh)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    abs = staticmethod(np.abs)
    erf = staticmethod(special.erf)
    maximum = staticmethod(np.maximum)
    minimum = staticmethod(np.minimum)
    floor_divide = staticmethod(np.floor_divide)
    trunc = staticmethod(np.trunc)
    sinh = staticmethod(np.sinh)
    cosh = staticmethod(np.cosh)

    @staticmethod
    def lgamma(x: Any) -> Any:
        return _keep_dtype(special.gammaln(x), x)

    @staticmethod
    def digamma(x: Any) -> Any:
        return _keep_dtype(special.digamma(x), x)

    @staticmethod
    def polygamma(n: int, x: Any) -> Any:
        return _keep_dtype(special.polygamma(n, x), x)

    @staticmethod
    def i0(x: Any) -> Any:
        return _keep_dtype(special.i0(x), x)

    @staticmethod
    def i1(x: Any) -> Any:
        return _keep_dtype(special.i1(x), x)

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Any:
        out = np.where(cond, a, b)
        # keep the gradient's dtype when a branch is a Python scalar (np.where would widen)
        for x in (a, b):
            if isinstance(x, np.ndarray):
                return out.astype(x.dtype, copy=False)
        return out

    @staticmethod
    def sign(x: Any) -> Any:
        out = np.sign(x, out=np.empty_like(x))
        if out.dtype.kind == "f":
            out[np.isnan(out)] = 0  # sign(nan) = 0, as PyTorch
        return out

    @staticmethod
    def sigmoid(x: Any) -> Any:
        return special.expit(x)

    @staticmethod
    def cast(x: Any, np_dtype: Any) -> Any:
        return np.asarray(x).astype(np_dtype, copy=False)

    @staticmethod
    def clone(x: Any) -> Any:
        return np.array(x, copy=True)

    @staticmethod
    def sum(x: Any, dims: tuple[int, ...] | None, keepdim: bool = False) -> Any:
        return np.sum(x, axis=dims, keepdims=keepdim)

    @staticmethod
    def amax(x: Any, dims: tuple[int, ...] | None, keepdim: bool = False) -> Any:
        return np.amax(x, axis=dims, keepdims=keepdim)

    @staticmethod
    def sum_to(x: Any, shape: tuple[int, ...]) -> Any:
        return sum_to(np.asarray(x), tuple(shape))

    @staticmethod
    def expand(x: Any, shape: tuple[int, ...]) -> Any:
        return np.broadcast_to(x, shape)

    @staticmethod
    def reshape(x: Any, shape: tuple[int, ...]) -> Any:
        return np.reshape(x, shape)

    @staticmethod
    def permute(x: Any, dims: tuple[int, ...]) -> Any:
        return np.transpose(x, dims)

    @staticmethod
    def swapaxes(x: Any, a: int, b: int) -> Any:
        return np.swapaxes(x, a, b)

    @staticmethod
    def matmul(a: Any, b: Any) -> Any:
        return matmul(a, b)

    @staticmethod
    def zeros(shape: tuple[int, ...], like: Any) -> Any:
        return np.zeros(shape, dtype=np.asarray(like).dtype)

    @staticmethod
    def zeros_like(x: Any) -> Any:
        return np.zeros_like(x)

    @staticmethod
    def ones_like(x: Any) -> Any:
        return np.ones_like(x)

    @staticmethod
    def getitem(x: Any, index: Any) -> Any:
        return np.asarray(x)[index]

    @staticmethod
    def embedding_backward(g: Any, indices: Any, num_weights: int) -> Any:
        """Rows of g added into (num_weights, dim) zeros at their ids (duplicates add)."""
        return embedding_backward_forward(g, np.asarray(indices), num_weights)

    @staticmethod
    def embedding_rows(weight: Any, indices: Any) -> Any:
        """weight[indices]: the rows the ids name."""
        return np.asarray(weight)[np.asarray(indices)]

    @staticmethod
    def index_add_into(shape: tuple[int, ...], index: Any, values: Any) -> Any:
        """zeros(shape) with `values` added at `index`; duplicate indices accumulate."""
        out = np.zeros(shape, dtype=np.asarray(values).dtype)
        if isinstance(index, tuple) and all(
                i is None or i is Ellipsis or isinstance(i, (int, slice)) for i in index):
            out[index] = values  # each element selected once: a plain write is exact and faster
        else:
            np.add.at(out, index, values)
        return out

    @staticmethod
    def flip(x: Any, dims: tuple[int, ...]) -> Any:
        return np.flip(x, dims)

    @staticmethod
    def roll(x: Any, shifts: tuple[int, ...], dims: tuple[int, ...] | None) -> Any:
        return np.roll(x, shifts, axis=dims)

    @staticmethod
    def cat(arrays: list[Any], dim: int) -> Any:
        return np.concatenate(arrays, axis=dim)

    @staticmethod
    def prod(x: Any, dims: tuple[int, ...] | None, keepdim: bool = False) -> Any:
        return np.prod(x, axis=dims, keepdims=keepdim)

    @staticmethod
    def cumsum(x: Any, dim: int) -> Any:
        return scan_accumulating(np.add.accumulate, np.asarray(x), dim)

    @staticmethod
    def cumprod(x: Any, dim: int) -> Any:
        return scan_accumulating(np.multiply.accumulate, np.asarray(x), dim)

    @staticmethod
    def take_along_dim(x: Any, index: Any, dim: int) -> Any:
        """x's values at int `index` (same ndim as x) along `dim`."""
        return np.take_along_axis(x, index, axis=dim)

    @staticmethod
    def put_along_dim(shape: tuple[int, ...], dim: int, index: Any, values: Any) -> Any:
        """zeros(shape) with `values` written at `index` along `dim` (distinct per slice)."""
        out = np.zeros(shape, dtype=np.asarray(values).dtype)
        np.put_along_axis(out, index, values, axis=dim)
        return out

    @staticmethod
    def eye_mask(n: int, shape: tuple[int, ...]) -> Any:
        """bool identity of size n, reshaped to `shape` (n, n, 1, ...) for broadcasting."""
        return np.eye(n, dtype=np.bool_).reshape(shape)

    @staticmethod
    def einsum(equation: str, *operands: Any) -> Any:
        """numpy's einsum with explicit output subscripts (`"ij,jk->ik"`)."""
        return np.einsum(equation, *operands)

    @staticmethod
    def unfold2d(x: Any, kernel: tuple[int, int], stride: tuple[int, int],
                 dilation: tuple[int, int]) -> Any:
        """Windows of x (N, C, H, W) -> (N, OH, OW, C, kh, kw) (jitgrad.eager.ops.conv)."""
        return unfold_forward(np.asarray(x), kernel, stride, dilation)

    @staticmethod
    def fold2d(patches: Any, shape: tuple[int, ...], kernel: tuple[int, int],
               stride: tuple[int, int], dilation: tuple[int, int]) -> Any:
        """Windows (N, OH, OW, C, kh, kw) summed back into zeros of `shape` (N, C, H, W)."""
        return fold_forward(np.asarray(patches), shape, kernel, stride, dilation)


NUMPY = NumpyNamespace()


class TensorNamespace:
    """The same functions over jitgrad Tensors (recording history).

    Defined in `jitgrad.eager.xp_tensor`, which needs every op module (and they import
    this one), and set on TENSOR by `tensor_methods.install`.
    """


TENSOR: Any = TensorNamespace()

# names every namespace must provide (tests/eager/test_xp.py checks the Tensor side)
NAMES = tuple(name for name in vars(NumpyNamespace) if not name.startswith("_"))
