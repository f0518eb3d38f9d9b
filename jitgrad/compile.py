"""The composition root of the compiler: `jitgrad.compile` and its companions.

Wires the capture layer (`jitgrad.trace`) to a backend: `"eager"` runs captured graphs
with eager ops (the correctness oracle, and autograd works through it), `"numba"` fuses
pointwise chains into compiled kernels (jitgrad.codegen), `"check"` runs numba's program
and the eager oracle side by side and names the first node that differs
(jitgrad/codegen/check.py); any callable `(graph_module, example_inputs) ->
callable(*flat_inputs) -> tuple` works too. JITGRAD_CHECK=1 (or warn) checks whichever
backend is chosen ("numba" becomes "check").
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from jitgrad import config
from jitgrad.codegen.backend import numba_backend
from jitgrad.codegen.check import CheckError, CheckWarning, check_backend, checked
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.runtime import entry, report
from jitgrad.trace.runtime.backends import lookup_backend, register_backend
from jitgrad.trace.runtime.disabled import allow_in_graph, disable, graph_break
from jitgrad.trace.runtime.entry import CompiledFunction, CompileError

config.configure_logging()
register_backend("numba", numba_backend)
register_backend("check", check_backend)


def compile(fn: Callable[..., Any] | None = None, *, backend: Any = None,  # noqa: A001
            fullgraph: bool = False, dynamic: bool | None = None, mode: str | None = None,
            options: dict[str, Any] | None = None, disable: bool = False) -> Any:
    """Compile `fn` (a function, bound method or nn.Module) by capturing its bytecode.

    Usable as `@jitgrad.compile` or `@jitgrad.compile(backend="eager", fullgraph=True)`.
    backend: a name ("numba", "eager", "check") or a callable `(graph_module,
    example_inputs) -> callable`; None means `jitgrad.config.DEFAULT_BACKEND` ("numba").
    "check" runs the numba program and eager ops side by side and raises CheckError at the
    first node that differs (JITGRAD_CHECK=warn: warns and returns eager's values);
    JITGRAD_CHECK=1 checks the chosen backend.
    fullgraph: raise `CompileError` (a RuntimeError) at the first construct that cannot be
    captured, instead of running that part eagerly.
    dynamic: as torch.compile's. None (the default): automatic dynamic, a dim whose size
    changed between calls becomes a symbol on the recompile, so later sizes reuse the
    entry; True: every dim of size 2 or more is a symbol from the first call; False:
    sizes stay exact (a new size recompiles). `jitgrad.mark_dynamic(t, dim)` and
    `mark_static` decide per tensor. See Note [Symbolic sizes] in jitgrad/trace/capture/symbolic.py.
    mode, options: accepted for compatibility with torch.compile; there is one mode, so a
    value other than the default warns once. disable=True returns `fn` itself, as
    torch.compile does.
    Set JITGRAD_DISABLE=1 to run every compiled function eagerly.
    """
    if disable:
        return fn if fn is not None else (lambda f: f)
    for name, value in (("mode", mode), ("options", options)):
        if value:
            warnings.warn(f"jitgrad.compile: {name}={value!r} is accepted for torch.compile "
                          "compatibility and ignored (jitgrad has one mode)", UserWarning,
                          stacklevel=2)
    backend = _checked_if_asked(config.DEFAULT_BACKEND if backend is None else backend)
    if fn is None:
        return lambda f: CompiledFunction(f, backend, fullgraph, dynamic)
    return CompiledFunction(fn, backend, fullgraph, dynamic)


def _checked_if_asked(backend: Any) -> Any:
    """`backend`, or its checked form when JITGRAD_CHECK is set (eager needs no check)."""
    if config.CHECK is None or backend in ("eager", "check"):
        return backend
    if backend == "numba":
        return "check"
    return checked(lookup_backend(backend))


def mark_dynamic(t: Tensor, index: int | list[int] | tuple[int, ...]) -> None:
    """Make dim `index` (or each of a list) of `t` a size symbol from the first compile that
    reads `t`, as torch._dynamo.mark_dynamic (Note [Symbolic sizes])."""
    _mark(t, index, "_jitgrad_dynamic_dims", "_jitgrad_static_dims")


def mark_static(t: Tensor, index: int | list[int] | tuple[int, ...]) -> None:
    """Keep dim `index` (or each of a list) of `t` exact: a new size recompiles."""
    _mark(t, index, "_jitgrad_static_dims", "_jitgrad_dynamic_dims")


def _mark(t: Tensor, index: Any, key: str, other: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"expected a Tensor, got {type(t).__name__}")
    dims = [index] if isinstance(index, int) else list(index)
    ndim = t._data.ndim
    for dim in dims:
        if type(dim) is not int or not -ndim <= dim < ndim:
            raise IndexError(f"dim {dim!r} is out of range for a tensor of {ndim} dims")
    dims = [dim % ndim for dim in dims]
    t.__dict__[key] = frozenset(t.__dict__.get(key, ())) | frozenset(dims)
    t.__dict__[other] = frozenset(t.__dict__.get(other, ())) - frozenset(dims)


def reset() -> None:
    """Drop every compiled entry, cache and recompile counter."""
    entry.reset()


def explain(fn: Callable[..., Any]) -> Callable[..., report.ExplainOutput]:
    """`jitgrad.explain(fn)(*args)`: run `fn` compiled, once, for real; report what happened.

    Returns an ExplainOutput with graphs, graph_break_count, break_reasons, frame
    outcomes, guards, recompile reasons, ops per graph and compile times; `str()` of it is
    a readable report. The function's previous compiled entries are dropped first so the
    report shows a fresh compile.
    """
    compiled = fn if isinstance(fn, CompiledFunction) else CompiledFunction(
        fn, _checked_if_asked(config.DEFAULT_BACKEND), False)

    def run(*args: Any, **kwargs: Any) -> report.ExplainOutput:
        entry.forget(compiled)
        with report.recording(report.ExplainOutput(disabled=config.DISABLE)) as output:
            output.result = compiled(*args, **kwargs)
        return output

    return run


def show(fn: Callable[..., Any]) -> str:
    """The readable source of what `fn` compiled to: per cache entry its guards, graph,
    generated runner and the backend's code (numba: fusion groups, kernel sources and the
    wrapper, for the forward and the backward graph when training), then every resume
    function the same way. Call `fn` first.

    Raises TypeError when `fn` is not a `jitgrad.compile`d function.
    """
    if not isinstance(fn, CompiledFunction):
        raise TypeError("jitgrad.show expects a function returned by jitgrad.compile")
    return fn.show()


__all__ = ["compile", "reset", "explain", "show", "disable", "allow_in_graph", "graph_break",
           "CompileError", "CompiledFunction", "CheckError", "CheckWarning"]
