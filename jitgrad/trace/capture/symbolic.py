"""Symbolic sizes: `SymInt`, the expressions it carries, and the `ShapeEnv` of one trace.

Note [Symbolic sizes]
A dim of an input tensor that is dynamic (its size changed between calls, or
`dynamic=True` / `mark_dynamic`) is a *symbol* `s<k>` while tracing. The trace still runs
on concrete sizes (the *hints*, the sizes of the call being traced): fake tensors have
concrete shapes, so every eager op decides as eager would. What changes is what the
translator hands to the user's Python: `x.shape`, `x.size(d)`, `len(x)` and `x.numel()`
give `SymInt`s for symbolic dims, ints (their hint) that carry an expression over the
symbols. Arithmetic on them (`+ - * // %`) gives SymInts; a comparison or a truth test
records a *relation guard* (`x.shape[1] > 5` held) and answers from the hints; any other
use as a Python int (`range(T)`, `int(T)`, a Python list index) *specializes* the
expression: it records the guard `expr == hint`, after which the trace is exact for it.
Passed to a jitgrad op (`view`, `reshape`, `expand`, `arange`, slicing), a SymInt rides
into the node's arguments, where it stays an expression: the graph is generic in its
symbols.

Duck sizing, as torch's: dynamic dims of equal hint get one symbol, and the guard checks
they stay equal; a hint of 0 or 1 is never a symbol (eager treats such dims specially),
and every symbol is guarded `>= 2`.

A generic graph is run at concrete sizes by `jitgrad.trace.runtime.specialize`: its SymInt
arguments are evaluated, its nodes re-run on fakes of the new sizes (every op decides
again), and each node's shape is checked against the shape the trace predicted for it
(`sym_shape`); a size the trace read as a constant that now differs refuses the
specialization, so no Python decision made from a size goes unguarded.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Any

from jitgrad.eager.symbolic_int import SymbolicInt
from jitgrad.eager.views import ReplayStep

# An expression is an int, ("sym", k) for symbol k, or (op, a, b) with op in _OPS.
Expr = Any

_OPS: dict[str, Callable[[int, int], int]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
    "%": operator.mod}
COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge}


def evaluate(expr: Expr, value: Callable[[Any], int], leaf: str = "sym") -> int:
    """The value of `expr` when each leaf `(leaf, k)` has the value `value(k)` (symbol k, or
    with leaf "size" the size a guard reads from a source)."""
    if type(expr) is int:
        return expr
    if expr[0] == leaf:
        return int(value(expr[1]))
    return _OPS[expr[0]](evaluate(expr[1], value, leaf), evaluate(expr[2], value, leaf))


def render(expr: Expr, name: Callable[[Any], str], leaf: str = "sym") -> str:
    """`expr` as Python source, each leaf `(leaf, k)` written `name(k)`."""
    if type(expr) is int:
        return repr(expr)
    if expr[0] == leaf:
        return name(expr[1])
    return f"({render(expr[1], name, leaf)} {expr[0]} {render(expr[2], name, leaf)})"


def symbols_of(expr: Expr, leaf: str = "sym") -> Iterator[Any]:
    """What the leaves `(leaf, k)` of `expr` hold: its symbols k (or sources)."""
    if type(expr) is int:
        return
    if expr[0] == leaf:
        yield expr[1]
        return
    yield from symbols_of(expr[1], leaf)
    yield from symbols_of(expr[2], leaf)


def _combine(op: str, a: Expr, b: Expr) -> Expr:
    """`a op b`, with constants folded and the identities `x + 0`, `x * 1` dropped."""
    if type(a) is int and type(b) is int:
        return _OPS[op](a, b)
    if (op in "+-" and b == 0) or (op in ("*", "//") and b == 1):
        return a
    if (op == "+" and a == 0) or (op == "*" and a == 1):
        return b
    return (op, a, b)


class SymInt(SymbolicInt):
    """An int (its hint) that is an expression over size symbols while tracing; see Note
    [Symbolic sizes]. Arithmetic keeps the expression, comparisons record relations in
    the active ShapeEnv, `int()` specializes."""

    expr: Expr

    def __new__(cls, hint: int, expr: Expr) -> SymInt:
        value = super().__new__(cls, hint)
        value.expr = expr
        return value

    @property
    def hint(self) -> int:
        return int.__int__(self)

    def __repr__(self) -> str:  # Python text made from a size: exact for this trace
        return repr(int(self))

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(int(self), spec)

    def __int__(self) -> int:
        specialize(self)
        return self.hint

    def __index__(self) -> int:  # a size used as an index or a range bound specializes
        return int(self)

    def __float__(self) -> float:
        return float(int(self))

    def __hash__(self) -> int:
        return int.__hash__(self)

    def __bool__(self) -> bool:
        return _relation(self, "!=", 0)

    def __neg__(self) -> SymInt:
        return _arith("-", 0, self)

    def __pos__(self) -> SymInt:
        return self

    def __abs__(self) -> Any:
        return self if _relation(self, ">=", 0) else -self


def _expr_of(value: Any) -> Expr:
    return value.expr if isinstance(value, SymInt) else int(value)


def _arith(op: str, a: Any, b: Any) -> Any:
    if type(a) is bool or type(b) is bool or not isinstance(a, int) or not isinstance(b, int):
        return NotImplemented
    hint = _OPS[op](int.__int__(a), int.__int__(b))
    expr = _combine(op, _expr_of(a), _expr_of(b))
    return SymInt(hint, expr) if type(expr) is not int else expr


def _relation(a: Any, op: str, b: Any) -> Any:
    if not isinstance(a, int) or not isinstance(b, int):
        if isinstance(b, float) or isinstance(a, float):
            return COMPARISONS[op](float(_specialized(a)), float(_specialized(b)))
        return NotImplemented
    result = COMPARISONS[op](int.__int__(a), int.__int__(b))
    env = ShapeEnv.active()
    if env is not None:
        env.record(_expr_of(a), op, _expr_of(b), result)
    return result


def _specialized(value: Any) -> Any:
    return int(value) if isinstance(value, SymInt) else value


def _install_operators() -> None:
    for name, op in (("add", "+"), ("sub", "-"), ("mul", "*"), ("floordiv", "//"),
                     ("mod", "%")):
        setattr(SymInt, f"__{name}__", lambda a, b, op=op: _arith(op, a, b))
        setattr(SymInt, f"__r{name}__", lambda a, b, op=op: _arith(op, b, a))
    for name, op in (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"),
                     ("ge", ">=")):
        setattr(SymInt, f"__{name}__", lambda a, b, op=op: _relation(a, op, b))
    # other arithmetic (`/`, `**`, bit operations) is a Python value made from a size:
    # exact for this trace only
    for name in ("truediv", "pow", "and", "or", "xor", "lshift", "rshift", "divmod"):
        method = getattr(int, f"__{name}__")
        reflected = getattr(int, f"__r{name}__")
        setattr(SymInt, f"__{name}__",
                lambda a, b, m=method: m(int(a), _specialized(b)))
        setattr(SymInt, f"__r{name}__",
                lambda a, b, m=reflected: m(int(a), _specialized(b)))
    for name in ("round", "trunc", "floor", "ceil", "invert"):
        method = getattr(int, f"__{name}__")
        setattr(SymInt, f"__{name}__", lambda a, *rest, m=method: m(int(a), *rest))


_install_operators()


def specialize(value: Any) -> Any:
    """`value` as a plain int for this trace: records `expr == hint` in the active env."""
    if not isinstance(value, SymInt):
        return value
    env = ShapeEnv.active()
    if env is not None:
        env.record(value.expr, "==", value.hint, True)
    return value.hint


def contains_symint(value: Any) -> bool:
    """Whether `value` (an int, or tuples, lists, dicts and slices of them) holds a SymInt."""
    if isinstance(value, SymInt):
        return True
    if isinstance(value, (tuple, list)):
        return any(contains_symint(v) for v in value)
    if isinstance(value, dict):
        return any(contains_symint(v) for v in value.values())
    if isinstance(value, slice):
        return contains_symint((value.start, value.stop, value.step))
    if isinstance(value, ReplayStep):
        return contains_symint(value.params)
    return False


def hinted(value: Any) -> Any:
    """`value` with every SymInt replaced by its hint, the int it holds (no guard: for
    shape inference, which the specialization repeats at every size)."""
    if not contains_symint(value):
        return value
    return _map_symints(value, lambda size: size.hint)


def substitute(value: Any, values: Any) -> Any:
    """`value` with every SymInt replaced by its int at `values` (symbol k = values[k])."""
    return _map_symints(value, lambda size: evaluate(size.expr, values.__getitem__))


def _map_symints(value: Any, fn: Callable[[SymInt], int]) -> Any:
    if isinstance(value, SymInt):
        return fn(value)
    if type(value) in (tuple, list):
        return type(value)(_map_symints(v, fn) for v in value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_map_symints(v, fn) for v in value))
    if isinstance(value, tuple):  # torch.Size
        return type(value)(_map_symints(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map_symints(v, fn) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(*(_map_symints(v, fn) for v in (value.start, value.stop, value.step)))
    if isinstance(value, ReplayStep):  # (rebuild_view reads its op and params only)
        return ReplayStep(value.op, _map_symints(value.params, fn), value.input_metadata[0])
    return value


class ShapeEnv:
    """The symbols of one trace and the relations between them that the trace relied on.

    sources[k]: where symbol k is read (a `SizeSource`); hints[k]: its size in this trace;
    aliases: other dims of the same size, read as symbol k (duck sizing).
    relations: (lhs, op, rhs) expressions that held, in the order first relied on, each
    with the user location that relied on it.
    """

    _stack: list[ShapeEnv] = []

    def __init__(self, location: Callable[[], Any] = lambda: None) -> None:
        self.location = location  # the user's line being traced, stamped on relations
        self.sources: list[Any] = []
        self.hints: list[int] = []
        self.aliases: list[tuple[Any, int]] = []  # (source, k): a dim duck-sized to symbol k
        self.relations: dict[tuple[Expr, str, Expr], Any] = {}
        self.opaque = False  # a size followed the symbols in a way no expression here says
        self._by_source: dict[Any, int] = {}

    @classmethod
    def active(cls) -> ShapeEnv | None:
        return cls._stack[-1] if cls._stack else None

    def __enter__(self) -> ShapeEnv:
        ShapeEnv._stack.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        ShapeEnv._stack.pop()

    def symbol(self, source: Any, hint: int) -> SymInt:
        """The SymInt of a dynamic dim read at `source` (duck sizing: a dim of an equal hint
        reuses that symbol, and `aliases` keeps the equality for the guards)."""
        k = self._by_source.get(source)
        if k is None:
            k = self.hints.index(hint) if hint in self.hints else None
            if k is None:
                k = len(self.sources)
                self.sources.append(source)
                self.hints.append(hint)
                # the assumption every symbol carries (`_implied` reasons from it)
                self.relations[(("sym", k), ">=", 2)] = None
            else:
                self.aliases.append((source, k))
            self._by_source[source] = k
        return SymInt(hint, ("sym", k))

    def record(self, lhs: Expr, op: str, rhs: Expr, result: bool) -> None:
        """A comparison the trace relied on; stored as the relation that held."""
        if type(lhs) is int and type(rhs) is int:
            return
        if not result:
            op = _NEGATED[op]
        if _implied(lhs, op, rhs):
            return
        key = (lhs, op, rhs)
        if key not in self.relations:
            self.relations[key] = self.location()


def _lower_bound(expr: Expr) -> int | None:
    """A lower bound of `expr` from every symbol being >= 2 (None when not known)."""
    if type(expr) is int:
        return expr
    if expr[0] == "sym":
        return 2
    a, b = _lower_bound(expr[1]), _lower_bound(expr[2])
    if a is None or b is None or expr[0] not in "+*" or (expr[0] == "*" and min(a, b) < 0):
        return None
    return a + b if expr[0] == "+" else a * b


_MAX_TERMS = 256  # a product of sums grows fast: past this, not worth comparing


def _polynomial(expr: Expr) -> dict[tuple[int, ...], int] | None:
    """`expr` as {monomial (sorted symbols): coefficient} when it only adds, subtracts and
    multiplies (and stays small); None otherwise."""
    if type(expr) is int:
        return {(): expr} if expr else {}
    if expr[0] == "sym":
        return {(expr[1],): 1}
    a, b = _polynomial(expr[1]), _polynomial(expr[2])
    if a is None or b is None or expr[0] not in "+-*" or len(a) * len(b) > _MAX_TERMS:
        return None
    out: dict[tuple[int, ...], int] = {}
    if expr[0] == "*":
        for ma, ca in a.items():
            for mb, cb in b.items():
                key = tuple(sorted(ma + mb))
                out[key] = out.get(key, 0) + ca * cb
    else:
        sign = 1 if expr[0] == "+" else -1
        out = dict(a)
        for mb, cb in b.items():
            out[mb] = out.get(mb, 0) + sign * cb
    return {m: c for m, c in out.items() if c}


def _implied(lhs: Expr, op: str, rhs: Expr) -> bool:
    """Whether `lhs op rhs` holds whatever the symbols (>= 2): not worth a guard."""
    if lhs == rhs or (_polynomial(lhs) is not None and _polynomial(lhs) == _polynomial(rhs)):
        return op in ("==", "<=", ">=")
    if type(rhs) is int and (bound := _lower_bound(lhs)) is not None:
        return (op == ">=" and bound >= rhs) or (op == ">" and bound > rhs) or (
            op == "!=" and bound > rhs)
    if type(lhs) is int and (bound := _lower_bound(rhs)) is not None:
        return (op == "<=" and lhs <= bound) or (op == "<" and lhs < bound) or (
            op == "!=" and lhs < bound)
    return False


_NEGATED = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
