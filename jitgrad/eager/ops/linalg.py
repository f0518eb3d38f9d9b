"""Matrix products: matmul (`@`), mm, bmm, dot, outer, addmm, baddbmm, linear, einsum.

matmul follows numpy's (and PyTorch's) batching rules; mm/bmm/dot check the ranks
PyTorch requires and then run matmul; `linear` is its own op (x @ W^T + b, one node).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager.ops import pointwise, shape
from jitgrad.eager.ops._binary import as_tensor
from jitgrad.eager.ops.einsum import einsum
from jitgrad.eager.ops.pointwise import C_TYPE_NAMES, SCALAR_TYPE_NAMES
from jitgrad.eager.ops.reduction import reduced_count
from jitgrad.eager.ops.registry import apply_op, register
from jitgrad.eager.tensor import Tensor
from jitgrad.eager.xp import matmul as np_matmul


def _matmul_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    """Gradients of out = a @ b, with 1-D operands promoted as numpy does.

    Shapes: a (..., m, k), b (..., k, n), g (..., m, n) -> grad_a = g @ b^T,
    grad_b = a^T @ g (Giles 2008, "Collected matrix derivative results"); batch
    broadcasting is summed away by the engine.
    """
    a_shape, b_shape = ctx.input_metadata[0][0], ctx.input_metadata[1][0]
    need_a, need_b = ctx.needs_input_grad
    if len(a_shape) == 1 and len(b_shape) == 1:
        return (g * b if need_a else None), (g * a if need_b else None)
    # a is saved only for b's gradient and b only for a's (saved_for below)
    if len(a_shape) == 1:
        a = xp.reshape(a, (1, a_shape[0])) if need_b else None
        g = xp.reshape(g, g_shape_insert(ctx, -2))
    if len(b_shape) == 1:
        b = xp.reshape(b, (b_shape[0], 1)) if need_a else None
        g = xp.reshape(g, g_shape_insert(ctx, -1))
    grad_a = grad_b = None
    if need_a:
        grad_a = xp.matmul(g, xp.swapaxes(b, -1, -2))
        if len(a_shape) == 1:
            grad_a = xp.sum_to(grad_a, (1, a_shape[0]))
            grad_a = xp.reshape(grad_a, a_shape)
    if need_b:
        grad_b = xp.matmul(xp.swapaxes(a, -1, -2), g)
        if len(b_shape) == 1:
            grad_b = xp.sum_to(grad_b, (b_shape[0], 1))
            grad_b = xp.reshape(grad_b, b_shape)
    return grad_a, grad_b


def g_shape_insert(ctx: Any, axis: int) -> tuple[int, ...]:
    """The output shape with the dim a 1-D operand lost re-inserted at `axis`."""
    shape = list(np.broadcast_shapes(*_batch_shapes(ctx))) + _matrix_dims(ctx)
    return tuple(shape[:len(shape) + axis + 1] + [1] + shape[len(shape) + axis + 1:])


def _batch_shapes(ctx: Any) -> tuple[tuple[int, ...], ...]:
    a_shape, b_shape = ctx.input_metadata[0][0], ctx.input_metadata[1][0]
    return a_shape[:-2], b_shape[:-2]


def _matrix_dims(ctx: Any) -> list[int]:
    a_shape, b_shape = ctx.input_metadata[0][0], ctx.input_metadata[1][0]
    dims = []
    if len(a_shape) >= 2:
        dims.append(a_shape[-2])
    if len(b_shape) >= 2:
        dims.append(b_shape[-1])
    return dims


MATMUL = register("matmul", np_matmul, _matmul_backward, inputs=("a", "b"), saves=("a", "b"),
                  saved_for={"a": "b", "b": "a"},
                  source="Giles 2008, matrix derivative results")


def matmul(input: Any, other: Any) -> Tensor:
    """Matrix product with batching (`input @ other`).

    Shapes: (..., m, k) @ (..., k, n) -> (..., m, n); 1-D operands act as a row/column.
    Dtypes: both operands must have the same dtype (no promotion, as in PyTorch).
    Raises RuntimeError naming the inner dims when they differ, on 0-d operands, or when
    the dtypes differ; NotImplementedError for bool operands.
    """
    a, b = as_tensor(input), as_tensor(other)
    sa, sb = a._data.shape, b._data.shape
    if not sa or not sb:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{len(sa)}D and {len(sb)}D")
    k_a = sa[-1]
    k_b = sb[-2] if len(sb) >= 2 else sb[0]
    if k_a != k_b:
        if len(sa) == 1 and len(sb) == 1:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{k_a}] and src "
                               f"[{k_b}] to have the same number of elements, but got {k_a} and "
                               f"{k_b} elements respectively")
        rows = sa[-2] if len(sa) >= 2 else 1
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k_a} and "
            f"{k_b}x{sb[-1] if len(sb) >= 2 else 1}): the inner dims {k_a} and {k_b} differ "
            f"(shapes {list(sa)} and {list(sb)})")
    check_same_dtype(a._data.dtype, b._data.dtype)
    if a._data.dtype.kind == "b":  # PyTorch has no bool BLAS kernel
        if len(sa) == 1 and len(sb) == 1:
            raise pointwise.not_implemented_for("dot", a._data.dtype)
        if k_a and 0 not in sa[:-1] and 0 not in sb[:-2] + sb[-1:]:  # it runs only if
            raise pointwise.not_implemented_for("addmm_impl_cpu_", a._data.dtype)  # non-empty
    try:
        return apply_op(MATMUL, (a, b), (a._data, b._data))
    except ValueError:
        raise RuntimeError(f"matmul: batch dims of shapes {list(sa)} and {list(sb)} do not "
                           "broadcast") from None


def check_same_dtype(m1: np.dtype, m2: np.dtype) -> None:
    """Matrix products do not promote: PyTorch raises when the operand dtypes differ.

    Raises RuntimeError with PyTorch's text ("expected m1 and m2 to have the same dtype, but
    got: float != double") plus a hint, e.g. for a float64 numpy batch fed to a float32 model.
    """
    if m1 != m2:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{C_TYPE_NAMES[m1.name]} != {C_TYPE_NAMES[m2.name]}; cast one "
                           f"operand first, e.g. x.to(w.dtype) or x.float()")


def _is_matrix(name: str, t: Tensor, ndim: int, what: str) -> None:
    if t._data.ndim != ndim:
        raise RuntimeError(f"{name} must be a {what} (got a {t._data.ndim}-D tensor of shape "
                           f"{list(t._data.shape)})")


def mm(input: Any, mat2: Any) -> Tensor:
    """Matrix product of two 2-D tensors: (n, m) @ (m, p) -> (n, p).

    Raises RuntimeError "self must be a matrix" / "mat2 must be a matrix" for other ranks
    and when the inner dims differ.
    """
    a, b = as_tensor(input), as_tensor(mat2)
    _is_matrix("self", a, 2, "matrix")
    _is_matrix("mat2", b, 2, "matrix")
    return matmul(a, b)


def bmm(input: Any, mat2: Any) -> Tensor:
    """Batched matrix product: (b, n, m) @ (b, m, p) -> (b, n, p), no batch broadcasting.

    Raises RuntimeError for non-3-D operands or mismatched batch/inner sizes.
    """
    a, b = as_tensor(input), as_tensor(mat2)
    _is_matrix("batch1", a, 3, "3D tensor")
    _is_matrix("batch2", b, 3, "3D tensor")
    sa, sb = a._data.shape, b._data.shape
    if sb[0] != sa[0] or sb[1] != sa[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{sa[0]}, {sa[2]}] but got: [{sb[0]}, {sb[1]}] (shapes {list(sa)} "
                           f"and {list(sb)})")
    return matmul(a, b)


def dot(input: Any, other: Any) -> Tensor:
    """Inner product of two 1-D tensors of the same length (a 0-d result)."""
    a, b = as_tensor(input), as_tensor(other)
    if a._data.ndim != 1 or b._data.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a._data.ndim}D and {b._data.ndim}D "
                           "tensors")
    if a._data.shape != b._data.shape:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a._data.shape[0]}] and "
                           f"src [{b._data.shape[0]}] to have the same number of elements, but "
                           f"got {a._data.shape[0]} and {b._data.shape[0]} elements respectively")
    return matmul(a, b)


def outer(input: Any, vec2: Any) -> Tensor:
    """Outer product of two 1-D tensors: (n,), (m,) -> (n, m)."""
    a, b = as_tensor(input), as_tensor(vec2)
    if a._data.ndim != 1 or b._data.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D tensors, got shapes {list(a._data.shape)} and "
                           f"{list(b._data.shape)}; flatten them first")
    return pointwise.mul(shape.reshape(a, -1, 1), b)


def addmm(input: Any, mat1: Any, mat2: Any, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """beta * input + alpha * (mat1 @ mat2); input broadcasts to (n, p).

    With beta=0, `input` is ignored (its NaNs do not propagate), as in PyTorch.
    """
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


def baddbmm(input: Any, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """beta * input + alpha * bmm(batch1, batch2); input broadcasts to (b, n, p)."""
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


def _scaled_sum(input: Any, product: Tensor, beta: Any, alpha: Any) -> Tensor:
    if alpha != 1:
        product = pointwise.mul(product, alpha)
    if beta == 0:
        return product
    return pointwise.add(product, input if beta == 1 else pointwise.mul(input, beta))


def _linear_forward(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    out = np_matmul(x, weight.T)
    return out if bias is None else out + bias


def _linear_backward(xp: Any, ctx: Any, g: Any, x: Any, weight: Any) -> tuple:
    """x (..., in), W (out, in), g (..., out): grad_x = g @ W, grad_W = g^T x summed over
    the batch, grad_b = g (summed to (out,) by the engine)."""
    need_x, need_w, need_b = ctx.needs_input_grad
    out_features, in_features = ctx.input_metadata[1][0]
    grad_x = xp.matmul(g, weight) if need_x else None
    grad_w = None
    if need_w:
        rows = reduced_count(ctx.input_metadata[0][0][:-1], None)
        grad_w = xp.matmul(xp.swapaxes(xp.reshape(g, (rows, out_features)), 0, 1),
                           xp.reshape(x, (rows, in_features)))
    return grad_x, grad_w, (g if need_b else None)


LINEAR = register("linear", _linear_forward, _linear_backward, saves=("x", "weight"),
                  saved_for={"x": "weight", "weight": "x"},
                  source="Giles 2008 (matmul rule) with W stored (out, in)")


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight^T + bias, with weight stored (out_features, in_features).

    Shapes: input (..., in), weight (out, in), bias (out,) -> (..., out).
    Raises RuntimeError when the feature sizes differ, weight is not 2-D, or the dtypes
    of input, weight and bias differ (no promotion, as in PyTorch).
    """
    x, w = input._data, weight._data
    if w.ndim != 2:
        raise RuntimeError(f"linear: weight must be 2-D (out_features, in_features), got shape "
                           f"{list(w.shape)}")
    if not x.ndim or x.shape[-1] != w.shape[1]:
        rows = reduced_count(x.shape[:-1], None) if x.ndim else 1
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x"
                           f"{x.shape[-1] if x.ndim else 1} and {w.shape[1]}x{w.shape[0]}): "
                           f"input has {x.shape[-1] if x.ndim else 0} features, weight "
                           f"{list(w.shape)} expects {w.shape[1]}")
    check_same_dtype(x.dtype, w.dtype)
    if bias is not None and bias._data.dtype != w.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{SCALAR_TYPE_NAMES[bias._data.dtype.name]} and "
                           f"{SCALAR_TYPE_NAMES[w.dtype.name]} (bias and weight); cast the bias "
                           f"with bias.to(weight.dtype)")
    return apply_op(LINEAR, (input, weight, bias), (x, w, None if bias is None else bias._data))


__all__ = ["matmul", "mm", "bmm", "dot", "outer", "addmm", "baddbmm", "einsum"]

METHODS = {"matmul": matmul, "__matmul__": matmul,
           "__rmatmul__": lambda self, other: matmul(other, self),
           "mm": mm, "bmm": bmm, "dot": dot, "outer": outer, "addmm": addmm,
           "baddbmm": baddbmm}
