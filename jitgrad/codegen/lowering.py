"""Scalar lowerings of pointwise ops: per OpDef, the expression one element computes.

Every lowering comes from the op's declared scalar form (`OpDef.scalar`, Note [Declaring an
op once] in jitgrad/eager/ops/declare.py): `scalar_lowering` evaluates the form with a
`ScalarNamespace` over `Scalar` operands, which write source text instead of computing.
There is no table of lowerings written here, and no switch over op names.

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

NaN semantics are eager's: maximum/minimum/clamp propagate NaN and keep the first operand
of equal ones (-0.0 and 0.0; see `ScalarNamespace.maximum`), and kernels compile without
fast-math flags (Note [No fast-math in pointwise code] in kernels.py). Each scalar form
mirrors its op's eager forward expression by expression; tests/codegen/test_dtypes.py
checks every lowered op against eager in every kernel dtype at edge values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from jitgrad.codegen.mathlib import FUNCTIONS
from jitgrad.eager.ops.registry import OPS, OpDef
from jitgrad.trace.ir.graph import Node

# numpy dtypes a kernel computes in; float16 (no numba arithmetic) stays an extern
KERNEL_DTYPES = frozenset(np.dtype(n) for n in (
    "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"))

# math-module functions numba compiles for float32 and float64 scalars (numba's documented
# list of supported `math` functions, the float-valued ones)
MATH_FUNCTIONS = frozenset({
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "copysign", "cos", "cosh",
    "erf", "erfc", "exp", "expm1", "fabs", "gamma", "hypot", "lgamma", "log", "log10",
    "log1p", "log2", "pow", "sin", "sinh", "sqrt", "tan", "tanh"})
# numpy functions numba compiles for scalars, written `np.<name>(x)`
ROUNDING_FUNCTIONS = frozenset({"floor", "ceil", "trunc"})
# integer exponents x**c expands to products (mathlib's pow is for other float exponents)
PRODUCT_EXPONENTS = frozenset({2, 3, 4})


class Emitter:
    """What a lowering needs to write one node's expression.

    dtype: the compute dtype of the node's operands (the first non-bool tensor operand's
    dtype, else the output's): literals are written in it.
    """

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype
        self.calls_math = False  # set by `call`: the expression calls a math function

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
        another specialization), else `math.<name>` (see MATH_FUNCTIONS).

        Raises NotLowerableError for a function kernels lack (the form then declines)."""
        self.calls_math = True
        function = FUNCTIONS.get((name, self.dtype))
        cast = ", ".join(f"np.{self.dtype.name}({a})" for a in args)
        if function is not None:
            return f"mathlib.{function.__name__}({cast})"
        if name not in MATH_FUNCTIONS:
            raise NotLowerableError(f"no kernel math function {name} for {self.dtype}")
        # cast as well: numba would compute bool or integer operands in float64, not in the
        # compute dtype eager's numpy casts them to
        return f"math.{name}({cast})"


class NotLowerableError(Exception):
    """A scalar form calls a function kernels do not have: the op runs as an extern."""


Lowering = Callable[..., "str | None"]


