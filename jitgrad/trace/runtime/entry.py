"""`CompiledFunction`: the per-call path of `@jitgrad.compile` — guard, run or compile.

There is no PEP 523 frame hook in pure Python, so the decorator returns an object whose
`__call__` looks up the cache of the function's code object (keyed by identity: code
objects compare by value), runs each entry's generated guard function (most recently
used first) and calls the matching entry's runner; on a miss it traces the call,
compiles the graph with the backend, and adds an entry.

An entry's runner is generated Python with the user function's own signature:
    def __jg_run_f(x, scale=2):
        __i1 = self.w                     # graph inputs read once, through their sources
        __out = __graph(x, __i1)
        __write_back(x, __out[1], 1)      # x.add_(...) in f: the new value copied into x
        return (__out[0], scale)          # the returned structure, rebuilt
so the compiled path costs one guard call plus one runner call.

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
import inspect
import itertools
import os
import sys
import time
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from jitgrad import config
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.views import rebuild_view
from jitgrad.trace.breaks.plan import (
    BreakPlan,
    emit_break,
    plan_break,
    resume_function,
    tensors_at_break,
)
from jitgrad.trace.breaks.resume import clear_resume_cache
from jitgrad.trace.breaks.unsupported import DECIDED_BY_EAGER, BreakKind, Unsupported
from jitgrad.trace.capture import side_effects, symbolic, user_objects
from jitgrad.trace.capture.calls import grad_mode_decorated
from jitgrad.trace.capture.fake import FakeNumber, number_tensor, view_base
from jitgrad.trace.capture.sources import FrameValues, LocalSource, SizeSource, Source, builtins_of
from jitgrad.trace.capture.tracing import SizePolicy, TraceResult, is_user_code, trace_function
from jitgrad.trace.capture.variables import (
    BoundMethodVar,
    ConstVar,
    DictVar,
    GeneratorVar,
    ListVar,
    ObjectVar,
    TensorMethodVar,
    TensorVar,
    TupleVar,
    UserObjectVar,
    Var,
    tensors_in,
)
from jitgrad.trace.guards import changed_numbers, changed_sizes, explain_failure
from jitgrad.trace.ir.graph import SourceLocation
from jitgrad.trace.ir.graph_module import GraphModule
from jitgrad.trace.runtime import report, user_lines
from jitgrad.trace.runtime.backends import lookup_backend
from jitgrad.trace.runtime.dynamic import SymbolicGraph, signature, size_expr
from jitgrad.trace.runtime.specialize import Refused


class CompileError(RuntimeError):
    """`fullgraph=True` met code it cannot capture: names the construct, file:line, hint."""


class Runner(Protocol):
    """A generated runner (`build_runner`): called as the user's function, its source kept."""

    __jitgrad_source__: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


class CacheEntry:
    """One compiled version of a frame: its guard function, runner and what it holds."""

    def __init__(self, guard: Callable[..., bool], run: Runner, result: TraceResult,
                 graph_module: GraphModule, guard_source: str, compiled: Any) -> None:
        self.guard = guard
        self.run = run
        self.guards = result.guards
        self.graph_module = graph_module
        self.guard_source = guard_source
        self.compiled = compiled  # what the backend returned (its `show()`, if any)
        self.hits = 0


class CodeCache:
    """Entries of one code object, most recently used first, plus the frame's state.

    owners: the closure cells and defaults its guards read (held, so their ids, part of
    the cache key, are not reused while the cache lives).
    """

    def __init__(self, owners: tuple) -> None:
        self.owners = owners
        self.entries: list[CacheEntry] = []
        self.compiles = 0
        self.dynamic_numbers: frozenset[Source] = frozenset()  # Note [Unspecialized numbers]
        # Note [Symbolic sizes]: dims made dynamic after a change, and dims kept exact
        self.dynamic_sizes: frozenset[SizeSource] = frozenset()
        self.static_sizes: frozenset[SizeSource] = frozenset()
        self.eager_reason: str | None = None  # set when the frame runs eagerly from now on


# (code, closure, defaults, kwdefaults, backend) identities, then the options
CacheKey = tuple[int | bool | None, ...]
_CACHES: dict[CacheKey, CodeCache] = {}
_NESTED = [0]  # compiled frames running now, one inside another (config.MAX_NESTED_FRAMES)
_FRAMES_PER_NESTED_CALL = 8  # Python frames a compiled call nested at a break takes, at most
_TOTAL = {"compiles": 0}


