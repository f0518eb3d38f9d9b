"""Sources: where a value read by traced code comes from, relative to the compiled frame.

A source is a small immutable expression tree rooted in the compiled function's frame:
its arguments (`LocalSource`), its globals (`GlobalSource`), builtins (`BuiltinSource`),
its closure cells (`ClosureSource`), or global state (`GradModeSource`); derived sources
read an attribute, an item, the type, the code or a closure cell of another source.
Sources are hashable and compare by value, so a `GuardSet` can de-duplicate guards by
`(kind, source)` (research/dynamo.md §5.5).

Each source renders three ways:
- `name()`: a readable Python expression for messages (`self.w`, `d['a']`, `G['scale']`);
- `reconstruct(env)`: the expression used in generated guard code, where `env` (a
  `SourceEnv`, implemented by `jitgrad.trace.guards`) says how to refer to the globals
  dict, builtins dict, closure cells, constants and already-computed base values;
- `get(frame)`: the value itself, evaluated on a concrete `FrameValues` (used by
  `explain_failure` and tests). It raises what Python raises for the same read
  (AttributeError, KeyError, IndexError, ValueError for an empty cell).
"""

from __future__ import annotations

import ast
import inspect
import types
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from jitgrad.eager.grad_mode import is_grad_enabled


class KeyEnv(Protocol):
    """What rendering an item key needs (`render_item_key`)."""

    def expr(self, source: Source) -> str:
        """The expression for `source`'s value (a temporary once it has been computed)."""

    def const(self, value: object) -> str:
        """A name bound to `value` in the generated code's namespace."""


class SourceEnv(KeyEnv, Protocol):
    """How generated code refers to the frame; see `jitgrad.trace.guards`."""

    def globals_dict(self) -> str:
        """The expression for the compiled function's `__globals__` dict."""

    def builtins_dict(self) -> str:
        """The expression for the compiled function's `__builtins__` dict."""

    def closure_cell(self, name: str) -> str:
        """The expression for the cell of the compiled function's free variable `name`."""

    def grad_state(self) -> str:
        """The expression for the object whose `.enabled` is the current grad mode."""


def builtins_of(fn: types.FunctionType) -> dict[str, Any]:
    """The builtins namespace `fn` runs with (its globals' `__builtins__`, as CPython binds)."""
    return fn.__builtins__  # type: ignore[attr-defined]  # typeshed has it; mypy hides the dunder


@dataclass(frozen=True, slots=True)
class FrameValues:
    """The concrete values a compiled frame starts with, for `Source.get`.

    locals:   the bound arguments by parameter name (`*args` as a tuple, `**kwargs` as a dict).
    globals:  the function's `__globals__`.
    builtins: the function's `__builtins__` dict.
    closure:  the function's free-variable cells by name.
    """

    locals: dict[str, Any]
    globals: dict[str, Any]
    builtins: dict[str, Any]
    closure: dict[str, Any]

    @classmethod
    def bind(cls, fn: types.FunctionType | types.MethodType, args: tuple,
             kwargs: dict[str, Any]) -> FrameValues:
        """Bind `args`/`kwargs` to `fn`'s signature as a call would, defaults applied.

        `fn` may be a function or a bound method (its `__self__` becomes the first argument).
        Raises TypeError when the arguments do not bind, with CPython's message.
        """
        function: Callable[..., Any] = fn
        if isinstance(fn, types.MethodType):
            args = (fn.__self__, *args)
            function = fn.__func__
        assert isinstance(function, types.FunctionType), "a compiled method is a Python function"
        bound = inspect.signature(function, follow_wrapped=False).bind(*args, **kwargs)
        bound.apply_defaults()
        cells = function.__closure__ or ()
        return cls(dict(bound.arguments), function.__globals__, builtins_of(function),
                   dict(zip(function.__code__.co_freevars, cells, strict=True)))


