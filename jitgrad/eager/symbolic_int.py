"""The eager side of the compiler's symbolic sizes (Note [Symbolic sizes] in
jitgrad/trace/capture/symbolic.py).

`SymbolicInt` is the base class of `jitgrad.trace.capture.symbolic.SymInt`: an int whose value is
one call's size while a function is traced. Eager code never makes one; the ops that
build a tensor from sizes (`arange`, `zeros`, `ones`, `full`, `empty`) check for one and
then record an op (`ARANGE`, `FULL` in creation.py) instead of computing a constant, so
the traced graph stays generic in that size.
"""

from __future__ import annotations

from typing import Any


class SymbolicInt(int):
    """An int standing for a size symbol while tracing (see the module docstring)."""

    __slots__ = ()


def sizes(tensor: Any) -> tuple:
    """`tensor`'s shape, with the SymInts a compiler's fake tensor carries at its symbolic
    dims (its `sym_shape`); for any other tensor, its array's shape. Ops that compute a
    view's sizes from their input's read them here, so the sizes stay symbolic."""
    sym = tensor.__dict__.get("sym_shape")
    return sym if sym is not None else tensor._data.shape


def any_symbolic(values: Any) -> bool:
    """Whether any of `values` (ints, or sequences of them) is a SymbolicInt."""
    return any(isinstance(v, SymbolicInt) or isinstance(v, (tuple, list)) and any_symbolic(v)
               for v in values)
