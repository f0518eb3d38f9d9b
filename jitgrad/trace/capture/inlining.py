"""What a trace inlines and how: user functions, module forwards, class bodies.

A function the trace reaches is inlined (its bytecode run by a child Translator in the
same trace) when it is user code or jitgrad code written to be traced (optimizer steps,
nn.Module forwards); jitgrad's functional API runs for real on fake tensors; an
`allow_in_graph` function becomes one opaque graph node. `Inlining` holds these
decisions for `TraceContext` (tracing.py), which mixes it in.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, cast

import numpy as np

from jitgrad.eager.legacy_types import LegacyTensorType
from jitgrad.eager.ops import declare
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.bytecode import opcodes
from jitgrad.trace.capture import user_objects
from jitgrad.trace.capture.fake import FakeTensor
from jitgrad.trace.capture.recorder import OpRecorder, run_eagerly
from jitgrad.trace.capture.sources import (
    AttrSource,
    CellContentsSource,
    ModuleGlobalsSource,
    Source,
    TypeSource,
)
from jitgrad.trace.capture.translator import MAX_INLINE_DEPTH, Translator
from jitgrad.trace.capture.variables import (
    CellVar,
    DictVar,
    GeneratorVar,
    NestedFunctionVar,
    ObjectVar,
    TensorVar,
    TupleVar,
    Var,
)
from jitgrad.trace.guards import GuardKind
from jitgrad.trace.ir.graph import Graph
from jitgrad.trace.runtime.user_lines import JITGRAD_DIR, LIBRARY_DIRS

if TYPE_CHECKING:
    from jitgrad.trace.capture.tracing import TraceContext

_FUNCTIONAL_MODULES = ("jitgrad.eager.", "jitgrad.nn.functional", "jitgrad.linalg",
                       "jitgrad.optim.functional")
# jitgrad code written to be traced like user code (Note [Compiled optimizer step] in
# jitgrad/optim/optimizer.py): inlined, so its reads of parameters, grads and state become
# sourced graph inputs and its in-place updates are functionalized
_TRACED_LIBRARY_MODULES = ("jitgrad.optim.optimizer", "jitgrad.optim.sgd", "jitgrad.optim.adam",
                           "jitgrad.optim.rmsprop")
# nn.Module code (forward and the helpers it calls, e.g. BatchNorm's input check, the
# recurrent layers' step functions, so their time loop unrolls) is traced like the user's
# own modules
_TRACED_LIBRARY_PACKAGES = ("jitgrad.nn.modules.",)


class TraceState(Protocol):
    """What `Inlining` uses of the TraceContext it is mixed into (tracing.py)."""

    graph: Graph
    recorder: OpRecorder

    def _guard(self, kind: GuardKind, source: Source | None, expected: Any) -> None: ...

    def wrap_value(self, value: Any, source: Source | None) -> Var: ...

    def guard_type(self, var: ObjectVar) -> None: ...

    def inline_function(self, tx: Translator, fn: types.FunctionType, fn_var: Any,
                        args: list[Var], kwargs: dict[str, Var]) -> Var: ...

    def inline(self, tx: Translator, fn: NestedFunctionVar, args: list[Var],
               kwargs: dict[str, Var], global_source: Any = None) -> Var: ...


class Inlining:
    """The inlining decisions of a trace (mixed into TraceContext)."""

    @staticmethod
    def is_user_file(filename: str) -> bool:
        return is_user_file(filename)

    def is_user_function(self, fn: Any) -> TypeGuard[types.FunctionType]:
        """Functions traced by inlining: user code, and jitgrad code written to be traced."""
        return is_user_code(fn) or isinstance(fn, types.FunctionType) and (
            fn.__module__ in _TRACED_LIBRARY_MODULES
            or fn.__module__.startswith(_TRACED_LIBRARY_PACKAGES))

    def opaque_call(self: TraceState, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Var:
        """One graph node calling an `allow_in_graph` function (its body is not traced).

        Its output shapes come from running it once on zero tensors of the input shapes.
        """
        def as_node(value: Any) -> Any:
            return value.node if isinstance(value, FakeTensor) else value

        def as_zeros(value: Any) -> Any:
            if isinstance(value, FakeTensor):
                return Tensor._make(np.zeros(value._data.shape, value._data.dtype),
                                    value._requires_grad)
            return value

        node_args = tuple(_map_values(args, as_node))
        node_kwargs = dict(zip(kwargs, _map_values(list(kwargs.values()), as_node), strict=True))
        example = run_eagerly(fn, *_map_values(args, as_zeros),
                              **dict(zip(kwargs, _map_values(list(kwargs.values()), as_zeros),
                                         strict=True)))
        if not isinstance(example, Tensor):
            raise Unsupported(BreakKind.UNSUPPORTED_CALL, f"allow_in_graph function {fn.__name__} "
                              "must return one tensor")
        node = self.graph.call_function(fn, node_args, node_kwargs)
        if self.recorder.location is not None:
            node.meta["source"] = self.recorder.location
        return TensorVar(FakeTensor.like(node, example, example._requires_grad))

    def is_jitgrad_callable(self, fn: Any) -> bool:
        """jitgrad's pure functional API (ops, nn.functional, linalg) and methods of traced
        tensors, and ops declared outside jitgrad (`declare.pointwise_op`): run for real on
        fakes. Stateful jitgrad code (optimizers, data loaders) is not: it would touch real
        objects while tracing."""
        if isinstance(getattr(fn, "__self__", None), FakeTensor):
            return True
        if isinstance(fn, LegacyTensorType):  # torch.LongTensor([[1, 2]]): creation with a dtype
            return True
        module = getattr(fn, "__module__", None) or ""
        return module.startswith(_FUNCTIONAL_MODULES) or declare.is_declared(fn)

    @staticmethod
    def is_module(value: Any) -> bool:
        """An nn.Module instance (duck-typed: trace does not import jitgrad.nn)."""
        return hasattr(value, "_modules") and hasattr(value, "_parameters") and \
            callable(getattr(type(value), "forward", None))

    @staticmethod
    def is_module_class(value: Any) -> bool:
        """A layer class of jitgrad.nn (`nn.MaxPool2d`), which traced code may construct."""
        return isinstance(value, type) and value.__module__.startswith(
            _TRACED_LIBRARY_PACKAGES) and callable(getattr(value, "forward", None))

    # ----- inlining -------------------------------------------------------------------------
    def inline_module_call(self: TraceState, tx: Translator, module: ObjectVar, args: list[Var],
                           kwargs: dict[str, Var]) -> Var:
        value = module.value
        for hooks in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks"):
            if getattr(value, hooks, None):
                raise Unsupported(BreakKind.UNSUPPORTED_CALL, f"module {type(value).__name__} has "
                                  f"{hooks[1:]}", "remove the hooks to compile the module")
        self.guard_type(module)
        forward = type(value).forward
        # a source for forward, so its globals are read as type(self).forward.__globals__
        forward_var = ObjectVar(forward, source=module.source and AttrSource(
            TypeSource(module.source), "forward"))
        return self.inline_function(tx, forward, forward_var, [module] + args, kwargs)

    def inline_function(self: TraceState, tx: Translator, fn: types.FunctionType, fn_var: Any,
                        args: list[Var], kwargs: dict[str, Var]) -> Var:
        nested = user_objects.nested_of(fn)
        if nested is not None:  # a method of a class the trace defined: the trace's cells
            return self.inline(tx, nested, args, kwargs)
        source = fn_var.source if fn_var is not None else None
        if source is not None:
            self._guard(GuardKind.CODE_MATCH, source, fn.__code__)
        defaults = tuple(self.wrap_value(v, None) for v in fn.__defaults__ or ())
        kwdefaults = {k: self.wrap_value(v, None) for k, v in (fn.__kwdefaults__ or {}).items()}
        cells = tuple(CellVar(contents=self.wrap_value(
            cell.cell_contents, source and CellContentsSource(source, i, var=name)),
            source=source)
            for i, (name, cell) in enumerate(zip(fn.__code__.co_freevars, fn.__closure__ or (),
                                                 strict=True)))
        nested = NestedFunctionVar(fn.__code__, fn.__globals__, defaults, kwdefaults, cells)
        global_source: Source | None = None
        if fn.__globals__ is not tx.f_globals and source is not None:
            global_source = AttrSource(source, "__globals__")
        elif fn.__globals__ is tx.f_globals:
            global_source = tx.global_source
        else:  # reached without a source: its module's globals (a guard must not read ours)
            global_source = _module_globals(fn)
        return self.inline(tx, nested, args, kwargs, global_source)

    def run_class_body(self: TraceState, tx: Translator,
                       body: NestedFunctionVar) -> tuple[dict, Any]:
        """Run a class statement's body; its namespace (names -> Vars) and `__class__` cell
        (Note [Classes defined in traced code] in user_objects.py)."""
        if tx.depth + 1 > MAX_INLINE_DEPTH:
            raise Unsupported(BreakKind.INLINE_TOO_DEEP,
                              f"calls nested more than {MAX_INLINE_DEPTH} "
                              "deep (recursion?)")
        code = body.code
        cells = dict(zip(code.co_freevars, body.closure, strict=True))
        global_source = tx.global_source if body.globals is tx.f_globals else None
        child = Translator(cast("TraceContext", self), code, body.globals, {}, cells,
                           tx.depth + 1, global_source)
        location = self.recorder.location
        child.run()
        self.recorder.location = location
        return child.locals, child.cells.get("__class__")

    def inline(self: TraceState, tx: Translator, fn: NestedFunctionVar, args: list[Var],
               kwargs: dict[str, Var], global_source: Any = None) -> Var:
        if tx.depth + 1 > MAX_INLINE_DEPTH:
            raise Unsupported(BreakKind.INLINE_TOO_DEEP,
                              f"calls nested more than {MAX_INLINE_DEPTH} "
                              "deep (recursion?)")
        code = fn.code
        if code.co_flags & opcodes.COROUTINE_FLAGS:
            raise Unsupported(BreakKind.UNSUPPORTED_CALL, f"call to the coroutine {code.co_name}()",
                              "coroutines are not traced")
        locals_ = bind_arguments(code, fn.defaults, fn.kwdefaults, args, kwargs)
        cells = dict(zip(code.co_freevars, fn.closure, strict=True))
        if global_source is None and fn.globals is tx.f_globals:
            global_source = tx.global_source
        child = Translator(cast("TraceContext", self), code, fn.globals, locals_, cells,
                           tx.depth + 1, global_source)
        if code.co_flags & opcodes.GENERATOR_FLAG:  # run lazily (Note [Generators])
            return GeneratorVar(frame=child)
        location = self.recorder.location
        result = child.run()
        self.recorder.location = location
        assert result is not None, "an inlined frame runs to its return (it has no stop_at)"
        return result


def _module_globals(fn: types.FunctionType) -> Source:
    """The source of the globals of `fn`, a function of a module other than the compiled
    function's, reached without a source; Unsupported when no module holds them (globals
    made for exec)."""
    module = sys.modules.get(fn.__module__)
    if module is None or module.__dict__ is not fn.__globals__:
        raise Unsupported(BreakKind.UNSUPPORTED_CALL, f"call to {fn.__qualname__}, whose "
                          "globals belong to no module", "call it outside the compiled function")
    return ModuleGlobalsSource(module)


def is_user_code(fn: Any) -> bool:
    """Python functions outside the stdlib, site-packages and jitgrad itself."""
    return isinstance(fn, types.FunctionType) and is_user_file(fn.__code__.co_filename)


def is_user_file(filename: str) -> bool:
    """A file outside the stdlib, site-packages and jitgrad itself."""
    return not filename.startswith(LIBRARY_DIRS) and not filename.startswith(JITGRAD_DIR)


def _map_values(values: list[Any], fn: Any) -> list[Any]:
    """`values` with fn applied to every leaf inside lists and tuples."""
    out = []
    for value in values:
        if isinstance(value, (list, tuple)):
            out.append(type(value)(_map_values(list(value), fn)))
        else:
            out.append(fn(value))
    return out


def bind_arguments(code: types.CodeType, defaults: tuple[Var, ...], kwdefaults: dict[str, Var],
                   args: list[Var], kwargs: dict[str, Var]) -> dict[str, Var]:
    """Bind Vars to a code object's parameters as CPython would (defaults, *args, **kw).

    Raises Unsupported(BreakKind.USER_ERROR) when the call does not fit the signature.
    """
    n_args, n_posonly, n_kwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    names = code.co_varnames
    positional_names = names[:n_args]
    kwonly_names = names[n_args:n_args + n_kwonly]
    index = n_args + n_kwonly
    varargs_name = varkw_name = None
    if code.co_flags & 0x04:
        varargs_name = names[index]
        index += 1
    if code.co_flags & 0x08:
        varkw_name = names[index]
    bound: dict[str, Var] = dict(zip(positional_names, args, strict=False))
    extra = args[n_args:]
    if extra and varargs_name is None:
        raise Unsupported(BreakKind.USER_ERROR, f"{code.co_name}() takes {n_args} positional "
                          f"arguments but {len(args)} were given")
    if varargs_name is not None:
        bound[varargs_name] = TupleVar(list(extra))
    extra_kwargs: dict[str, Var] = {}
    for key, value in kwargs.items():
        if key in positional_names[n_posonly:] or key in kwonly_names:
            if key in bound:
                raise Unsupported(BreakKind.USER_ERROR, f"{code.co_name}() got multiple values for "
                                  f"argument {key!r}")
            bound[key] = value
        elif varkw_name is not None:
            extra_kwargs[key] = value
        else:
            raise Unsupported(BreakKind.USER_ERROR, f"{code.co_name}() got an unexpected keyword "
                              f"argument {key!r}")
    first_default = n_args - len(defaults)
    for i, name in enumerate(positional_names):
        if name not in bound:
            if i < first_default:
                raise Unsupported(BreakKind.USER_ERROR,
                                  f"{code.co_name}() missing argument {name!r}")
            bound[name] = defaults[i - first_default]
    for name in kwonly_names:
        if name not in bound:
            if name not in kwdefaults:
                raise Unsupported(BreakKind.USER_ERROR, f"{code.co_name}() missing keyword-only "
                                  f"argument {name!r}")
            bound[name] = kwdefaults[name]
    if varkw_name is not None:
        bound[varkw_name] = DictVar(extra_kwargs)
    return bound
