"""What the translator does with a call: inline a user function in a child Translator,
run a builtin (builtin_calls.py), record an op or run real code on fake tensors
(operations.py), construct a module or user object, or break.
"""

from __future__ import annotations

import builtins
import types
from typing import TYPE_CHECKING, Any

import numpy as np

from jitgrad.eager import grad_mode
from jitgrad.eager.ops.inplace import apply_inplace
from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.capture import functionalize, user_objects
from jitgrad.trace.capture.builtin_calls import BUILTINS
from jitgrad.trace.capture.operations import (
    call_container_method,
    callable_name,
    constant,
    run_real,
    to_python,
    wrap_result,
)
from jitgrad.trace.capture.sources import AttrSource, CellContentsSource
from jitgrad.trace.capture.variables import (
    BoundMethodVar,
    ConstVar,
    GradModeExitVar,
    GradModeVar,
    NestedFunctionVar,
    ObjectVar,
    SuperVar,
    TensorMethodVar,
    TensorVar,
    UserMethodVar,
    UserObjectVar,
    Var,
)
from jitgrad.trace.runtime import disabled

if TYPE_CHECKING:
    from jitgrad.trace.capture.translator import Translator

_GRAD_MODE_MANAGERS = {grad_mode.no_grad: False, grad_mode.enable_grad: True}
# the code of every function made by `@no_grad()` / `@enable_grad()` used as a decorator
_GRAD_MODE_WRAPPER_CODE = grad_mode.no_grad()(lambda: None).__code__


def call(tx: Translator, fn: Var, args: list[Var], kwargs: dict[str, Var]) -> Var:
    """Call `fn(*args, **kwargs)` symbolically."""
    if isinstance(fn, NestedFunctionVar):
        return tx.ctx.inline(tx, fn, args, kwargs)
    if isinstance(fn, GradModeExitVar):
        return tx.ctx.exit_grad_mode(fn)
    if isinstance(fn, BoundMethodVar):
        return call_container_method(tx, fn, args, kwargs)
    if isinstance(fn, UserMethodVar):
        return user_objects.call_method(tx, fn, args, kwargs)
    if isinstance(fn, TensorMethodVar):
        if fn.name == "storage_offset":
            tx.ctx.guard_storage_offsets()
        return run_real(tx, getattr(fn.tensor.fake, fn.name), [to_python(tx, a) for a in args],
                        {k: to_python(tx, v) for k, v in kwargs.items()})
    if isinstance(fn, ObjectVar):
        return call_object(tx, fn, args, kwargs)
    if isinstance(fn, ConstVar) and callable(fn.value):  # e.g. a class in co_consts
        return call_object(tx, ObjectVar(fn.value, source=fn.source), args, kwargs)
    if isinstance(fn, ConstVar):  # `f(x)` with f an int or None: eager's TypeError
        raise Unsupported(BreakKind.USER_ERROR,
                          f"'{type(fn.value).__name__}' object is not callable")
    raise Unsupported(BreakKind.UNSUPPORTED_CALL, f"calling a {type(fn).__name__}")


