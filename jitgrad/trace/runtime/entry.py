"""`CompiledFunction`: the per-call path of `@jitgrad.compile` — guard, run or compile.

There is no PEP 523 frame hook in pure Python, so the decorator returns an object whose
`__call__` looks up the cache of the function's code object (code_cache.py: keyed by
identity, as code objects compare by value), runs each entry's generated guard function
(most recently used first) and calls the matching entry's runner (runner.py); on a miss
it compiles a new entry (pipeline.py: trace, graph, backend, guards, runner), after
saying why the cached entries did not serve (automatic dynamic sizes and numbers, the
recompile limit).

Where tracing meets code it cannot capture, the entry breaks the graph there and
continues in a resume function (jitgrad/trace/breaks/plan.py, Note [Graph break protocol]);
frames whose break cannot be resumed run eagerly, with the reason recorded once as the
frame outcome; `fullgraph=True` raises `CompileError` instead, before any user code ran.
A trace that fails on the user's own mistake is decided by running the frame eagerly,
which raises the user's exception at the user's line (Note [User errors]); an exception
raised by a runner or the graphs it calls names the user's line (Note [Errors at the
user's line] in user_lines.py).
"""

from __future__ import annotations

import dis
import functools
import os
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

from jitgrad import config
from jitgrad.eager.grad_mode import STATE
from jitgrad.trace.breaks.plan import (
    resume_function,
)
from jitgrad.trace.breaks.resume import clear_resume_cache
from jitgrad.trace.breaks.unsupported import DECIDED_BY_EAGER, BreakKind, Unsupported
from jitgrad.trace.capture.calls import grad_mode_decorated
from jitgrad.trace.capture.inlining import is_user_code
from jitgrad.trace.capture.sources import LocalSource
from jitgrad.trace.capture.tracing import SizePolicy
from jitgrad.trace.capture.variables import (
    Var,
)
from jitgrad.trace.guards import changed_numbers, changed_sizes, explain_failure
from jitgrad.trace.runtime import code_cache, report, user_lines
from jitgrad.trace.runtime.backends import lookup_backend
from jitgrad.trace.runtime.code_cache import CacheEntry, CodeCache, cache_for
from jitgrad.trace.runtime.dynamic import signature
from jitgrad.trace.runtime.pipeline import break_reason, compile_frame, trace
from jitgrad.trace.runtime.runner import RunnerEnv, named_const


class CompileError(RuntimeError):
    """`fullgraph=True` met code it cannot capture: names the construct, file:line, hint."""


_NESTED = [0]  # compiled frames running now, one inside another (config.MAX_NESTED_FRAMES)
_FRAMES_PER_NESTED_CALL = 8  # Python frames a compiled call nested at a break takes, at most
_TOTAL = {"compiles": 0}


def reset() -> None:
    """Forget every compiled entry and counter (`jitgrad.reset()`)."""
    code_cache.clear()
    _TOTAL["compiles"] = 0
    _WARNED.clear()
    clear_resume_cache()


def forget(compiled: CompiledFunction) -> None:
    """Drop the cache of one compiled function's code object (used by explain)."""
    code_cache.drop(compiled._function, compiled._backend, compiled._options)


def cache_of(compiled: CompiledFunction) -> CodeCache:
    """The cache a compiled function's calls use."""
    return cache_for(compiled._function, compiled._backend, compiled._options)


