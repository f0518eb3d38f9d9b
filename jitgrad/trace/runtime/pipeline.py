"""The compile pipeline of one call: `compile_frame`, stage by stage.

    trace      the frame's bytecode over fake tensors into a graph, stopped before a
               resumable graph break if there is one (capture/, breaks/plan.py)
    graph      the trace's graph given the outputs its runner needs (runner.graph_of)
    backend    the graph compiled, or a SymbolicGraph over symbolic sizes (dynamic.py)
    guards     one generated function checking what the trace assumed (guards/)
    runner     the generated Python that reads the inputs, calls the graph and rebuilds
               what the frame returns, or resumes after the break (runner.py)
    report     graphs, breaks, guards and per-stage times for explain() and the logs

A trace whose sizes cannot stay symbols (a size baked into an op, a view or module the
runner would rebuild with a size) is traced again with those dims exact.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from typing import Any

from jitgrad.trace.breaks.plan import BreakPlan, plan_break
from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.capture.fake import number_tensor
from jitgrad.trace.capture.sources import FrameValues
from jitgrad.trace.capture.tracing import SizePolicy, TraceResult, trace_function
from jitgrad.trace.ir.graph_module import GraphModule
from jitgrad.trace.runtime import report
from jitgrad.trace.runtime.code_cache import CacheEntry, CodeCache
from jitgrad.trace.runtime.dynamic import SymbolicGraph, signature
from jitgrad.trace.runtime.runner import SizeEscapes, graph_of, runner_for
from jitgrad.trace.runtime.specialize import Refused


class _SizesNotGeneric(Exception):  # noqa: N818 - a decision of compile_frame, not an error
    """The trace's symbolic sizes cannot stay symbols: trace again with them exact."""

    def __init__(self, result: TraceResult) -> None:
        super().__init__()
        self.sources = frozenset(result.shape_env.sources)


def compile_frame(fn: types.FunctionType, args: tuple, kwargs: dict[str, Any], backend: Any,
                  cache: CodeCache, fullgraph: bool, dynamic: bool | None,
                  resume: Callable[..., Any], trampoline: Callable[..., str | None]
                  ) -> CacheEntry:
    """A new entry for this call of `fn` (see the module docstring). `resume(*spec)` makes
    the compiled resume function of a break target; `trampoline(var, env)` compiles a
    user function called at a break. Raises Unsupported when the frame cannot be
    compiled (under `fullgraph`, at the first graph break)."""
    while True:
        try:
            return _compile_once(fn, args, kwargs, backend, cache, fullgraph, dynamic,
                                 resume, trampoline)
        except _SizesNotGeneric as exact:
            cache.static_sizes |= exact.sources


def _compile_once(fn: types.FunctionType, args: tuple, kwargs: dict[str, Any], backend: Any,
                  cache: CodeCache, fullgraph: bool, dynamic: bool | None,
                  resume: Callable[..., Any], trampoline: Callable[..., str | None]
                  ) -> CacheEntry:
    start = time.perf_counter()
    sizes = SizePolicy(cache.dynamic_sizes, cache.static_sizes, dynamic is True,
                       dynamic is False)
    result, plan, break_reason = _trace_to_break(fn, args, kwargs, cache.dynamic_numbers,
                                                 sizes, fullgraph)
    traced = time.perf_counter()
    raw = signature(result.graph) if result.shape_env.sources else []
    graph = graph_of(result, plan)
    inputs = example_inputs(result, FrameValues.bind(fn, args, kwargs))
    graph_module = GraphModule(graph)
    if result.shape_env.opaque:  # Note [Symbolic sizes]: not generic, compile it exact
        raise _SizesNotGeneric(result)
    compiled = _compile_graph(graph_module, backend, result, inputs, raw, fn, plan)
    backend_done = time.perf_counter()
    guard = result.guards.build_guard_fn(fn)
    try:
        run = runner_for(fn, result, plan, graph, compiled, resume, trampoline)
    except SizeEscapes:  # a size reaches the caller in a form the runner cannot rebuild
        raise _SizesNotGeneric(result) from None
    done = time.perf_counter()
    if break_reason is not None:
        report.record_break(break_reason)
    groups = getattr(compiled, "fusion_groups", ())
    report.record_graph(graph, lambda: [str(g) for g in groups])
    report.record_guards(result.guards)
    report.record_time("trace", traced - start)
    report.record_time("backend", backend_done - traced)
    report.record_time("guards", done - backend_done)
    return CacheEntry(guard, run, result, graph_module, compiled)


def _trace_to_break(fn: types.FunctionType, args: tuple, kwargs: dict[str, Any],
                    dynamic_numbers: Any, sizes: SizePolicy, fullgraph: bool
                    ) -> tuple[TraceResult, BreakPlan | None, report.BreakReason | None]:
    """The trace of the whole frame, or, at a graph break that can be resumed, the trace
    stopped before the breaking instruction with the plan for resuming after it."""
    try:
        return trace(fn, args, kwargs, dynamic_numbers=dynamic_numbers, sizes=sizes), None, None
    except Unsupported as err:
        if fullgraph:
            raise
        plan = plan_break(fn, err)  # raises Unsupported when not resumable
        result = trace(fn, args, kwargs, stop_at=plan.offset, dynamic_numbers=dynamic_numbers,
                       sizes=sizes)
        return result, plan, break_reason(err)


def _compile_graph(graph_module: GraphModule, backend: Any, result: TraceResult,
                   inputs: list[Any], raw: Any, fn: types.FunctionType,
                   plan: BreakPlan | None) -> Any:
    """The backend's compiled graph; a graph over symbolic sizes is a SymbolicGraph, which
    specializes it per set of concrete sizes and compiles each with the backend."""
    if not result.shape_env.sources:
        return backend(graph_module, inputs)
    try:
        return SymbolicGraph(graph_module.graph, backend, result, inputs, raw, fn,
                             plan.offset if plan is not None else None)
    except Refused:  # the generic graph does not even give back the trace
        raise _SizesNotGeneric(result) from None


def example_inputs(result: TraceResult, frame: FrameValues) -> list[Any]:
    """The graph inputs of a call: tensors, and numbers as 0-d tensors."""
    return [number_tensor(source.get(frame)) if source in result.number_sources
            else source.get(frame) for source in result.input_sources]


def trace(fn: types.FunctionType, args: tuple, kwargs: dict[str, Any],
          **options: Any) -> TraceResult:
    """`trace_function`, with an exception other than Unsupported as a TRACER_ERROR."""
    try:
        return trace_function(fn, args, kwargs, **options)
    except Unsupported:
        raise
    except Exception as err:
        raise Unsupported(BreakKind.TRACER_ERROR, f"internal error {type(err).__name__}: {err}") \
            from err


def break_reason(err: Unsupported) -> report.BreakReason:
    """What explain() and the logs say of a graph break: its kind, message, hint and line."""
    location = getattr(err, "location", None)
    if location is None:
        return report.BreakReason(err.kind, err.message, err.hint, "<unknown>", 0, "")
    return report.BreakReason(err.kind, err.message, err.hint, location.filename,
                              location.lineno, location.text, location.col, location.end_col)