def render_key(key: object) -> str | None:
    """`repr(key)` when it is a Python literal that reads back equal, else None."""
    text = repr(key)
    try:
        same = ast.literal_eval(text) == key and type(ast.literal_eval(text)) is type(key)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return text if same else None


class Source(ABC):
    """Base of all sources. Subclasses are frozen dataclasses (hashable, compared by value).

    `base` is the source a derived source reads from; None for roots (local, global, ...).
    """

    __slots__ = ()
    base: Source | None  # a dataclass field of derived sources; None on `RootSource`s

    @abstractmethod
    def name(self) -> str:
        """A readable Python expression for messages: `self.w`, `d['a']`, `G['scale']`."""

    @abstractmethod
    def reconstruct(self, env: SourceEnv) -> str:
        """The expression generated guard code evaluates, built through `env`."""

    @abstractmethod
    def get(self, frame: FrameValues) -> Any:
        """The value in a concrete frame; raises what Python raises for the same read."""


class RootSource(Source):
    """A source read directly from the frame or global state, with no base."""

    __slots__ = ()
    base = None


@dataclass(frozen=True, slots=True)
class LocalSource(RootSource):
    """An argument of the compiled function (the only locals bound when guards run)."""

    local_name: str

    def name(self) -> str:
        return self.local_name

    def reconstruct(self, env: SourceEnv) -> str:
        return self.local_name

    def get(self, frame: FrameValues) -> Any:
        return frame.locals[self.local_name]


@dataclass(frozen=True, slots=True)
class GlobalSource(RootSource):
    """A name in the compiled function's `__globals__`, shown as `G['name']`."""

    global_name: str

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def reconstruct(self, env: SourceEnv) -> str:
        return f"{env.globals_dict()}[{self.global_name!r}]"

    def get(self, frame: FrameValues) -> Any:
        return frame.globals[self.global_name]


@dataclass(frozen=True, slots=True)
class ModuleGlobalsSource(RootSource):
    """The globals of a module other than the compiled function's, shown as
    `<module name>.__dict__`: what a function inlined from that module reads its globals
    through when the trace reached the function itself without a source (`super().forward`
    of a library module). The module object is held as a constant of the generated code."""

    module: types.ModuleType

    def name(self) -> str:
        return f"{self.module.__name__}.__dict__"

    def reconstruct(self, env: SourceEnv) -> str:
        return f"{env.const(self.module)}.__dict__"

    def get(self, frame: FrameValues) -> Any:
        return self.module.__dict__


@dataclass(frozen=True, slots=True)
class BuiltinSource(RootSource):
    """A name in the compiled function's `__builtins__`, shown as `builtins.name`."""

    builtin_name: str

    def name(self) -> str:
        return f"builtins.{self.builtin_name}"

    def reconstruct(self, env: SourceEnv) -> str:
        return f"{env.builtins_dict()}[{self.builtin_name!r}]"

    def get(self, frame: FrameValues) -> Any:
        return frame.builtins[self.builtin_name]


@dataclass(frozen=True, slots=True)
class ClosureSource(RootSource):
    """The contents of the compiled function's free variable `var` (its closure cell)."""

    var: str

    def name(self) -> str:
        return self.var

    def reconstruct(self, env: SourceEnv) -> str:
        return f"{env.closure_cell(self.var)}.cell_contents"

    def get(self, frame: FrameValues) -> Any:
        return frame.closure[self.var].cell_contents


@dataclass(frozen=True, slots=True)
class GradModeSource(RootSource):
    """Global state: whether grad mode is enabled in this thread."""

    def name(self) -> str:
        return "jitgrad.is_grad_enabled()"

    def reconstruct(self, env: SourceEnv) -> str:
        return f"{env.grad_state()}.enabled"

    def get(self, frame: FrameValues) -> Any:
        return is_grad_enabled()


