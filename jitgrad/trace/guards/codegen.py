"""The generated guard, explainer and reader functions: checks rendered into Python with
the guarded function's own signature (Note [Generated guard function])."""

from __future__ import annotations

import builtins
import inspect
import re
import types
from typing import Any

from jitgrad.eager.grad_mode import STATE
from jitgrad.trace.capture.sources import (
    LocalSource,
    Source,
    builtins_of,
    chain,
)
from jitgrad.trace.guards.checks import OTHER, VALUE, Check, checks_of
from jitgrad.trace.guards.kinds import Guard, GuardKind, format_location, readable

# ----- code generation --------------------------------------------------------------------
# Note [Generated guard function]
# For `def f(self, x, n=2, *args, flag, **kw)` with guards on self, self.w, x, n the
# generated guard reads:
#
#     def __jg_guard_f(self, x, n, *args, flag, **kw):
#         try:
#             return (
#                 type(self) is __jg_Net
#                 and type(__jg_t0 := self.w) is __jg_Parameter and (__jg_d1 := __jg_t0._data)...
#                 and type(n) is int and n == 2
#             )
#         except Exception:
#             return False
#
# Defaults are not in the source: the function object is created with f's __defaults__
# and __kwdefaults__, so binding is CPython's own. A source read more than once is stored
# in a temporary (walrus) at its first use, which comes after its base's type check since
# guards are ordered base-first. Globals, builtins and cells are read through __jg_G,
# __jg_B and __jg_C (f's own dicts and cells); other constants are names in the guard's
# globals. Every name the guard introduces starts with a prefix no parameter uses.
# The explainer (GuardSet.build_explainer_fn) runs the same tests one statement each and
# returns `(index, True, value)` at the first that fails, `(index, False, exception)` at
# one that raises; what it returns is read without making new temporaries.