def cache_for(fn: types.FunctionType, backend: Any,
              options: tuple[bool, bool | None] = (False, None)) -> CodeCache:
    """The cache of `fn`'s code object compiled for `backend` with `options` (fullgraph,
    dynamic), keyed by identity and dropped when the code dies.

    Functions sharing code but closing over different cells or with different defaults
    (two closures made by one factory, `def f(x, k=k)` in a loop) get separate caches: a
    guard reads the cells and defaults of the function it was built for. So do two
    backends (`compile(f, backend="eager")` after `compile(f)` runs the eager oracle) and
    two sets of options (`fullgraph=True` must raise where another compile of f went eager).
    """
    code = fn.__code__
    owners = (fn.__closure__, fn.__defaults__, fn.__kwdefaults__, backend)
    key = (*_cache_key(fn, backend), *options)
    cache = _CACHES.get(key)
    if cache is None:
        cache = _CACHES[key] = CodeCache(owners)
        weakref.finalize(code, _drop_cache, key)
    return cache


def _drop_cache(key: CacheKey) -> None:
    _CACHES.pop(key, None)


def _cache_key(fn: types.FunctionType, backend: Any) -> tuple[int, ...]:
    return (id(fn.__code__), *(0 if owner is None else id(owner) for owner in
                               (fn.__closure__, fn.__defaults__, fn.__kwdefaults__)), id(backend))


def reset() -> None:
    """Forget every compiled entry and counter (`jitgrad.reset()`)."""
    _CACHES.clear()
    _TOTAL["compiles"] = 0
    _WARNED.clear()
    clear_resume_cache()