@dataclass(frozen=True, slots=True)
class AttrSource(Source):
    """`base.attr`."""

    base: Source
    attr: str

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"

    def reconstruct(self, env: SourceEnv) -> str:
        return f"{env.expr(self.base)}.{self.attr}"

    def get(self, frame: FrameValues) -> Any:
        return getattr(self.base.get(frame), self.attr)


@dataclass(frozen=True, slots=True)
class ItemSource(Source):
    """`base[key]`, key a constant (int, str, or any other hashable object), or the Source
    of the key (a dict keyed by tensors, such as an optimizer's state: `state[p]`)."""

    base: Source
    key: object

    def name(self) -> str:
        key = self.key.name() if isinstance(self.key, Source) else repr(self.key)
        return f"{self.base.name()}[{key}]"

    def reconstruct(self, env: SourceEnv) -> str:
        return f"{env.expr(self.base)}[{render_item_key(self.key, env)}]"

    def get(self, frame: FrameValues) -> Any:
        return self.base.get(frame)[self.key_value(frame)]

    def key_value(self, frame: FrameValues) -> Any:
        return self.key.get(frame) if isinstance(self.key, Source) else self.key


def render_item_key(key: object, env: KeyEnv) -> str:
    """An item key in generated code: a literal, the key's source, or a named constant."""
    if isinstance(key, Source):
        return env.expr(key)
    text = render_key(key)
    return text if text is not None else env.const(key)


@dataclass(frozen=True, slots=True)
class TypeSource(Source):
    """`type(base)`."""

    base: Source

    def name(self) -> str:
        return f"type({self.base.name()})"

    def reconstruct(self, env: SourceEnv) -> str:
        return f"{env.const(type)}({env.expr(self.base)})"

    def get(self, frame: FrameValues) -> Any:
        return type(self.base.get(frame))


@dataclass(frozen=True, slots=True)
class CodeSource(Source):
    """`base.__code__`: the code object of a function read by traced code."""

    base: Source

    def name(self) -> str:
        return f"{self.base.name()}.__code__"

    def reconstruct(self, env: SourceEnv) -> str:
        return f"{env.expr(self.base)}.__code__"

    def get(self, frame: FrameValues) -> Any:
        return self.base.get(frame).__code__


@dataclass(frozen=True, slots=True)
class CellContentsSource(Source):
    """`base.__closure__[index].cell_contents`: a cell read by a function the trace called.

    `var` is the free variable's name (`base.__code__.co_freevars[index]`); it is shown
    in messages, since an index alone does not tell the user which variable changed.
    """

    base: Source
    index: int
    var: str = ""

    def name(self) -> str:
        return f"{self.base.name()}.__closure__[{self.index}].cell_contents"

    def reconstruct(self, env: SourceEnv) -> str:
        return f"{env.expr(self.base)}.__closure__[{self.index}].cell_contents"

    def get(self, frame: FrameValues) -> Any:
        return self.base.get(frame).__closure__[self.index].cell_contents


@dataclass(frozen=True, slots=True)
class SizeSource(Source):
    """`base.shape[dim]`: one size of a tensor, a symbol of a trace where that dim is
    dynamic (Note [Symbolic sizes] in jitgrad/trace/capture/symbolic.py)."""

    base: Source
    dim: int

    def name(self) -> str:
        return f"{self.base.name()}.shape[{self.dim}]"

    def reconstruct(self, env: SourceEnv) -> str:
        return f"{env.expr(self.base)}._data.shape[{self.dim}]"

    def get(self, frame: FrameValues) -> Any:
        return self.base.get(frame)._data.shape[self.dim]


def describe(source: Source) -> str:
    """`source.name()`, plus the free variable's name for a cell read by a callee."""
    if isinstance(source, CellContentsSource) and source.var:
        return f"{source.name()} (free variable {source.var!r})"
    return source.name()


def chain(source: Source) -> list[Source]:
    """`source` and its bases, root first: `self.a.b` -> [self, self.a, self.a.b]."""
    sources = [source]
    while sources[-1].base is not None:
        sources.append(sources[-1].base)
    return sources[::-1]