def call_object(tx: Translator, fn: ObjectVar, args: list[Var], kwargs: dict[str, Var]) -> Var:
    value = fn.value
    if not callable(value):
        raise Unsupported(BreakKind.USER_ERROR, f"'{type(value).__name__}' object is not callable")
    if value in _GRAD_MODE_MANAGERS and not args and not kwargs:
        return GradModeVar(_GRAD_MODE_MANAGERS[value])
    if value is grad_mode.set_grad_enabled and len(args) == 1 and not kwargs:
        previous = grad_mode.STATE.enabled
        tx.ctx.set_grad_mode(bool(constant(tx, args[0])))  # effective at once, as in eager
        return GradModeVar(grad_mode.STATE.enabled, previous)
    if value is grad_mode.inference_mode and len(args) <= 1 and not kwargs:
        return GradModeVar(not (constant(tx, args[0]) if args else True))
    if disabled.is_disabled(value):
        raise Unsupported(BreakKind.DISABLED_CALLEE,
                          f"{callable_name(value)} is marked jitgrad.disable",
                          "call it outside the compiled function, or remove jitgrad.disable "
                          "to compile it")
    if value is disabled.graph_break:
        raise Unsupported(BreakKind.EXPLICIT_BREAK, "jitgrad.graph_break() was called")
    if value is object.__setattr__ and len(args) == 3 and not kwargs and isinstance(
            args[0], UserObjectVar):  # a frozen dataclass's __init__
        user_objects.set_attr(args[0], constant(tx, args[1]), args[2])
        return ConstVar(None)
    if value is super and not kwargs and len(args) in (0, 2):
        if not args:
            return user_objects.zero_argument_super(tx)
        return SuperVar(constant(tx, args[0]), args[1])
    if value is builtins.__build_class__ and len(args) >= 2:
        bases = tuple(constant(tx, b) for b in args[2:])
        return user_objects.build_class(tx, args[0], constant(tx, args[1]), bases, kwargs)
    if user_objects.decorates_local(value, args):
        return user_objects.decorate(value, args, {k: constant(tx, v) for k, v in kwargs.items()})
    if value is builtins.__build_class__ and len(args) >= 2:
        bases = tuple(constant(tx, b) for b in args[2:])
        return user_objects.build_class(tx, args[0], constant(tx, args[1]), bases, kwargs)
    if user_objects.decorates_local(value, args):
        return user_objects.decorate(value, args, {k: constant(tx, v) for k, v in kwargs.items()})
    if disabled.is_allowed_in_graph(value):
        if fn.source is not None:
            tx.ctx.guard_identity(fn)
        return tx.ctx.opaque_call(value, [to_python(tx, a) for a in args],
                                  {k: to_python(tx, v) for k, v in kwargs.items()})
    decorated = grad_mode_decorated(value)
    if decorated is not None and tx.ctx.is_user_function(decorated[1]):
        return _inline_in_grad_mode(tx, fn, decorated, args, kwargs)
    if _is_constant_math(value) and not any(isinstance(a, TensorVar) for a in args):
        # math.sqrt(d), np.sqrt(d) on trace-time constants fold to a constant
        return wrap_result(tx, value(*[constant(tx, a) for a in args],
                                     **{k: constant(tx, v) for k, v in kwargs.items()}))
    if isinstance(value, type) and issubclass(value, BaseException):
        # `raise ValueError(f"... {x.shape}")`: made from constants (Note [User errors])
        return tx.ctx.wrap_value(value(*[constant(tx, a) for a in args],
                                       **{k: constant(tx, v) for k, v in kwargs.items()}), None)
    builtin = BUILTINS.get(value) if _hashable(value) else None
    if builtin is not None:
        return builtin(tx, args, kwargs)
    if tx.ctx.is_module(value):
        return tx.ctx.inline_module_call(tx, fn, args, kwargs)
    function = value.__func__ if isinstance(value, types.MethodType) else None
    if function is not None and tx.ctx.is_user_function(function):
        return tx.ctx.inline_function(tx, function, fn, [_receiver(tx, fn)] + args, kwargs)
    if isinstance(value, types.FunctionType) and tx.ctx.is_user_function(value):
        return tx.ctx.inline_function(tx, value, fn, args, kwargs)
    if tx.ctx.is_module_class(value):
        return _construct_module(tx, fn, args, kwargs)
    if user_objects.is_namedtuple_class(value):
        return user_objects.construct_namedtuple(tx, fn, args, kwargs)
    if user_objects.is_plain_user_class(value, tx.ctx.is_user_file):
        return user_objects.construct(tx, fn, args, kwargs)
    if value is apply_inplace:
        return _apply_inplace(tx, args, kwargs)
    if tx.ctx.is_jitgrad_callable(value):
        if fn.source is not None:  # the same name may hold another function next call
            tx.ctx.guard_identity(fn)
        return run_real(tx, value, [to_python(tx, a) for a in args],
                        {k: to_python(tx, v) for k, v in kwargs.items()})
    raise Unsupported(BreakKind.UNSUPPORTED_CALL,
                      f"call to {callable_name(value)}, which the tracer does not "
                      "know", "move it outside the compiled function, or mark a pure tensor "
                      "function with jitgrad.allow_in_graph")


# Note [Modules made in traced code]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A forward may build a layer on the fly and call it: `nn.MaxPool2d((h, 1))(x)`,
# `nn.Softmax(dim=1)(x)`. A jitgrad.nn layer without parameters, buffers or submodules
# holds only its constructor's constants, so it is built for real at trace time from
# constant arguments (guarded like any constant) and its forward inlined as any module's.
# Nothing of it reaches the graph but the ops of its forward. Should it leave the graph
# (returned, stored on an attribute, live at a graph break), it is built again from the
# same class and arguments, a new object each call as in eager (ObjectVar.factory).
# A layer with parameters or buffers would draw its init (or hold state) at trace time:
# refused, so it is built eagerly at a graph break.