class GuardCodegen:
    """Renders checks into the source of functions with a code object's signature."""

    def __init__(self, code: types.CodeType) -> None:
        self.code = code
        self.params = parameters_of(code)
        prefix = "__jg_"
        while any(p.startswith(prefix) for p in self.params):
            prefix = "_" + prefix
        self.prefix = prefix
        self.names = {key: f"{prefix}{key}" for key in ("G", "B", "C")}
        self.fn_name = f"{prefix}guard_{re.sub(r'[^0-9a-zA-Z_]', '_', code.co_name)}"
        self.consts: dict[str, Any] = {}
        self._const_names: dict[int, str] = {}
        self._temps = 0
        self._uses: dict[Source | None, int] = {}
        self._rendered: dict[Source, str] = {}
        self._quiet = False  # reading a value to report: no new temporaries

    # SourceEnv and Names -----------------------------------------------------------------
    def expr(self, source: Source) -> str:
        if isinstance(source, LocalSource):
            if source.local_name not in self.params:
                raise ValueError(
                    f"a guard reads {source.name()!r}, which is not a parameter of "
                    f"{self.code.co_name}({', '.join(self.params)}); guards run before the "
                    "body, so they can only read arguments")
            return source.local_name
        if source in self._rendered:
            return self._rendered[source]
        text = source.reconstruct(self)
        if self._quiet or self._uses.get(source, 0) <= 1:
            return text
        name = self.temp()
        self._rendered[source] = name
        return f"({name} := {text})"

    def const(self, value: object, label: str = "") -> str:
        name = value.__name__ if isinstance(value, type) else None
        if name is not None and getattr(builtins, name, None) is value and name not in self.params:
            return name
        if id(value) in self._const_names:
            return self._const_names[id(value)]
        if not label:
            label = value.co_name if isinstance(value, types.CodeType) else readable(value)
        base = self.prefix + (re.sub(r"\W+", "_", label.rsplit(".", 1)[-1]).strip("_") or "k")
        name, n = base, 1
        while name in self.consts:
            n += 1
            name = f"{base}_{n}"
        self.consts[name] = value
        self._const_names[id(value)] = name
        return name

    def builtin(self, name: str) -> str:
        """How the guard names a builtin it calls: its own name unless a parameter shadows it."""
        return name if name not in self.params else self.const(getattr(builtins, name), name)

    def globals_dict(self) -> str:
        return self.names["G"]

    def builtins_dict(self) -> str:
        return self.names["B"]

    def closure_cell(self, name: str) -> str:
        if name not in self.code.co_freevars:
            raise ValueError(f"a guard reads the free variable {name!r}, but "
                             f"{self.code.co_name} closes over {self.code.co_freevars}")
        return f"{self.names['C']}[{self.code.co_freevars.index(name)}]"

    def grad_state(self) -> str:
        return self.const(STATE, "grad_mode")

    def temp(self, letter: str = "t") -> str:
        self._temps += 1
        return f"{self.prefix}{letter}{self._temps - 1}"

    # rendering -----------------------------------------------------------------------
    def render(self, guards: list[Guard], qualname: str) -> str:
        """The guard function's source for `guards` (already in order)."""
        lines: dict[Guard, list[str]] = {}  # one line per guard: its tests
        for test, source, other, guard, _ in self._tests(guards):
            lines.setdefault(guard, []).append(self._fill(test, source, other))
        body = "\n            and ".join(
            " and ".join(tests) + ("" if guard.location is None else
                                   f"  # {format_location(guard.location)}")  # one line
            for guard, tests in lines.items()) or "True"
        return (f"def {self.fn_name}({signature_of(self.code)}):\n"
                f"    # guards of {qualname}\n"
                f"    try:\n"
                f"        return (\n"
                f"            {body}\n"
                f"        )\n"
                f"    except Exception:\n"
                f"        return False\n")

    def render_explainer(self, guards: list[Guard], qualname: str,
                         name: str) -> tuple[str, list[tuple[Guard, Check]]]:
        """The explainer's source for `guards`, and the (guard, check) of each statement."""
        error = f"{self.prefix}error"
        statements, checks = [], []
        for index, (test, source, other, guard, check) in enumerate(self._tests(guards)):
            condition = self._fill(test, source, other)
            self._quiet = True
            got = self._fill(check.got or check.code, source, other)
            self._quiet = False
            statements.append(f"    try:\n"
                              f"        if not ({condition}):\n"
                              f"            return {index}, True, {got}\n"
                              f"    except Exception as {error}:\n"
                              f"        return {index}, False, {error}\n")
            checks.append((guard, check))
        return (f"def {name}({signature_of(self.code)}):\n"
                f"    # the first failing guard of {qualname}\n"
                + "".join(statements) + "    return None\n"), checks

    def _tests(self, guards: list[Guard]) -> list[tuple[str, Source | None, Source | None,
                                                        Guard, Check]]:
        """`(test template, source, other source, guard, check)` per distinct test, in order,
        with the uses of every source counted (a source read twice gets a temporary)."""
        tests: dict[tuple[Source | None, str, Source | None], tuple[Guard, Check]] = {}
        for guard in guards:
            other = guard.expected if guard.kind is GuardKind.DUPLICATE_INPUT else None
            for check in checks_of(guard, self):
                test = check.op.code(check, check.code, self)
                tests.setdefault((check.source, test, other), (guard, check))
        self._count_uses([s for source, _, other in tests for s in (source, other)])
        for source, test, other in tests:
            for value, placeholder in ((source, VALUE), (other, OTHER)):
                self._uses[value] = self._uses.get(value, 0) + test.count(placeholder)
        return [(test, source, other, guard, check)
                for (source, test, other), (guard, check) in tests.items()]

    def _fill(self, template: str, source: Source | None, other: Source | None) -> str:
        """`template` with each placeholder replaced by its source's expression."""
        pieces = re.split(f"({VALUE}|{OTHER})", template)
        return "".join(self.expr(source) if piece == VALUE and source is not None else
                       self.expr(other) if piece == OTHER and other is not None else piece
                       for piece in pieces)

    def _count_uses(self, sources: list[Source | None]) -> None:
        """Each distinct source read from a base counts as one use of that base."""
        seen: set[Source] = set()
        for source in sources:
            if source is None:
                continue
            for link in chain(source):
                if link not in seen:
                    seen.add(link)
                    if link.base is not None:
                        self._uses[link.base] = self._uses.get(link.base, 0) + 1


def define_function(fn: types.FunctionType, generator: GuardCodegen, text: str, name: str,
              what: str) -> types.FunctionType:
    """The function `name` defined by `text`, reading `fn`'s globals, builtins and cells and
    binding arguments with `fn`'s defaults."""
    namespace: dict[str, Any] = {"__builtins__": builtins}
    exec(compile(text, f"<jitgrad {what} for {fn.__qualname__}>", "exec"), namespace)
    env = {"__builtins__": builtins, **generator.consts,
           generator.names["G"]: fn.__globals__, generator.names["B"]: builtins_of(fn),
           generator.names["C"]: fn.__closure__}
    made = types.FunctionType(namespace[name].__code__, env, name, fn.__defaults__)
    made.__kwdefaults__ = fn.__kwdefaults__
    return made


def parameters_of(code: types.CodeType) -> list[str]:
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return list(code.co_varnames[:count])


def signature_of(code: types.CodeType) -> str:
    """`a, b, /, c, *args, d, **kw` for a code object; defaults come from the function object."""
    names = code.co_varnames
    positional = list(names[:code.co_argcount])
    if code.co_posonlyargcount:
        positional.insert(code.co_posonlyargcount, "/")
    kwonly = list(names[code.co_argcount:code.co_argcount + code.co_kwonlyargcount])
    rest = code.co_argcount + code.co_kwonlyargcount
    params = positional
    if code.co_flags & inspect.CO_VARARGS:
        params.append("*" + names[rest])
        rest += 1
    elif kwonly:
        params.append("*")
    params += kwonly
    if code.co_flags & inspect.CO_VARKEYWORDS:
        params.append("**" + names[rest])
    return ", ".join(params)
