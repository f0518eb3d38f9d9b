"""Matrix products: matmul (`@`), mm, bmm, with numpy's (and PyTorch's) batching rules."""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager.ops._binary import cast_operands, result_dtype
from jitgrad.eager.ops.registry import apply_op, register
from jitgrad.eager.tensor import Tensor, as_tensor


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
    if len(a_shape) == 1:
        a = xp.reshape(a, (1, a_shape[0]))
        g = xp.reshape(g, g_shape_insert(ctx, -2))
    if len(b_shape) == 1:
        b = xp.reshape(b, (b_shape[0], 1))
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


MATMUL = register("matmul", np.matmul, _matmul_backward, inputs=("a", "b"), saves=("a", "b"),
                  source="Giles 2008, matrix derivative results")


def matmul(input: Any, other: Any) -> Tensor:
    """Matrix product with batching (`input @ other`).

    Shapes: (..., m, k) @ (..., k, n) -> (..., m, n); 1-D operands act as a row/column.
    Raises RuntimeError naming the inner dims when they differ, or on 0-d operands.
    """
    a, b = as_tensor(input), as_tensor(other)
    sa, sb = a._data.shape, b._data.shape
    if not sa or not sb:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{len(sa)}D and {len(sb)}D")
    k_a = sa[-1]
    k_b = sb[-2] if len(sb) >= 2 else sb[0]
    if k_a != k_b:
        rows = sa[-2] if len(sa) >= 2 else 1
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k_a} and "
            f"{k_b}x{sb[-1] if len(sb) >= 2 else 1}): the inner dims {k_a} and {k_b} differ "
            f"(shapes {list(sa)} and {list(sb)})")
    if a._data.dtype == b._data.dtype:
        arrays = (a._data, b._data)
    else:
        arrays = cast_operands((a, b), result_dtype(a, b).np)
    try:
        return apply_op(MATMUL, (a, b), arrays)
    except ValueError:
        raise RuntimeError(f"matmul: batch dims of shapes {list(sa)} and {list(sb)} do not "
                           "broadcast") from None


__all__ = ["matmul"]

METHODS = {"matmul": matmul, "__matmul__": matmul,
           "__rmatmul__": lambda self, other: matmul(other, self)}
