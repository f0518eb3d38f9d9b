"""What the translator keeps on its symbolic stack: variable trackers (`Var`s).

Every value the traced code touches is a `Var`: a constant, a traced tensor, a
container of Vars, an arbitrary Python object, or a marker (NULL of the call protocol).
A Var read from the user's frame carries its `source`; guards are installed from sources
when a value influences the trace (see `Translator.guard_*`), never for unused inputs.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

from jitgrad.trace.capture.fake import FakeTensor


@dataclass(eq=False)
class Var:
    """Base of the variable trackers. `source` says where the value came from, if outside."""

    source: Any = field(default=None, kw_only=True)


@dataclass(eq=False)
class ConstVar(Var):
    """A Python value known at trace time (number, str, None, dtype, slice, tuple of consts)."""

    value: Any


@dataclass(eq=False)
class TensorVar(Var):
    """A traced tensor; `fake` holds its metadata and graph node."""

    fake: FakeTensor


@dataclass(eq=False)
class TupleVar(Var):
    """A tuple; `cls` is the namedtuple class when real code returned one (torch.return_types
    results such as max(dim=...) or topk), whose fields read as attributes."""

    items: list[Var]
    cls: Any = field(default=None, kw_only=True)  # a namedtuple class (`_make`, `_fields`)


@dataclass(eq=False)
class ListVar(Var):
    """A list; `items` are mutated in place by traced code (only lists made while tracing)."""

    items: list[Var]


@dataclass(eq=False)
class SetVar(Var):
    """A set of constants made in the trace (`set()`, `s.add(k)`): a value of the trace
    alone. Returned or stored outside, it is refused (the runner has no form for it)."""

    items: set[Any]


@dataclass(eq=False)
class DictVar(Var):
    """A dict with constant keys, insertion-ordered."""

    items: dict[Any, Var]


@dataclass(eq=False)
class ObjectVar(Var):
    """Any other Python object (functions, modules, classes, nn.Modules, methods, ...).

    receiver: for a bound method read as `obj.method`, the Var of `obj` (calls pass it as
    `self`, so reads through it keep obj's source rather than `obj.method.__self__`).
    factory: for an object made in the trace (a layer built in forward), `(cls, args,
    kwargs)` that build it again each time it leaves the graph (Note [Modules made in
    traced code] in jitgrad/trace/capture/calls.py).
    """

    value: Any
    receiver: Any = field(default=None, kw_only=True)
    factory: tuple[type, tuple, dict] | None = field(default=None, kw_only=True)


@dataclass(eq=False)
class NullVar(Var):
    """The NULL that CPython 3.11's call protocol pushes below a callable."""


@dataclass(eq=False)
class IteratorVar(Var):
    """An iterator over already-known items (loops are unrolled)."""

    items: list[Var]
    position: int = 0


@dataclass(eq=False)
class GeneratorVar(Var):
    """A generator made in traced code (a generator expression, a call of a generator
    function): `frame` is its Translator, run lazily to each `yield` as the consumer asks
    for the next item (Note [Generators] in translator.py)."""

    frame: Any = None


@dataclass(eq=False)
class CellVar(Var):
    """A closure cell created by the traced frame (MAKE_CELL); holds a Var or None."""

    contents: Var | None = None


@dataclass(eq=False)
class NestedFunctionVar(Var):
    """A function made by MAKE_FUNCTION inside traced code; inlined when called."""

    code: Any
    globals: dict[str, Any]
    defaults: tuple[Var, ...] = ()
    kwdefaults: dict[str, Var] = field(default_factory=dict)
    closure: tuple[CellVar, ...] = ()


@dataclass(eq=False)
class GradModeVar(Var):
    """`no_grad()` / `enable_grad()` / `set_grad_enabled(b)` / `inference_mode()`, used as a
    context manager. `set_grad_enabled(b)` switched the mode when called (as in eager), so
    its block restores the mode from before that call, `previous`; the others restore the
    mode found when their block is entered (previous None)."""

    enabled: bool
    previous: bool | None = None


@dataclass(eq=False)
class GradModeExitVar(Var):
    """The bound `__exit__` a `with` block leaves on the stack; restores `previous`.

    `enabled` is the mode inside the block (a graph break re-enters it).
    """

    previous: bool
    enabled: bool


@dataclass(eq=False)
class TensorMethodVar(Var):
    """`t.name` for a method of a traced tensor; rebuilt as `<t>.name` after a graph break."""

    tensor: TensorVar
    name: str


@dataclass(eq=False)
class BoundMethodVar(Var):
    """`obj.method` for a Var receiver whose method the translator models itself."""

    receiver: Var
    name: str


@dataclass(eq=False)
class UserObjectVar(Var):
    """An instance of the user class `cls` made in traced code; `attrs` is its instance
    dict (Note [Objects made in traced code]). `cls_source` reaches the class from the
    frame, when it does, so class attributes read through the object are guarded."""

    cls: type
    attrs: dict[str, Var]
    cls_source: Any = None


@dataclass(eq=False)
class UserMethodVar(Var):
    """A user function bound to a Var `obj` (read as `obj.method`); `function` None is
    object.__init__ (reached through `super().__init__()`), which does nothing."""

    function: types.FunctionType | None
    obj: Var


@dataclass(eq=False)
class SuperVar(Var):
    """`super(cls, obj)`: attribute reads start after `cls` in the MRO of obj's class."""

    cls: type
    obj: Var


def tensors_in(var: Var) -> list[TensorVar]:
    """Every traced tensor `var` holds (what must be a graph output for it to be rebuilt)."""
    if isinstance(var, TensorVar):
        return [var]
    if isinstance(var, TensorMethodVar):
        return [var.tensor]
    if isinstance(var, (TupleVar, ListVar)):
        return [t for v in var.items for t in tensors_in(v)]
    if isinstance(var, (DictVar, UserObjectVar)):
        items = var.items if isinstance(var, DictVar) else var.attrs
        return [t for v in items.values() for t in tensors_in(v)]
    return []
