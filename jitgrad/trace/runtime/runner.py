"""The runner of a compiled entry: generated Python with the user function's signature.

    def __jg_run_f(x, scale=2):
        __i1 = self.w                     # graph inputs read once, through their sources
        __out = __graph(x, __i1)
        __write_back(x, __out[1], 1)      # x.add_(...) in f: the new value copied into x
        return (__out[0], scale)          # the returned structure, rebuilt
so the compiled path costs one guard call plus one runner call. At a graph break the
runner ends with the break's instruction and the call of the resume function
(jitgrad/trace/breaks/plan.py, Note [Graph break protocol]). `graph_of` gives the traced
graph the outputs the runner needs.
"""

from __future__ import annotations

import inspect
import itertools
import types
from collections.abc import Callable
from typing import Any, Protocol

from jitgrad import config
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.views import rebuild_view
from jitgrad.trace.breaks.plan import (
    BreakPlan,
    emit_break,
    tensors_at_break,
)
from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.capture import side_effects, symbolic, user_objects
from jitgrad.trace.capture.fake import FakeNumber, number_tensor
from jitgrad.trace.capture.functionalize import view_base
from jitgrad.trace.capture.sources import SizeSource, Source, builtins_of
from jitgrad.trace.capture.tracing import TraceResult
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
from jitgrad.trace.ir.graph import SourceLocation
from jitgrad.trace.ir.lint import lint
from jitgrad.trace.runtime import user_lines
from jitgrad.trace.runtime.dynamic import size_expr


class Runner(Protocol):
    """A generated runner (`build_runner`): called as the user's function, its source kept."""

    __jitgrad_source__: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


def runner_for(fn: types.FunctionType, result: TraceResult, plan: BreakPlan | None, graph: Any,
               compiled: Callable[..., Any], resume: Callable[..., Any],
               trampoline: Callable[[Var, RunnerEnv], str | None]) -> Runner:
    """The runner of one trace: graph inputs read through their sources, the graph
    called, inputs written back and side effects replayed, then the rebuilt output
    or, at a break, the break's instruction and the resume function's call (`resume(*spec)`
    gives it; `trampoline(var, env)` a compiled callee for a call at the break)."""
    env = RunnerEnv(fn, result.shape_env)
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
    # (Note [In-place view ops] in functionalize.py)
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
                lambda *spec: named_const(env, resume(*spec)),
                lambda var: trampoline(var, env), env.const)
        except Unsupported as err:  # a value at the break that cannot be rebuilt
            if getattr(err, "location", None) is None:
                err.location = stopped.location()
            raise
        locations += [stopped.location()] * (len(body) - len(locations))
    return build_runner(fn, inputs, body, compiled, env, locations)


def graph_of(result: TraceResult, plan: BreakPlan | None) -> Any:
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


def named_const(env: RunnerEnv, compiled: Any) -> str:
    return env.const(compiled, "".join(c if c.isalnum() else "_" for c in compiled.__name__))


_RUNNER_IDS = itertools.count()


def _finish_graph(graph: Any, tensors: list[TensorVar]) -> Any:
    """Add the output node (every tensor the caller or the break needs), drop dead code."""
    outputs: list[Any] = []
    for var in tensors:
        node = var.fake.output_node()
        if node not in outputs:
            outputs.append(node)
    graph.output(tuple(outputs))
    graph.eliminate_dead_code()
    lint(graph, meta=True)
    return graph


def _view_base(var: TensorVar) -> TensorVar:
    """The tensor whose graph output a traced tensor reaches the caller from: an alias's
    owner, a view's base (see `_output_expr`), else the tensor itself."""
    alias = var.fake.__dict__.get("alias_of")
    if alias is not None:
        return _view_base(TensorVar(alias[0]))
    view = var.fake._view
    return var if view is None else _view_base(TensorVar(view_base(view)))


class RunnerEnv:
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

        return self.const(STATE)


def _output_expr(var: Var, outputs: list[Any], env: RunnerEnv,
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
                 compiled: Callable[..., Any], env: RunnerEnv,
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