def forget(compiled: CompiledFunction) -> None:
    """Drop the cache of one compiled function's code object (used by explain)."""
    _CACHES.pop((*_cache_key(compiled._function, compiled._backend), *compiled._options), None)


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

    def _call_compiled(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        cache = cache_for(self._function, self._backend, self._options)
        symbolic_entries = []
        for entry in cache.entries:
            if entry.guard(*args, **kwargs):
                if isinstance(entry.compiled, SymbolicGraph) and not entry.compiled.serves(
                        args, kwargs):
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
                raise CompileError(str(_break_reason(err))) from None
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
            raise CompileError(f"{_break_reason(failure)}\n(the function ran eagerly without "
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
            warning = f"jitgrad.compile: {self._qualname()} runs eagerly:\n{_break_reason(failure)}"
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
                return signature(_trace(self._function, args, kwargs, stop_at=stop_at,
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
        start = time.perf_counter()
        fn = self._function
        cache = cache_for(fn, self._backend, self._options)
        dynamic = cache.dynamic_numbers
        sizes = SizePolicy(cache.dynamic_sizes, cache.static_sizes, self._dynamic is True,
                           self._dynamic is False)
        try:
            result, plan = _trace(fn, args, kwargs, dynamic_numbers=dynamic, sizes=sizes), None
        except Unsupported as err:
            if self._fullgraph:
                raise
            plan = plan_break(fn, err)  # raises Unsupported when not resumable
            result = _trace(fn, args, kwargs, stop_at=plan.offset, dynamic_numbers=dynamic,
                            sizes=sizes)
            break_reason = _break_reason(err)
        traced = time.perf_counter()
        raw = signature(result.graph) if result.shape_env.sources else []
        graph = _graph_of(result, plan)
        frame = FrameValues.bind(fn, args, kwargs)
        example_inputs = _example_inputs(result, frame)
        graph_module = GraphModule(graph)
        if result.shape_env.opaque:  # Note [Symbolic sizes]: not generic, compile it exact
            cache.static_sizes |= frozenset(result.shape_env.sources)
            return self._compile(args, kwargs)
        if result.shape_env.sources:
            try:
                compiled: Any = SymbolicGraph(graph, self._backend, result, example_inputs, raw,
                                              fn, plan.offset if plan is not None else None)
            except Refused:  # the generic graph does not even give back the trace
                cache.static_sizes |= frozenset(result.shape_env.sources)
                return self._compile(args, kwargs)
        else:
            compiled = self._backend(graph_module, example_inputs)
        backend_done = time.perf_counter()
        guard = result.guards.build_guard_fn(fn)
        guard_source = str(result.guards)
        try:
            run = self._build_runner(result, plan, graph, compiled)
        except SizeEscapes:  # a size reaches the caller in a form the runner cannot rebuild
            cache.static_sizes |= frozenset(result.shape_env.sources)
            return self._compile(args, kwargs)
        done = time.perf_counter()
        if plan is not None:
            report.record_break(break_reason)
        groups = getattr(compiled, "fusion_groups", ())
        report.record_graph(graph, lambda: [str(g) for g in groups])
        report.record_guards(guard_source)
        report.record_time("trace", traced - start)
        report.record_time("backend", backend_done - traced)
        report.record_time("guards", done - backend_done)
        return CacheEntry(guard, run, result, graph_module, guard_source, compiled)

    def _build_runner(self, result: TraceResult, plan: BreakPlan | None, graph: Any,
                      compiled: Callable[..., Any]) -> Runner:
        fn = self._function
        env = _RunnerEnv(fn, result.shape_env)
        outputs = list(graph.outputs)
        number = env.const(number_tensor, "number_tensor")
        inputs = [f"{number}({source.reconstruct(env)})" if source in result.number_sources
                  else source.reconstruct(env) for source in result.input_sources]
        input_names = dict(zip(result.input_sources, _input_names(inputs), strict=True))
        env.size_of = lambda source: f"{input_names[source.base]}._data.shape[{source.dim}]"

        def expr(var: Var) -> str:
            return _output_expr(var, outputs, env, input_names)

        write_back = env.const(side_effects.write_back, "write_back")
        # an input's in-place view ops first: its write-back has the shape they give it
        # (Note [In-place view ops] in fake.py)
        replay = [f"{input_names[source]}.{name}(*{env.const(args)}, **{env.const(kwargs)})"
                  for source, name, args, kwargs in result.view_ops]
        replay += [f"{write_back}({input_names[m.source]}, "
                   f"__out[{outputs.index(m.fake.output_node())}], {m.writes})"
                   for m in result.mutations]
        # a write-back raises what the in-place op raises in eager (e.g. into a leaf that
        # requires grad): at that op's line (Note [Errors at the user's line])
        locations = [None] * len(result.view_ops) + [
            m.fake.output_node().meta.get("source") for m in result.mutations]
        replay += result.side_effects.statements(expr, lambda source: source.reconstruct(env))
        locations += [None] * (len(replay) - len(locations))
        if plan is None:
            assert result.output is not None, "a trace that did not stop returned a value"
            body = replay + [f"return {expr(result.output)}"]
            locations.append(None)
        else:
            stopped = result.stopped_at
            assert stopped is not None, "a break plan comes with the trace stopped at it"
            if plan.opname == "CHECKPOINT" and not any(
                    n.op == "call_function" for n in graph.nodes):
                refused = Unsupported(BreakKind.BREAK_IN_TRY,
                                      "nothing to capture before a try block "
                                      "whose body cannot be traced")
                refused.location = stopped.location()
                raise refused
            try:
                body = replay + emit_break(
                    stopped, plan, expr,
                    lambda *spec: _named_const(env, self._resume(*spec)),
                    lambda var: self._trampoline(var, env), env.const)
            except Unsupported as err:  # a value at the break that cannot be rebuilt
                if getattr(err, "location", None) is None:
                    err.location = stopped.location()
                raise
            locations += [stopped.location()] * (len(body) - len(locations))
        return build_runner(fn, inputs, body, compiled, env, locations)

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
        cache = cache_for(self._function, self._backend, self._options)
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

    def _trampoline(self, var: Var, env: _RunnerEnv) -> str | None:
        """A user function called at a break runs through its own CompiledFunction, so
        it is compiled too (nested frames, as TorchDynamo's eval-frame hook gives)."""
        value: Any = getattr(var, "value", None)
        function = value.__func__ if isinstance(value, types.MethodType) else value
        if not isinstance(function, types.FunctionType) or not is_user_code(function):
            return None
        return _named_const(env, CompiledFunction(value, self._backend, False))

    def _qualname(self) -> str:
        code = self._function.__code__
        return f"{code.co_qualname} ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})"


def _graph_of(result: TraceResult, plan: BreakPlan | None) -> Any:
    """The trace's graph with its outputs: what the runner needs of the graph."""
    if plan is not None:
        assert result.stopped_at is not None, "a break plan comes with the trace stopped at it"
        tensors = tensors_at_break(result.stopped_at, plan)
    else:
        assert result.output is not None, "a trace that did not stop returned a value"
        tensors = tensors_in(result.output)
    tensors += [t for var in result.side_effects.values() for t in tensors_in(var)]
    # a view reaches the caller rebuilt on its base (see `_output_expr`), and inputs as
    # themselves (written back if mutated), not as outputs
    tensors = [_view_base(t) for t in tensors]
    tensors = [t for t in tensors if t.fake.storage.input is None]
    tensors += [TensorVar(m.fake) for m in result.mutations]
    return _finish_graph(result.graph, tensors)


class SizeEscapes(Exception):  # noqa: N818 - a decision of _compile, not an error
    """A symbolic size would reach the runner as a constant (in a rebuilt view, a module
    made in the trace, ...): the frame is traced again with those dims exact."""


def _example_inputs(result: TraceResult, frame: FrameValues) -> list[Any]:
    """The graph inputs of a call: tensors, and numbers as 0-d tensors."""
    return [number_tensor(source.get(frame)) if source in result.number_sources
            else source.get(frame) for source in result.input_sources]


def _run_entry(entry: CacheEntry, args: tuple, kwargs: dict[str, Any]) -> Any:
    """Call the entry's runner; an error raised in generated code names the user's line."""
    try:
        return entry.run(*args, **kwargs)
    except Exception as err:
        user_lines.add_user_location(err)
        raise


def _named_const(env: _RunnerEnv, compiled: CompiledFunction) -> str:
    return env.const(compiled, "".join(c if c.isalnum() else "_" for c in compiled.__name__))


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


def _trace(fn: types.FunctionType, args: tuple, kwargs: dict[str, Any],
           **options: Any) -> TraceResult:
    """`trace_function`, with an exception other than Unsupported as a TRACER_ERROR."""
    try:
        return trace_function(fn, args, kwargs, **options)
    except Unsupported:
        raise
    except Exception as err:
        raise Unsupported(BreakKind.TRACER_ERROR, f"internal error {type(err).__name__}: {err}") \
            from err


def _break_reason(err: Unsupported) -> report.BreakReason:
    location = getattr(err, "location", None)
    if location is None:
        return report.BreakReason(err.kind, err.message, err.hint, "<unknown>", 0, "")
    return report.BreakReason(err.kind, err.message, err.hint, location.filename,
                              location.lineno, location.text, location.col, location.end_col)


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


_RUNNER_IDS = itertools.count()
_PACKAGE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # jitgrad/


# ----- the graph's outputs and the runner -------------------------------------------------

def _finish_graph(graph: Any, tensors: list[TensorVar]) -> Any:
    """Add the output node (every tensor the caller or the break needs), drop dead code."""
    outputs: list[Any] = []
    for var in tensors:
        node = var.fake.output_node()
        if node not in outputs:
            outputs.append(node)
    graph.output(tuple(outputs))
    graph.eliminate_dead_code()
    graph.lint(meta=True)
    return graph


def _view_base(var: TensorVar) -> TensorVar:
    """The tensor whose graph output a traced tensor reaches the caller from: an alias's
    owner, a view's base (see `_output_expr`), else the tensor itself."""
    alias = var.fake.__dict__.get("alias_of")
    if alias is not None:
        return _view_base(TensorVar(alias[0]))
    view = var.fake._view
    return var if view is None else _view_base(TensorVar(view_base(view)))


class _RunnerEnv:
    """How the generated runner refers to the frame (a `SourceEnv` for Source.reconstruct)."""

    def __init__(self, fn: types.FunctionType, shape_env: Any = None) -> None:
        self.namespace: dict[str, Any] = {"__G": fn.__globals__, "__B": builtins_of(fn)}
        self.shape_env = shape_env
        self.size_of: Callable[[SizeSource], str] | None = None  # a size, read off the inputs
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
            self.namespace[f"__cell_{name}"] = cell

    def expr(self, source: Source) -> str:
        return source.reconstruct(self)

    def const(self, value: object, hint: str = "", sizes: bool = False) -> str:
        """A name for `value` in the runner's namespace (readable when `hint` is given).
        A value holding SymInts is this call's, `substitute`d at run time; without
        `sizes` (where nothing evaluates them) it raises SizeEscapes."""
        if symbolic.contains_symint(value):  # a SymInt here would be its trace-time size
            if not sizes or self.size_of is None:
                raise SizeEscapes()
            symbols = ", ".join(self.size_of(s) for s in self.shape_env.sources)
            return (f"{self.const(symbolic.substitute, 'substitute')}"
                    f"({self._name(value, hint)}, ({symbols},))")
        return self._name(value, hint)

    def _name(self, value: object, hint: str) -> str:
        name = f"__{hint}" if hint else f"__c{len(self.namespace)}"
        if name in self.namespace and self.namespace[name] is not value:
            name = f"{name}_{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def globals_dict(self) -> str:
        return "__G"

    def builtins_dict(self) -> str:
        return "__B"

    def closure_cell(self, name: str) -> str:
        return f"__cell_{name}"

    def grad_state(self) -> str:
        from jitgrad.eager.grad_mode import STATE

        return self.const(STATE)


def _output_expr(var: Var, outputs: list[Any], env: _RunnerEnv,
                 input_names: dict[Source, str]) -> str:
    """Python source rebuilding the returned value around the graph's outputs `__out`.

    A graph input is the caller's tensor itself, `__i<k>` (after any write-back into it);
    a `.data`/`.detach()` alias is taken from the tensor it aliases, so it has no history
    and shares that tensor's memory (and `.detach()` its version counter). A view made in
    the trace is made again on its base with eager view ops (`rebuild_view`), so it shares
    the base's storage, version counter and history: an in-place write to either after the
    graph (at a graph break, or by the caller) reaches the other, values and gradients, as
    in eager (AOTAutograd's regenerated output aliases).
    """
    if isinstance(var, TensorVar):
        fake = var.fake
        if isinstance(fake, FakeNumber):  # a Python number, not a 0-d tensor
            if var.source is not None:
                return var.source.reconstruct(env)
            return f"__out[{outputs.index(fake.output_node())}].item()"
        alias = fake.__dict__.get("alias_of")
        if alias is not None:
            owner = _output_expr(TensorVar(alias[0]), outputs, env, input_names)
            return f"{owner}.data" if alias[1] == "data" else f"{owner}.detach()"
        view = fake._view
        if view is not None:
            base = _output_expr(TensorVar(view_base(view)), outputs, env, input_names)
            return f"{env.const(rebuild_view, 'rebuild_view')}({base}, " \
                f"{env.const(view.replay, sizes=True)}, {view.creation!r})"
        if fake.storage.input is not None:
            return input_names[fake.storage.input[0]]
        return f"__out[{outputs.index(fake.output_node())}]"
    if isinstance(var, TensorMethodVar):
        return f"{_output_expr(var.tensor, outputs, env, input_names)}.{var.name}"
    if var.source is not None and isinstance(var, (ConstVar, ObjectVar, ListVar, DictVar,
                                                   TupleVar)):
        return var.source.reconstruct(env)  # the caller's own object (mutations reach it)
    if isinstance(var, ConstVar) and symbolic.contains_symint(var.value) and \
            env.size_of is not None and not isinstance(var.value, (dict, slice)):
        return size_expr(var.value, env.size_of, env.shape_env, env.const)  # from this call's sizes
    if isinstance(var, BoundMethodVar):
        return f"{_output_expr(var.receiver, outputs, env, input_names)}.{var.name}"
    if isinstance(var, ObjectVar) and var.factory is not None:  # made in the trace: anew
        cls, args, kwargs = var.factory
        return f"{env.const(cls)}(*{env.const(args)}, **{env.const(kwargs)})"
    if isinstance(var, (ConstVar, ObjectVar)):
        if user_objects.is_local(var.value):  # Note [Classes defined in traced code]
            raise Unsupported(BreakKind.UNSUPPORTED_VALUE,
                              "a class defined in the compiled function "
                              "(or its method) leaves it", "define the class outside the "
                              "compiled function, or keep it inside")
        return "None" if var.value is None else env.const(var.value)
    if isinstance(var, UserObjectVar):  # Note [Objects made in traced code]
        raise Unsupported(BreakKind.UNSUPPORTED_VALUE,
                          f"a {var.cls.__qualname__} object made in the "
                          "compiled function leaves it (returned, stored outside, or alive "
                          "at a graph break)", "make the object outside the compiled "
                          "function, or keep it inside")
    if isinstance(var, TupleVar):
        items = [_output_expr(v, outputs, env, input_names) for v in var.items]
        if var.cls is not None:  # a namedtuple made by real code: rebuilt from its class
            return f"{env.const(var.cls)}({', '.join(items)})"
        return "(" + "".join(f"{item}, " for item in items) + ")"
    if isinstance(var, ListVar):
        return "[" + ", ".join(_output_expr(v, outputs, env, input_names)
                               for v in var.items) + "]"
    if isinstance(var, DictVar):
        return "{" + ", ".join(f"{k!r}: {_output_expr(v, outputs, env, input_names)}"
                               for k, v in var.items.items()) + "}"
    if isinstance(var, GeneratorVar):
        raise Unsupported(BreakKind.UNSUPPORTED_VALUE,
                          "a generator made in the compiled function is "
                          "still alive here, and a running generator cannot be rebuilt",
                          "consume it first (e.g. list(...)), or make it outside the compiled "
                          "function")
    raise Unsupported(BreakKind.UNSUPPORTED_VALUE,
                      f"returning a {type(var).__name__} from a compiled "
                      "function")


def _signature_source(fn: types.FunctionType) -> str:
    """Parameters of `fn` without defaults (they are copied onto the generated function)."""
    parameters = inspect.signature(fn).parameters.values()
    parts: list[str] = []
    posonly_done = kwonly_marked = False
    for p in parameters:
        if p.kind is p.POSITIONAL_ONLY:
            parts.append(p.name)
            continue
        if not posonly_done and any(q.kind is q.POSITIONAL_ONLY for q in parameters):
            parts.append("/")
        posonly_done = True
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            kwonly_marked = True
        elif p.kind is p.KEYWORD_ONLY:
            if not kwonly_marked:
                parts.append("*")
                kwonly_marked = True
            parts.append(p.name)
        elif p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        else:
            parts.append(p.name)
    if not posonly_done and any(p.kind is p.POSITIONAL_ONLY for p in parameters):
        parts.append("/")
    return ", ".join(parts)


def _input_names(inputs: list[str]) -> list[str]:
    """How the runner names each graph input after reading it once: a parameter by its
    own name, anything else (`self.w`, `opt.state[p]['exp_avg']`) as `__i<k>`."""
    return [value if value.isidentifier() else f"__i{k}" for k, value in enumerate(inputs)]


def build_runner(fn: types.FunctionType, inputs: list[str], body: list[str],
                 compiled: Callable[..., Any], env: _RunnerEnv,
                 locations: list[SourceLocation | None]) -> Runner:
    """Generate the entry's runner with `fn`'s signature (see the module docstring).

    inputs: the expression of each graph input (bound to `__i<k>` first, so statements
    after the graph refer to the same objects); body: the statements after the graph call
    (write-backs and replayed side effects, then `return <rebuilt output>`, or the break's
    native instruction and resume call); locations: the user's line of each body
    statement, or None (Note [Errors at the user's line]).
    """
    env.namespace["__graph"] = compiled
    names = _input_names(inputs)
    name = "__jg_run_" + "".join(c if c.isalnum() else "_" for c in fn.__code__.co_name)
    lines = [f"def {name}({_signature_source(fn)}):"]
    lines += [f"    {input_name} = {value}" for input_name, value in zip(names, inputs, strict=True)
              if input_name != value]
    lines.append(f"    __out = __graph({', '.join(names)})")
    line_locations = [None] * len(lines) + locations
    lines += [f"    {line}" for line in body]
    source = "\n".join(lines) + "\n"
    filename = f"<jitgrad runner {fn.__code__.co_qualname} {next(_RUNNER_IDS)}>"
    exec(compile(source, filename, "exec"), env.namespace)  # noqa: S102 - our own templates
    runner = env.namespace[name]
    user_lines.register(filename, line_locations, runner)
    runner.__defaults__ = fn.__defaults__
    runner.__kwdefaults__ = fn.__kwdefaults__
    runner.__jitgrad_source__ = source
    config.logger("bytecode").info("%s", source)
    return runner