def _construct_module(tx: Translator, cls: ObjectVar, args: list[Var],
                      kwargs: dict[str, Var]) -> Var:
    """`nn.MaxPool2d(k)` in traced code (Note [Modules made in traced code])."""
    if cls.source is not None:
        tx.ctx.guard_identity(cls)
    values = tuple(constant(tx, a) for a in args)
    kw_values = {k: constant(tx, v) for k, v in kwargs.items()}
    module = run_real(tx, cls.value, list(values), kw_values, wrap=False)
    if module._parameters or module._buffers or module._modules:
        raise Unsupported(BreakKind.UNSUPPORTED_CALL,
                          f"constructing {callable_name(cls.value)}, a layer with "
                          "parameters, buffers or submodules, in compiled code",
                          "create it in __init__ and call it in forward")
    return ObjectVar(module, factory=(cls.value, values, kw_values))


def _apply_inplace(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    """`apply_inplace(target, compute)`, eager's in-place form of an op given as a function
    (`F.relu(x, inplace=True)` and the other in-place activation forms): `compute` is
    inlined on `target` and its result written into `target` as every in-place op on a
    traced tensor is (Note [Functionalized in-place ops] in functionalize.py)."""
    target = args[0] if len(args) == 2 else None
    if not isinstance(target, TensorVar) or set(kwargs) - {"check_dtype"}:
        raise Unsupported(BreakKind.UNSUPPORTED_CALL, "apply_inplace with other arguments than "
                          "(tensor, function, check_dtype=...)")
    compute = args[1]
    result = call(tx, compute, [target], {})
    if not isinstance(result, TensorVar):
        raise Unsupported(BreakKind.UNSUPPORTED_CALL, "apply_inplace of a function that does "
                          "not return a tensor")
    check_dtype = constant(tx, kwargs["check_dtype"]) if "check_dtype" in kwargs else True
    functionalize.write(target.fake, result.fake, "an in-place activation", check_dtype)
    return target


def grad_mode_decorated(value: Any) -> tuple[bool, types.FunctionType] | None:
    """(mode, the decorated function) for a function made by `@no_grad()`/`@enable_grad()`
    (or such a method, bound), else None."""
    function = value.__func__ if isinstance(value, types.MethodType) else value
    if getattr(function, "__code__", None) is not _GRAD_MODE_WRAPPER_CODE:
        return None
    cells = dict(zip(function.__code__.co_freevars, function.__closure__ or (), strict=True))
    return cells["mode"].cell_contents, cells["fn"].cell_contents


def _inline_in_grad_mode(tx: Translator, fn: ObjectVar, decorated: tuple[bool, types.FunctionType],
                         args: list[Var], kwargs: dict[str, Var]) -> Var:
    """A call of a `@no_grad()`-decorated user function: its body inlined in that mode."""
    mode, inner = decorated
    value = fn.value
    if fn.source is not None:  # the decorator's mode, then the decorated code
        index = _GRAD_MODE_WRAPPER_CODE.co_freevars.index("mode")
        tx.ctx.guard_constant(ConstVar(mode, source=CellContentsSource(fn.source, index,
                                                                       var="mode")))
    inner_var = ObjectVar(inner, source=fn.source and AttrSource(fn.source, "__wrapped__"))
    if isinstance(value, types.MethodType):
        args = [_receiver(tx, fn)] + args
    exit_var = tx.ctx.enter_grad_mode(mode)
    result = tx.ctx.inline_function(tx, inner, inner_var, args, kwargs)
    tx.ctx.exit_grad_mode(exit_var)
    return result


def _receiver(tx: Translator, method: ObjectVar) -> Var:
    """The `self` of a bound method: the Var it was read from, else `method.__self__`."""
    if method.receiver is not None:
        return method.receiver
    return tx.ctx.wrap_value(method.value.__self__, method.source and AttrSource(
        method.source, "__self__"))


def _is_constant_math(fn: Any) -> bool:
    """Pure numeric functions of the math module and numpy ufuncs, folded on constants."""
    return getattr(fn, "__module__", None) == "math" or isinstance(fn, np.ufunc)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