class CompiledFunction:
    """What `jitgrad.compile(fn)` returns: calls `fn` through guarded compiled entries."""

    def __init__(self, fn: Callable[..., Any], backend: Any, fullgraph: bool,
                 dynamic: bool | None = None) -> None:
        self._original = fn
        self._backend = lookup_backend(backend)
        self._fullgraph = fullgraph
        self._dynamic = dynamic  # Note [Symbolic sizes]: None automatic, True all, False none
        self._options = (fullgraph, dynamic)
        self._function, self._bound_self = _unwrap(fn)
        # a `@no_grad()`-decorated function: its body is compiled and called in that mode
        self._grad_mode: bool | None = None
        decorated = grad_mode_decorated(self._function)
        if decorated is not None:
            self._grad_mode, self._function = decorated
        self._resumes: dict[tuple, CompiledFunction] = {}
        self._code_cache: CodeCache | None = None  # held between calls (`_cache`)
        functools.update_wrapper(self, self._function)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __getattr__(self, name: str) -> Any:
        """A compiled nn.Module forwards other attributes to the module (`model.eval()`,
        `.parameters()`, `.state_dict()`), as torch.compile's OptimizedModule does; a
        method returning the module itself (`eval`, `train`, `to`) returns this compiled
        module, so `model = jitgrad.compile(m).eval()` stays compiled. `_orig_mod` is the
        module."""
        module = self._module()
        if module is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        if name == "_orig_mod":
            return module
        value = getattr(module, name)
        if not isinstance(value, types.MethodType) or value.__self__ is not module:
            return value

        def method(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            return self if result is module else result

        return method

    def _module(self) -> Any:
        original = self.__dict__.get("_original")
        if original is not None and hasattr(original, "_modules") and \
                original is self.__dict__.get("_bound_self"):
            return original
        return None

    def __getitem__(self, index: Any) -> Any:
        module = self._module()
        if module is None:
            raise TypeError(f"'{type(self).__name__}' object is not subscriptable")
        return module[index]

    def __repr__(self) -> str:
        module = self._module()
        inner = repr(module) if module is not None else self._qualname()
        return f"CompiledFunction({inner})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._bound_self is not None:
            if self._original is self._bound_self and _has_hooks(self._bound_self):
                # the graph would skip the module's own hooks: run it as eager does
                _warn_once(f"jitgrad.compile: {type(self._original).__name__} has forward "
                           "or backward hooks, so it runs eagerly (hooks on its submodules "
                           "are fine to compile around)")
                return self._original(*args, **kwargs)
            args = (self._bound_self, *args)
        if self._grad_mode is None or STATE.enabled == self._grad_mode:
            return self._call(args, kwargs)
        previous = STATE.enabled
        STATE.enabled = self._grad_mode
        try:
            return self._call(args, kwargs)
        finally:
            STATE.enabled = previous

    def _call(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        if config.DISABLE:
            return self._function(*args, **kwargs)
        if _NESTED[0] >= config.MAX_NESTED_FRAMES:
            return self._call_eagerly_when_nested(args, kwargs)
        _NESTED[0] += 1
        try:
            return self._call_compiled(args, kwargs)
        finally:
            _NESTED[0] -= 1

    def _call_eagerly_when_nested(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        """Too many compiled frames inside one another (deep recursion through graph
        breaks): run eagerly, with the recursion limit raised by what the compiled frames
        below took beyond eager's one Python frame each, so the recursion goes as deep as
        in eager."""
        if _NESTED[0] > config.MAX_NESTED_FRAMES:  # the limit is raised already
            return self._function(*args, **kwargs)
        config.logger("recompiles").info("%s runs eagerly: %d compiled frames are running "
                                         "inside one another (deep recursion)",
                                         self._qualname(), _NESTED[0])
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + _FRAMES_PER_NESTED_CALL * config.MAX_NESTED_FRAMES)
        _NESTED[0] += 1
        try:
            return self._function(*args, **kwargs)
        finally:
            _NESTED[0] -= 1
            sys.setrecursionlimit(limit)

    def _cache(self) -> CodeCache:
        """The cache of this function's code object: looked up once and held while it
        serves (a cached call then costs no key building or dict lookup)."""
        cache = self._code_cache
        if cache is None or not cache.serves(self._function):
            cache = self._code_cache = cache_for(self._function, self._backend, self._options)
        return cache

    def _call_compiled(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        cache = self._cache()
        symbolic_entries = []
        for entry in cache.entries:
            if entry.guard(*args, **kwargs):
                if entry.symbolic and not entry.compiled.serves(args, kwargs):
                    symbolic_entries.append(entry)  # after any entry that serves as it is
                    continue
                entry.hits += 1
                return _run_entry(entry, args, kwargs)
        for entry in symbolic_entries:
            if self._accepts(cache, entry, args, kwargs):
                entry.hits += 1
                return _run_entry(entry, args, kwargs)
        if cache.eager_reason is not None:
            return self._function(*args, **kwargs)
        return self._compile_and_run(cache, args, kwargs)

    def _compile_and_run(self, cache: CodeCache, args: tuple, kwargs: dict[str, Any]) -> Any:
        if cache.entries:
            self._note_recompile(cache, args, kwargs)
            if cache.eager_reason is not None:
                return self._function(*args, **kwargs)
        try:
            entry = self._compile(args, kwargs)
        except Unsupported as err:
            failure = err
            if self._fullgraph and err.kind not in DECIDED_BY_EAGER:
                raise CompileError(str(break_reason(err))) from None
        except Exception as err:  # a bug in the backend: never the user's loss
            if self._fullgraph:
                raise CompileError(f"jitgrad internal error while compiling "
                                   f"{self._qualname()}: {type(err).__name__}: {err}") from err
            return self._stay_eager(cache, f"internal error {type(err).__name__}: {err}",
                                    lambda: self._function(*args, **kwargs))
        else:
            cache.entries.insert(0, entry)
            cache.compiles += 1
            _TOTAL["compiles"] += 1
            report.record_outcome(report.FrameOutcome(self._qualname(), "compiled"))
            return _run_entry(entry, args, kwargs)
        # outside the handler, so a user's error raised by the eager run below does not come
        # chained to the tracer's exception
        return self._run_eagerly(cache, failure, args, kwargs)

    def _run_eagerly(self, cache: CodeCache, failure: Unsupported, args: tuple,
                     kwargs: dict[str, Any]) -> Any:
        """Run the frame eagerly after tracing failed with `failure`.

        A user error, or the tracer failing on the user's values (TRACER_ERROR), is decided
        by the eager run (Note [User errors]): when it raises, the error is the user's and
        propagates at the user's line, and the next call traces again; when it returns,
        the failure was the tracer's, and the frame stays eager (under fullgraph=True:
        CompileError). Other failures are unresumable graph breaks: eager from now on.
        """
        if failure.kind not in DECIDED_BY_EAGER:
            return self._stay_eager(cache, failure, lambda: self._function(*args, **kwargs))
        result = self._function(*args, **kwargs)  # raises the user's error if it is theirs
        if self._fullgraph:
            raise CompileError(f"{break_reason(failure)}\n(the function ran eagerly without "
                               "this error, so it is jitgrad's: please report it)")
        return self._stay_eager(cache, failure, lambda: result)

    def _stay_eager(self, cache: CodeCache, failure: Unsupported | str,
                    run: Callable[[], Any]) -> Any:
        """Record why the frame runs eagerly from now on (a break that cannot be resumed, or
        an internal error, which asks for a report), warn once, and return `run()`."""
        if isinstance(failure, str) or failure.kind == BreakKind.TRACER_ERROR:
            message = failure if isinstance(failure, str) else failure.message
            warning = (f"jitgrad.compile: {self._qualname()} runs eagerly after an {message} "
                       "(please report it with JITGRAD_LOGS=all output)")
        else:
            message = failure.message
            warning = f"jitgrad.compile: {self._qualname()} runs eagerly:\n{break_reason(failure)}"
        report.record_outcome(report.FrameOutcome(self._qualname(), "eager", message))
        cache.eager_reason = message
        _warn_once(warning)
        return run()

    def _accepts(self, cache: CodeCache, entry: CacheEntry, args: tuple,
                 kwargs: dict[str, Any]) -> bool:
        """Whether the symbolic entry serves this call's sizes (Note [Checking a symbolic
        trace]); a refused first check makes its dims exact for the frame."""
        graph = entry.compiled

        def trace_exact(stop_at: int | None) -> Any:
            try:
                return signature(trace(self._function, args, kwargs, stop_at=stop_at,
                                        dynamic_numbers=cache.dynamic_numbers,
                                        sizes=SizePolicy(exact=True)).graph)
            except Unsupported:
                return None

        was_provisional = graph.provisional
        if graph.accepts(args, kwargs, trace_exact):
            return True
        if was_provisional:
            cache.static_sizes |= frozenset(graph.shape_env.sources)
        return False

    def _note_recompile(self, cache: CodeCache, args: tuple, kwargs: dict[str, Any]) -> None:
        """Record why this call compiles again: the failing guard of every cache entry
        (newest first, as they are tried), and stop compiling at the recompile limit."""
        failures = [explain_failure(entry.guards, self._function, args, kwargs)
                    for entry in cache.entries]
        failed = failures[0]
        if len(failures) == 1:
            reason = f"{self._qualname()}: {failed}" if failed is not None else self._qualname()
        else:
            reason = f"{self._qualname()}: " + "; ".join(
                f"entry {len(failures) - i} of {len(failures)}: {f}"
                for i, f in enumerate(failures) if f is not None)
        guard = failed.guard if failed is not None else None
        changed = changed_numbers(cache.entries[0].guards, self._function, args, kwargs)
        if changed:
            cache.dynamic_numbers = cache.dynamic_numbers | set(changed)
            if guard is not None and guard.source in changed:
                reason += "; it becomes a graph input"
            else:
                names = ", ".join(source.name() for source in changed)
                reason += f"; changed numbers become graph inputs: {names}"
        if self._dynamic is not False:
            sizes = [s for s in changed_sizes(cache.entries[0].guards, self._function, args,
                                              kwargs) if s not in cache.static_sizes]
            if sizes:
                cache.dynamic_sizes = cache.dynamic_sizes | set(sizes)
                names = ", ".join(source.name() for source in sizes)
                reason += (f"; {names} {'becomes' if len(sizes) == 1 else 'become'} dynamic "
                           "(automatic dynamic; `dynamic=True` or `jitgrad.mark_dynamic` "
                           "makes sizes dynamic from the first call)")
        report.record_recompile(f"recompiling {reason}")
        if cache.compiles >= config.RECOMPILE_LIMIT or _TOTAL["compiles"] >= \
                config.TOTAL_RECOMPILE_LIMIT:
            limit = config.RECOMPILE_LIMIT if cache.compiles >= config.RECOMPILE_LIMIT else \
                config.TOTAL_RECOMPILE_LIMIT
            cache.eager_reason = f"hit the recompile limit ({limit})"
            _warn_once(f"jitgrad.compile: {self._qualname()} hit the recompile limit ({limit}); "
                       f"its {len(cache.entries)} compiled entries keep running for calls "
                       "whose guards hold, other calls run eagerly from now on. Why this "
                       f"call matched none: {reason.removeprefix(self._qualname() + ': ')}")

    def _compile(self, args: tuple, kwargs: dict[str, Any]) -> CacheEntry:
        cache = self._cache()
        return compile_frame(self._function, args, kwargs, self._backend, cache,
                             self._fullgraph, self._dynamic, self._resume, self._trampoline)


    def _resume(self, offset: int, n_stack: int, names: list[str],
                with_blocks: tuple = (), null_slots: tuple[int, ...] = ()) -> CompiledFunction:
        """The compiled resume function for one break target (made once per target)."""
        key = (offset, n_stack, tuple(names), with_blocks, null_slots)
        if key not in self._resumes:
            fn = resume_function(self._function, offset, n_stack, names, with_blocks,
                                        null_slots)
            config.logger("bytecode").info("%s", dis.Bytecode(fn.__code__).dis())
            # numbers handed over on the stack (e.g. a `.item()` result) are graph inputs
            # from the start: they come from data, so they change (Note [Unspecialized numbers])
            cache_for(fn, self._backend).dynamic_numbers = frozenset(
                LocalSource(f"___stack{i}") for i in range(n_stack))
            self._resumes[key] = CompiledFunction(fn, self._backend, False)
        return self._resumes[key]

    def show(self) -> str:
        """Readable source of every compiled entry: guards, graph, runner, the backend's
        code (the numba backend: fusion groups, kernels, wrapper; forward and backward when
        training), and recursively the resume functions it calls (`jitgrad.show(fn)`)."""
        cache = self._cache()
        name = self._qualname()
        if config.DISABLE:
            return f"# {name}: no compiled entry ({report.DISABLED_MESSAGE})\n"
        if not cache.entries:
            reason = cache.eager_reason or "it has not been called yet"
            return f"# {name}: no compiled entry ({reason})\n"
        parts = []
        for i, entry in enumerate(cache.entries):
            parts.append(f"# {name}, entry {i} ({entry.hits} cached calls)\n"
                         f"# guards:\n{entry.guard_source}\n"
                         f"# graph:\n{entry.graph_module.graph}\n"
                         f"# runner:\n{entry.run.__jitgrad_source__}")
            backend_code = getattr(entry.compiled, "show", None)  # kernels and wrapper
            if backend_code is not None:
                parts.append(backend_code())
        for resume in self._resumes.values():
            parts.append(resume.show())
        return "\n".join(parts)

    def _trampoline(self, var: Var, env: RunnerEnv) -> str | None:
        """A user function called at a break runs through its own CompiledFunction, so
        it is compiled too (nested frames, as TorchDynamo's eval-frame hook gives)."""
        value: Any = getattr(var, "value", None)
        function = value.__func__ if isinstance(value, types.MethodType) else value
        if not isinstance(function, types.FunctionType) or not is_user_code(function):
            return None
        return named_const(env, CompiledFunction(value, self._backend, False))

    def _qualname(self) -> str:
        code = self._function.__code__
        return f"{code.co_qualname} ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})"


def _run_entry(entry: CacheEntry, args: tuple, kwargs: dict[str, Any]) -> Any:
    """Call the entry's runner; an error raised in generated code names the user's line."""
    try:
        return entry.run(*args, **kwargs)
    except Exception as err:
        user_lines.add_user_location(err)
        raise


def _has_hooks(module: Any) -> bool:
    return bool(getattr(module, "_forward_hooks", None) or
                getattr(module, "_forward_pre_hooks", None) or
                getattr(module, "_backward_hooks", None))


def _unwrap(fn: Callable[..., Any]) -> tuple[types.FunctionType, Any]:
    """The Python function to trace and the receiver bound to it, if any.

    Raises TypeError for an object that is not callable, or a callable without Python
    bytecode to trace (a builtin, a class).
    """
    if not callable(fn):  # torch.compile refuses these up front, too
        raise TypeError(f"jitgrad.compile: '{type(fn).__name__}' object is not callable; "
                        "pass a Python function, method or nn.Module")
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return fn.__func__, fn.__self__
    if isinstance(fn, types.FunctionType):
        return fn, None
    forward = getattr(type(fn), "forward", None)
    if isinstance(forward, types.FunctionType) and hasattr(fn, "_modules"):
        return forward, fn  # an nn.Module: compile its forward with self bound
    raise TypeError(f"jitgrad.compile expects a Python function, method or nn.Module, got "
                    f"{type(fn).__name__}")


# Note [User errors]: a frame whose trace fails on the user's values (an op's shape or dtype
# error on the traced tensors, `None * 2`, a missing attribute, a wrong number of arguments)
# is run eagerly with the same arguments, and the eager run decides: if it raises, the
# exception is the user's own, raised from the user's frame as eager raises it (same class,
# same message, no tracer frames), under fullgraph=True too; if it returns, the tracer was
# wrong. The tracer's own bugs while tracing (TRACER_ERROR) are decided the same way, so a
# user's mistake is never reported as an internal error; so is a `raise` statement reached
# while tracing (RAISE) that is not resumed as a graph break: under fullgraph=True, or where
# the frame cannot be resumed (inside a try block, a loop).


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, UserWarning, stacklevel=_user_stacklevel())


def _user_stacklevel() -> int:
    """warnings.warn's stacklevel of the first caller outside jitgrad and its generated
    runners (the user's line)."""
    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith((_PACKAGE_DIR, "<jitgrad")):
        frame, level = frame.f_back, level + 1
    return level


_PACKAGE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # jitgrad/


# ----- the graph's outputs and the runner -------------------------------------------------


