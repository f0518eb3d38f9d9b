"""Pointwise ops: arithmetic with broadcasting, unary math, activations, comparisons.

Every op's derivative is the textbook one unless a source is given; edge conventions
(abs'(0)=0, relu'(0)=0, clamp inclusive, maximum ties 0.5/0.5) are PyTorch's, as
measured in research/eager_autograd.md §2.2-2.4.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager.ops._binary import binary, unary
from jitgrad.eager.ops.registry import register
from jitgrad.eager.tensor import Tensor

# ----- arithmetic -------------------------------------------------------------------


def _add_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return g, g


def _sub_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return g, (-g if ctx.needs_input_grad[1] else None)


def _mul_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    return (g * b if need_a else None), (g * a if need_b else None)


def _div_backward(xp: Any, ctx: Any, g: Any, a: Any, b: Any) -> tuple:
    need_a, need_b = ctx.needs_input_grad
    return (g / b if need_a else None), (-g * a / (b * b) if need_b else None)


AB = ("a", "b")
ADD = register("add", np.add, _add_backward, inputs=AB, source="d(a+b) = da + db")
SUB = register("sub", np.subtract, _sub_backward, inputs=AB, source="d(a-b) = da - db")
MUL = register("mul", np.multiply, _mul_backward, inputs=AB, saves=AB, source="product rule")
DIV = register("div", np.true_divide, _div_backward, inputs=AB, saves=AB,
               source="quotient rule")


def add(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """input + alpha * other, broadcasting. Raises RuntimeError on incompatible shapes."""
    if alpha != 1:
        other = mul(other, alpha)
    return binary(ADD, input, other)


def sub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """input - alpha * other, broadcasting."""
    if alpha != 1:
        other = mul(other, alpha)
    return binary(SUB, input, other)


def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """other - alpha * input."""
    return sub(other, input, alpha=alpha)


def mul(input: Any, other: Any) -> Tensor:
    """Elementwise product with broadcasting."""
    return binary(MUL, input, other)


def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """True division (integers give the default float dtype); or floor/trunc rounding."""
    if rounding_mode is None:
        return binary(DIV, input, other, to_float=True)
    from jitgrad.eager.ops import pointwise_more

    return pointwise_more.div_rounding(input, other, rounding_mode)


true_divide = divide = div
multiply = mul
subtract = sub

# ----- unary math -------------------------------------------------------------------


def _neg_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    return (-g,)


def _exp_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g * out,)


def _log_backward(xp: Any, ctx: Any, g: Any, x: Any) -> tuple:
    return (g / x,)


def _tanh_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g * (1 - out * out),)


def _relu_backward(xp: Any, ctx: Any, g: Any, out: Any) -> tuple:
    return (g * (out > 0),)  # relu'(0) = 0, as PyTorch


X = ("x",)
NEG = register("neg", np.negative, _neg_backward, inputs=X, source="d(-x) = -dx")
EXP = register("exp", np.exp, _exp_backward, inputs=X, saves=("out",), source="d/dx e^x = e^x")
LOG = register("log", np.log, _log_backward, inputs=X, saves=X, source="d/dx ln x = 1/x")
TANH = register("tanh", np.tanh, _tanh_backward, inputs=X, saves=("out",),
                source="tanh' = 1 - tanh^2")
RELU = register("relu", lambda x: np.maximum(x, x.dtype.type(0)), _relu_backward,
                saves=("out",), source="relu'(x) = [x > 0]")


def neg(input: Tensor) -> Tensor:
    return unary(NEG, input)


negative = neg


def exp(input: Tensor) -> Tensor:
    """e^x elementwise; integer inputs give the default float dtype."""
    return unary(EXP, input, to_float=True)


def log(input: Tensor) -> Tensor:
    """Natural logarithm; log(0) = -inf, negative inputs give NaN (as PyTorch)."""
    return unary(LOG, input, to_float=True)


def tanh(input: Tensor) -> Tensor:
    return unary(TANH, input, to_float=True)


def relu(input: Tensor) -> Tensor:
    """max(x, 0) elementwise."""
    return unary(RELU, input)


__all__ = ["add", "sub", "rsub", "mul", "div", "true_divide", "divide", "multiply", "subtract",
           "neg", "negative", "exp", "log", "tanh", "relu"]

# Tensor methods defined by this module (installed by jitgrad.eager.tensor_methods)
METHODS = {
    "add": add, "sub": sub, "mul": mul, "div": div, "true_divide": div, "divide": div,
    "multiply": mul, "subtract": sub, "neg": neg, "negative": neg, "exp": exp, "log": log,
    "tanh": tanh, "relu": relu,
    "__add__": add, "__radd__": lambda self, other: add(other, self),
    "__sub__": sub, "__rsub__": lambda self, other: sub(other, self),
    "__mul__": mul, "__rmul__": lambda self, other: mul(other, self),
    "__truediv__": div, "__rtruediv__": lambda self, other: div(other, self),
    "__neg__": neg, "__pos__": lambda self: self,
}