class Scalar:
    """One operand of a scalar form while it is lowered: the source text of its value.

    Operators build the text of the operation, in the order written (kernels do not
    reassociate, Note [No fast-math in pointwise code] in kernels.py); Python numbers
    become literals of the compute dtype.
    """

    __slots__ = ("text", "emitter", "literal")
    __hash__ = None  # type: ignore[assignment]  # == builds an expression, so no hash

    def __init__(self, text: str, emitter: Emitter, literal: bool = False) -> None:
        self.text = text
        self.emitter = emitter
        self.literal = literal

    def wrap(self, value: Any) -> Scalar:
        return value if isinstance(value, Scalar) else \
            Scalar(self.emitter.const(value), self.emitter, True)

    def _operator(self, symbol: str, other: Any, reflected: bool = False) -> Scalar:
        a, b = (self.wrap(other), self) if reflected else (self, self.wrap(other))
        return Scalar(f"({a.text} {symbol} {b.text})", self.emitter)

    def _wrapping(self, symbol: str, other: Any, reflected: bool = False) -> Scalar:
        """+, - or * as numpy computes it: signed integers wrap on overflow. numba's
        signed integer arithmetic is `nsw` (overflow is undefined: LLVM folded `x + -2**63`
        into `x | -2**63`), so it is computed on the same bits as uint64, which wraps."""
        if self.emitter.dtype.kind != "i":
            return self._operator(symbol, other, reflected)
        a, b = (self.wrap(other), self) if reflected else (self, self.wrap(other))
        return Scalar(f"np.int64(np.uint64({a.text}) {symbol} np.uint64({b.text}))",
                      self.emitter)

    def __add__(self, other: Any) -> Scalar:
        return self._wrapping("+", other)

    def __radd__(self, other: Any) -> Scalar:
        return self._wrapping("+", other, True)

    def __sub__(self, other: Any) -> Scalar:
        return self._wrapping("-", other)

    def __rsub__(self, other: Any) -> Scalar:
        return self._wrapping("-", other, True)

    def __mul__(self, other: Any) -> Scalar:
        return self._wrapping("*", other)

    def __rmul__(self, other: Any) -> Scalar:
        return self._wrapping("*", other, True)

    def __truediv__(self, other: Any) -> Scalar:
        return _divide(self, self.wrap(other))

    def __rtruediv__(self, other: Any) -> Scalar:
        return _divide(self.wrap(other), self)

    def __neg__(self) -> Scalar:
        if self.emitter.dtype.kind == "i":  # -(-2**63) wraps, as numpy's (see `_wrapping`)
            return Scalar(f"np.int64(-np.uint64({self.text}))", self.emitter)
        return Scalar(f"(-{self.text})", self.emitter)

    def __gt__(self, other: Any) -> Scalar:  # type: ignore[override]
        return self._operator(">", other)

    def __lt__(self, other: Any) -> Scalar:  # type: ignore[override]
        return self._operator("<", other)

    def __ge__(self, other: Any) -> Scalar:  # type: ignore[override]
        return self._operator(">=", other)

    def __le__(self, other: Any) -> Scalar:  # type: ignore[override]
        return self._operator("<=", other)

    def __eq__(self, other: Any) -> Scalar:  # type: ignore[override]
        return self._operator("==", other)

    def __ne__(self, other: Any) -> Scalar:  # type: ignore[override]
        return self._operator("!=", other)

    def __and__(self, other: Any) -> Scalar:
        return self._operator("&", other)

    def __or__(self, other: Any) -> Scalar:
        return self._operator("|", other)


def _divide(a: Scalar, b: Scalar) -> Scalar:
    # in the compute dtype and correctly rounded, as numpy's: kernels have no "arcp", so
    # `x / 7.0` stays a division (Note [No fast-math in pointwise code] in kernels.py)
    cast = f"np.{a.emitter.dtype.name}"
    texts = [v.text if v.literal else f"{cast}({v.text})" for v in (a, b)]
    return Scalar(f"({texts[0]} / {texts[1]})", a.emitter)


