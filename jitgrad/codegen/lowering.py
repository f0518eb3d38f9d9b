"""Scalar lowerings of pointwise ops: per OpDef, the expression one element computes.

`LOWERINGS[op](e, args, **params)` returns Python source for one element of `op`'s
output, given its operands as source text (`args`: local names inside the kernel loop,
or literals for Python numbers; None for absent optional operands such as clamp's
bounds). `e` is the `Emitter` of that node: `e.const(v)` writes a literal in the node's
compute dtype (so `x * 2.0` stays float32, as numpy's weak scalars do), `e.call(name, x)`
calls a math function: the vectorizable one of jitgrad/codegen/mathlib.py for that dtype
where it has one (`mathlib.exp_f32(...)`; the kernel module imports `mathlib`), else
numba's `math.<name>` (a scalar libm call; DESIGN.md, Codegen). The kernel casts each
node's value to the node's output dtype, so a lowering need not. A lowering returns None
when it cannot lower this particular call (e.g. pow on integers); the node then runs as
an extern.

NaN semantics are numpy's: maximum/minimum/clamp propagate NaN (see `_maximum`), and
kernels compile without fast-math flags (Note [No fast-math in pointwise code] in kernels.py).
Sources of the formulas: the eager forwards in jitgrad/eager/ops (pointwise.py,
activation.py, comparison.py), which these mirror expression by expression.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from jitgrad.codegen.mathlib import FUNCTIONS
from jitgrad.eager.ops.registry import OPS, OpDef
from jitgrad.trace.graph import Node

# numpy dtypes a kernel computes in; float16 (no numba arithmetic) stays an extern
KERNEL_DTYPES = frozenset(np.dtype(n) for n in (
    "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"))

# math-module functions numba compiles for float32 and float64 scalars
MATH_FUNCTIONS = frozenset({"exp", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin",
                            "cos", "tan", "tanh", "erf"})
# integer exponents x**c expands to products (mathlib's pow is for other float exponents)
PRODUCT_EXPONENTS = frozenset({2, 3, 4})


class Emitter:
    """What a lowering needs to write one node's expression.

    dtype: the compute dtype of the node's operands (the first non-bool tensor operand's
    dtype, else the output's): literals are written in it.
    """

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype

    def const(self, value: Any) -> str:
        """A literal of `value` in the compute dtype (`np.float32(0.5)`, `np.float32(np.inf)`,
        `np.int8(1)` for True): numpy converts a Python number to the array's dtype before the
        op, so a bool literal is not left for numba to promote (`x_f32 + True`).

        An integer outside the dtype's range stays int64: eager raises OverflowError for
        arithmetic with it, and its comparisons are exact (numpy: `int8 < 200` is True)."""
        if self.dtype.kind == "b":
            return repr(bool(value))
        if self.dtype.kind in "iu":
            if isinstance(value, float) and not value.is_integer():
                return f"np.float64({value!r})"
            value = int(value)
            info = np.iinfo(self.dtype)
            return f"np.{self.dtype.name if info.min <= value <= info.max else 'int64'}({value})"
        value = float(value)
        text = repr(value) if math.isfinite(value) else \
            ("np.nan" if math.isnan(value) else ("np.inf" if value > 0 else "-np.inf"))
        return f"np.{self.dtype.name}({text})"

    def call(self, name: str, *args: str) -> str:
        """`name(*args)` in the compute dtype: mathlib's function `FUNCTIONS[(name, dtype)]`
        (arguments cast to the dtype, so a mixed-dtype operand does not make numba compile
        another specialization), else `math.<name>` (see MATH_FUNCTIONS)."""
        function = FUNCTIONS.get((name, self.dtype))
        if function is not None:
            cast = ", ".join(f"np.{self.dtype.name}({a})" for a in args)
            return f"mathlib.{function.__name__}({cast})"
        assert name in MATH_FUNCTIONS, f"no kernel math function {name} for {self.dtype}"
        return f"math.{name}({', '.join(args)})"


Lowering = Callable[..., "str | None"]
LOWERINGS: dict[OpDef, Lowering] = {}


def lowers(*names: str) -> Callable[[Lowering], Lowering]:
    """Register the decorated function as the lowering of the ops `names`."""
    def decorate(fn: Lowering) -> Lowering:
        for name in names:
            LOWERINGS[OPS[name]] = fn
        return fn
    return decorate


def _maximum(a: str, b: str) -> str:
    # eager's (PyTorch's) maximum: NaN in either operand gives NaN; of equal operands
    # (-0.0, 0.0), a
    return f"({b} if ({b} > {a} or {b} != {b}) else {a})"


def _minimum(a: str, b: str) -> str:
    return f"({b} if ({b} < {a} or {b} != {b}) else {a})"


def _binary_operator(symbol: str) -> Lowering:
    return lambda e, a, b: f"({a} {symbol} {b})"


for _name, _symbol in (("add", "+"), ("sub", "-"), ("mul", "*"), ("eq", "=="), ("ne", "!="),
                       ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">=")):
    LOWERINGS[OPS[_name]] = _binary_operator(_symbol)


@lowers("div")
def _div(e: Emitter, a: str, b: str) -> str | None:
    # in the result dtype and correctly rounded, as numpy's: kernels have no "arcp", so
    # `x / 7.0` stays a division (Note [No fast-math in pointwise code] in kernels.py)
    if e.dtype.kind != "f":
        return None
    return f"(np.{e.dtype.name}({a}) / np.{e.dtype.name}({b}))"


def _math(name: str) -> Lowering:
    return lambda e, x: e.call(name, x) if e.dtype.kind == "f" else None


for _name in MATH_FUNCTIONS:
    LOWERINGS[OPS[_name]] = _math(_name)


@lowers("neg")
def _neg(e: Emitter, x: str) -> str:
    return f"(-{x})"


@lowers("abs")
def _abs(e: Emitter, x: str) -> str:
    return f"abs({x})"


@lowers("rsqrt")
def _rsqrt(e: Emitter, x: str) -> str | None:
    return e.call("rsqrt", x) if e.dtype.kind == "f" else None


@lowers("reciprocal")
def _reciprocal(e: Emitter, x: str) -> str | None:
    return f"({e.const(1)} / {x})" if e.dtype.kind == "f" else None


for _name in ("floor", "ceil", "trunc"):
    # integers are returned unchanged by the eager forward
    LOWERINGS[OPS[_name]] = (lambda fn: lambda e, x: f"np.{fn}({x})" if e.dtype.kind == "f"
                             else x)(_name)


@lowers("relu")
def _relu(e: Emitter, x: str) -> str:
    return _maximum(x, e.const(0))  # NaN stays NaN, relu(-0.0) is -0.0 (PyTorch)


@lowers("sigmoid")
def _sigmoid(e: Emitter, x: str) -> str | None:
    if e.dtype.kind != "f":
        return None
    return e.call("sigmoid", x)


@lowers("silu")
def _silu(e: Emitter, x: str) -> str | None:
    if e.dtype.kind != "f":
        return None
    return f"({x} / ({e.const(1)} + {e.call('exp', f'(-{x})')}))"


@lowers("gelu")
def _gelu(e: Emitter, x: str, approximate: str) -> str | None:
    if e.dtype.kind != "f":
        return None
    if approximate == "tanh":
        inner = f"{e.const(math.sqrt(2.0 / math.pi))} * ({x} + {e.const(0.044715)} * " \
                f"({x} * {x} * {x}))"
        return f"({e.const(0.5)} * {x} * ({e.const(1)} + {e.call('tanh', inner)}))"
    erf = e.call("erf", f"{x} * {e.const(math.sqrt(0.5))}")
    return f"({x} * {e.const(0.5)} * ({e.const(1)} + {erf}))"


@lowers("leaky_relu")
def _leaky_relu(e: Emitter, x: str, negative_slope: float) -> str:
    return f"({x} if {x} > {e.const(0)} else {x} * {e.const(negative_slope)})"


@lowers("elu")
def _elu(e: Emitter, x: str, alpha: float) -> str | None:
    if e.dtype.kind != "f":
        return None
    return f"({x} if {x} > {e.const(0)} else {e.const(alpha)} * {e.call('expm1', x)})"


@lowers("softplus")
def _softplus(e: Emitter, x: str, beta: float, threshold: float) -> str | None:
    if e.dtype.kind != "f":
        return None
    scaled = f"({x} * {e.const(beta)})"
    soft = f"{e.call('log1p', e.call('exp', scaled))} / {e.const(beta)}"
    return f"({x} if {scaled} > {e.const(threshold)} else {soft})"


@lowers("logsigmoid")
def _logsigmoid(e: Emitter, x: str) -> str | None:
    if e.dtype.kind != "f":
        return None
    tail = e.call("log1p", e.call("exp", f"(-abs({x}))"))
    return f"({_minimum(x, e.const(0))} - {tail})"


@lowers("hardtanh")
def _hardtanh(e: Emitter, x: str, min_val: float, max_val: float) -> str:
    return _minimum(_maximum(x, e.const(min_val)), e.const(max_val))


@lowers("maximum")
def _maximum_op(e: Emitter, a: str, b: str) -> str:
    return _maximum(a, b)


@lowers("minimum")
def _minimum_op(e: Emitter, a: str, b: str) -> str:
    return _minimum(a, b)


@lowers("clamp")
def _clamp(e: Emitter, x: str, min: str | None, max: str | None) -> str:  # noqa: A002
    out = x if min is None else _maximum(x, min)
    return out if max is None else _minimum(out, max)


@lowers("where")
def _where(e: Emitter, condition: str, a: str, b: str) -> str:
    return f"({a} if {condition} else {b})"


@lowers("masked_fill")
def _masked_fill(e: Emitter, x: str, mask: str, value: str) -> str:
    return f"({value} if {mask} else {x})"


for _name, _symbol in (("logical_and", "&"), ("logical_or", "|"), ("logical_xor", "!=")):
    LOWERINGS[OPS[_name]] = (lambda s: lambda e, a, b: f"(({a} != 0) {s} ({b} != 0))")(_symbol)


@lowers("logical_not")
def _logical_not(e: Emitter, x: str) -> str:
    return f"({x} == 0)"


@lowers("detach")
def _detach(e: Emitter, x: str) -> str:
    return x  # a stop-gradient: the value unchanged


@lowers("to_dtype")
def _to_dtype(e: Emitter, x: str, np_dtype: np.dtype) -> str:
    # the kernel's cast to the output dtype converts; bool needs a comparison
    return f"({x} != 0)" if np.dtype(np_dtype).kind == "b" else x


@lowers("pow")
def _pow(e: Emitter, x: str, exponent: Any) -> str | None:
    if e.dtype.kind != "f" or isinstance(exponent, bool):
        return None
    if exponent in PRODUCT_EXPONENTS:
        return "(" + " * ".join([x] * int(exponent)) + ")"
    if exponent == 0.5:
        return e.call("sqrt", x)
    if exponent == -0.5:  # eager's rsqrt (PyTorch's): -inf at -0.0
        return f"(1.0 / {e.call('sqrt', x)})"
    return e.call("pow", x, e.const(exponent))


def is_lowerable(op: Any) -> bool:
    """Whether `op` (a graph node's target) has a scalar lowering."""
    return isinstance(op, OpDef) and op in LOWERINGS


def lower_node(node: Node, names: dict[Node, str]) -> str | None:
    """The expression of one element of a pointwise graph node, or None if it declines.

    names: the kernel local holding each Node operand (operands missing from it are
    written as `_`, enough to ask whether the node lowers at all).
    """
    lowering = LOWERINGS[node.target]
    emitter = Emitter(compute_dtype(node))
    args = [names.get(a, "_") if isinstance(a, Node) else
            (None if a is None else emitter.const(a)) for a in node.args]
    return lowering(emitter, *args, **node.kwargs)


def compute_dtype(node: Node) -> np.dtype:
    """The dtype literals of `node` take: its first non-bool tensor operand's, else its own."""
    for arg in node.args:
        if isinstance(arg, Node):
            dtype = arg.meta["val"].dtype.np
            if dtype.kind != "b":
                return dtype
    return node.meta["val"].dtype.np