class ScalarNamespace:
    """The `s` of a scalar form (Note [Declaring an op once] in jitgrad/eager/ops/declare.py):
    selections and math functions over `Scalar`s, written for one node's compute dtype."""

    def __init__(self, emitter: Emitter) -> None:
        self.emitter = emitter
        self.is_float = emitter.dtype.kind == "f"

    def _wrap(self, value: Any) -> Scalar:
        return value if isinstance(value, Scalar) else \
            Scalar(self.emitter.const(value), self.emitter, True)

    def where(self, condition: Any, a: Any, b: Any) -> Scalar:
        c, a, b = (self._wrap(v) for v in (condition, a, b))
        return Scalar(f"({a.text} if {c.text} else {b.text})", self.emitter)

    def maximum(self, a: Any, b: Any) -> Scalar:
        # eager's (PyTorch's) maximum: NaN in either operand gives NaN; of equal operands
        # (-0.0, 0.0), a
        a, b = self._wrap(a).text, self._wrap(b).text
        return Scalar(f"({b} if ({b} > {a} or {b} != {b}) else {a})", self.emitter)

    def minimum(self, a: Any, b: Any) -> Scalar:
        a, b = self._wrap(a).text, self._wrap(b).text
        return Scalar(f"({b} if ({b} < {a} or {b} != {b}) else {a})", self.emitter)

    def abs(self, x: Scalar) -> Scalar:
        return Scalar(f"abs({x.text})", self.emitter)

    def pow(self, x: Scalar, exponent: Any) -> Scalar:
        """x ** exponent: small integer exponents as products, 0.5 as sqrt, else mathlib."""
        if not isinstance(exponent, Scalar) and exponent in PRODUCT_EXPONENTS:
            return Scalar("(" + " * ".join([x.text] * int(exponent)) + ")", self.emitter)
        if not isinstance(exponent, Scalar) and exponent == 0.5:
            return self.sqrt(x)
        if not isinstance(exponent, Scalar) and exponent == -0.5:  # eager's rsqrt (PyTorch's):
            return Scalar(f"({self._wrap(1.0).text} / {self.sqrt(x).text})", self.emitter)
        return Scalar(self.emitter.call("pow", x.text, self._wrap(exponent).text), self.emitter)

    def __getattr__(self, name: str) -> Callable[..., Scalar]:
        if name in ROUNDING_FUNCTIONS:
            return lambda x: Scalar(f"np.{name}({x.text})", self.emitter)
        return lambda *args: Scalar(self.emitter.call(name, *(self._wrap(a).text for a in args)),
                                    self.emitter)


def scalar_lowering(op: OpDef) -> Lowering:
    """The lowering of `op` from its declared scalar form (`op.scalar`)."""
    form, kinds = op.scalar, op.scalar_kinds
    assert form is not None, f"{op.name} has no scalar form"

    def lowering(e: Emitter, *args: str | None, **params: Any) -> str | None:
        if e.dtype.kind not in kinds:
            return None
        s = ScalarNamespace(e)
        try:
            out = form(s, *(None if a is None else Scalar(a, e) for a in args), **params)
        except NotLowerableError:
            return None
        return None if out is None else s._wrap(out).text
    return lowering


LOWERINGS: dict[OpDef, Lowering] = {op: scalar_lowering(op) for op in OPS.values()
                                    if op.scalar is not None}


def is_lowerable(op: Any) -> bool:
    """Whether `op` (a graph node's target) has a scalar lowering (an op declared after
    this module was imported gets its lowering here, on first use)."""
    if not isinstance(op, OpDef):
        return False
    if op not in LOWERINGS and op.scalar is not None:
        LOWERINGS[op] = scalar_lowering(op)
    return op in LOWERINGS


def lower_node(node: Node, names: dict[Node, str]) -> str | None:
    """The expression of one element of a pointwise graph node, or None if it declines.

    names: the kernel local holding each Node operand (operands missing from it are
    written as `_`, enough to ask whether the node lowers at all).
    """
    return _lowered(node, names)[0]


def calls_math(node: Node) -> bool:
    """Whether the lowered expression of a pointwise node calls a math function (`exp`,
    `tanh`, ...), not only arithmetic."""
    return _lowered(node, {})[1]


def _lowered(node: Node, names: dict[Node, str]) -> tuple[str | None, bool]:
    lowering = LOWERINGS[node.target]
    emitter = Emitter(compute_dtype(node))
    args = [names.get(a, "_") if isinstance(a, Node) else
            (None if a is None else emitter.const(a)) for a in node.args]
    return lowering(emitter, *args, **node.kwargs), emitter.calls_math


def compute_dtype(node: Node) -> np.dtype:
    """The dtype literals of `node` take: its first non-bool tensor operand's, else its own."""
    for arg in node.args:
        if isinstance(arg, Node):
            dtype = arg.meta["val"].dtype.np
            if dtype.kind != "b":
                return dtype
    return node.meta["val"].dtype.np
