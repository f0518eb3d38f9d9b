"""Instances of user classes made in traced code, namedtuples, and `super()`.

Note [Objects made in traced code]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A forward may build a small object and use it at once: a dataclass config, a helper
with methods (`Scaler(2.0).apply(x)`), a namedtuple of results. Such an object exists
only inside the trace, so the tracer models it instead of making it: a `UserObjectVar`
holds its class and its instance dict as Vars. Calling the class inlines `__init__`
(a dataclass's generated one too) with the new Var as `self`; attribute reads come from
the instance dict, then the class's MRO as Python finds them (functions become methods
bound to the Var, properties run their getter inlined, static and class methods as
Python binds them); attribute writes go to the instance dict (a property's setter runs
inlined), since nothing outside the trace can see the object yet. Methods and
properties read through a class the frame reaches are guarded by their code, so
replacing one recompiles. An object that would leave the graph (returned, stored
outside, live at a graph break) is refused (the frame then runs eagerly): rebuilding
it after the graph would make a copy per reference, where eager has one object that
every alias, list and attribute shares. Only plain classes are
modelled: no metaclass, no `__new__`, `__getattr__`, `__getattribute__` or
`__setattr__` of their own (a frozen dataclass's, which refuses writes, is modelled by
refusing them), no builtin base but `object`, defined in user code; calling any other
class falls back as before.

Note [Classes defined in traced code]: a `class` statement in the traced frame (or an
inlined callee) runs its body symbolically: STORE_NAME fills a namespace of Vars, the
methods are NestedFunctionVars closing over the frame's own cells. The class is then made
for real from that namespace, each method a real function whose code is the method's and
whose cells are empty: `_LOCAL_FUNCTIONS` maps it back to its NestedFunctionVar, so an
inlined call of it runs with the trace's cells, and a method appending to a list of the
frame appends to the trace's ListVar. `property`, `staticmethod`, `classmethod` and the
`dataclasses` decorators run for real on those functions and classes; a `__class__` cell
(zero-argument `super()`) holds the new class. Instances are objects made in traced code
as above. The class is the trace's own: it must not leave the graph (eager makes a new
class each call), so a class or method that would is refused (the frame runs eagerly).

A namedtuple class called in traced code binds its arguments to its fields (with the
field defaults) and gives the TupleVar with that class, as real code's namedtuple
results are modelled. `super()` (zero-argument, in an inlined method, or
`super(cls, obj)`) gives a `SuperVar`; reading a method from it finds the next class
after `cls` in the MRO of the object's class, bound to the object.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import weakref
from typing import TYPE_CHECKING, Any

from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.capture.sources import AttrSource
from jitgrad.trace.capture.variables import (
    CellVar,
    ConstVar,
    DictVar,
    NestedFunctionVar,
    ObjectVar,
    SuperVar,
    TupleVar,
    UserMethodVar,
    UserObjectVar,
    Var,
)

if TYPE_CHECKING:
    from jitgrad.trace.capture.translator import Translator

# Note [Classes defined in traced code]
_LOCAL_FUNCTIONS: weakref.WeakKeyDictionary[types.FunctionType, NestedFunctionVar] = \
    weakref.WeakKeyDictionary()
_LOCAL_CLASSES: weakref.WeakSet[type] = weakref.WeakSet()
_DECORATORS = (property, staticmethod, classmethod)


def build_class(tx: Translator, body: Var, name: str, bases: tuple,
                kwargs: dict[str, Var]) -> Var:
    """`class name(*bases): body` run in the trace (Note [Classes defined in traced code])."""
    if kwargs:
        raise Unsupported(BreakKind.UNSUPPORTED_CALL, f"class {name} with keywords (a metaclass)")
    if not isinstance(body, NestedFunctionVar):
        raise Unsupported(BreakKind.UNSUPPORTED_CALL,
                          f"class {name} built from a {type(body).__name__}")
    names, class_cell = tx.ctx.run_class_body(tx, body)
    namespace = {key: _made_attribute(key, var) for key, var in names.items()
                 if key != "__classcell__"}
    cls = types.new_class(name, bases, {}, lambda ns: ns.update(namespace))
    _LOCAL_CLASSES.add(cls)
    if isinstance(class_cell, CellVar):
        class_cell.contents = ObjectVar(cls)
    return ObjectVar(cls)


def _made_attribute(name: str, var: Var) -> Any:
    if isinstance(var, NestedFunctionVar):
        return local_function(var)
    if isinstance(var, (ConstVar, ObjectVar)):
        return var.value
    if isinstance(var, DictVar) and name == "__annotations__":
        return {key: _made_attribute(name, value) for key, value in var.items.items()}
    raise Unsupported(BreakKind.UNSUPPORTED_VALUE, f"the class attribute {name} is a "
                      f"{type(var).__name__} (a class body may hold constants and functions)")


def local_function(var: NestedFunctionVar) -> types.FunctionType:
    """A real function for a method of a class defined in the trace (see the Note)."""
    def constant(v: Var) -> Any:
        if not isinstance(v, ConstVar):
            raise Unsupported(BreakKind.UNSUPPORTED_VALUE, "a default of a method defined in the "
                              "trace that is not a constant")
        return v.value

    code = var.code
    fn = types.FunctionType(code, var.globals, code.co_name,
                            tuple(constant(v) for v in var.defaults) or None,
                            tuple(types.CellType() for _ in var.closure) or None)
    fn.__kwdefaults__ = {k: constant(v) for k, v in var.kwdefaults.items()} or None
    fn.__qualname__ = code.co_qualname
    _LOCAL_FUNCTIONS[fn] = var
    return fn


def nested_of(fn: Any) -> NestedFunctionVar | None:
    """The NestedFunctionVar a method of a class defined in the trace stands for."""
    return _LOCAL_FUNCTIONS.get(fn) if isinstance(fn, types.FunctionType) else None


def is_local(value: Any) -> bool:
    """A class defined in the trace, or one of its methods (they must not leave it)."""
    if isinstance(value, types.MethodType):
        value = value.__func__
    return (isinstance(value, type) and value in _LOCAL_CLASSES) or nested_of(value) is not None


def decorates_local(value: Any, args: list[Var]) -> bool:
    """A decorator of a class body (`property`, `x.setter`, `staticmethod`, `classmethod`,
    `dataclasses.dataclass`) applied to what the trace defined: run for real."""
    if not all(isinstance(a, NestedFunctionVar) or isinstance(a, ObjectVar) and
               is_local(a.value) or isinstance(a, ConstVar) for a in args):
        return False
    if getattr(value, "__module__", None) == dataclasses.__name__:  # `dataclass(frozen=True)`
        return True                                                  # too: a decorator
    owner = getattr(value, "__self__", None)
    return bool(args) and (value in _DECORATORS or isinstance(owner, property))


def decorate(value: Any, args: list[Var], kwargs: dict[str, Any]) -> Var:
    result = value(*map(_decorated_value, args), **kwargs)
    if isinstance(result, type):
        _LOCAL_CLASSES.add(result)
    return ObjectVar(result)


def _decorated_value(var: Var) -> Any:
    if isinstance(var, NestedFunctionVar):
        return local_function(var)
    assert isinstance(var, ObjectVar | ConstVar), "decorates_local admits these"
    return var.value


_OWN_ATTRIBUTE_HOOKS = ("__new__", "__getattr__", "__getattribute__", "__setattr__",
                        "__delattr__")


def is_plain_user_class(value: Any, is_user_file: Any) -> bool:
    """Whether calling `value` may make a `UserObjectVar` (see the Note).

    is_user_file: `(filename) -> bool`, whether a file holds user code."""
    if not isinstance(value, type) or type(value) is not type:
        return False
    if any(base is not object and base.__module__ == "builtins" for base in value.__mro__):
        return False
    hooks = _OWN_ATTRIBUTE_HOOKS[:3] if _is_frozen_dataclass(value) else _OWN_ATTRIBUTE_HOOKS
    if any(getattr(value, hook, None) is not getattr(object, hook, None) for hook in hooks):
        return False
    module = sys.modules.get(value.__module__)
    filename = getattr(module, "__file__", None)
    return filename is None or is_user_file(filename)


def _is_frozen_dataclass(cls: type) -> bool:
    params = cls.__dict__.get("__dataclass_params__")
    return params is not None and params.frozen


def is_namedtuple_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, tuple) and \
        isinstance(getattr(value, "_fields", None), tuple) and hasattr(value, "_make")


def construct(tx: Translator, cls_var: ObjectVar, args: list[Var], kwargs: dict[str, Var]) -> Var:
    """`Cls(*args, **kwargs)` for a plain user class: a new object, `__init__` inlined."""
    cls = cls_var.value
    if cls_var.source is not None:
        tx.ctx.guard_identity(cls_var)
    obj = UserObjectVar(cls, {}, cls_source=cls_var.source)
    init = _class_attribute(cls.__mro__, "__init__")
    if init is object.__init__:
        if args or kwargs:
            raise Unsupported(BreakKind.USER_ERROR, f"{cls.__name__}() takes no arguments")
        return obj
    if not isinstance(init, types.FunctionType) or not tx.ctx.is_user_function(init):
        raise Unsupported(BreakKind.UNSUPPORTED_CALL, f"constructing {cls.__qualname__}, whose "
                          "__init__ is not Python code the tracer can inline",
                          "build the object outside the compiled function")
    init_var = ObjectVar(init, source=cls_var.source and AttrSource(cls_var.source, "__init__"))
    result = tx.ctx.inline_function(tx, init, init_var, [obj, *args], kwargs)
    if not (isinstance(result, ConstVar) and result.value is None):
        raise Unsupported(BreakKind.USER_ERROR, "__init__() should return None")
    return obj


def construct_namedtuple(tx: Translator, cls_var: ObjectVar, args: list[Var],
                         kwargs: dict[str, Var]) -> TupleVar:
    """`Point(x, y=2)` for a namedtuple class: its fields bound as Python binds them."""
    cls = cls_var.value
    if cls_var.source is not None:
        tx.ctx.guard_identity(cls_var)
    fields = cls._fields
    if len(args) > len(fields):
        raise Unsupported(BreakKind.USER_ERROR, f"{cls.__name__}() takes {len(fields)} positional "
                          f"arguments but {len(args)} were given")
    bound: dict[str, Var] = dict(zip(fields, args, strict=False))
    for name, value in kwargs.items():
        if name not in fields or name in bound:
            raise Unsupported(BreakKind.USER_ERROR,
                              f"{cls.__name__}() got an unexpected or repeated "
                              f"argument {name!r}")
        bound[name] = value
    for name, default in cls._field_defaults.items():
        bound.setdefault(name, tx.ctx.wrap_value(default, None))
    missing = [name for name in fields if name not in bound]
    if missing:
        raise Unsupported(BreakKind.USER_ERROR, f"{cls.__name__}() missing required arguments: "
                          f"{', '.join(map(repr, missing))}")
    return TupleVar([bound[name] for name in fields], cls=cls)


def zero_argument_super(tx: Translator) -> SuperVar:
    """`super()` inside an inlined method: its class from the `__class__` cell, the object
    from the method's first argument, as CPython's super() reads them from the frame."""
    code = tx.code
    cell = tx.cells.get("__class__")
    if cell is None or cell.contents is None or not code.co_argcount:
        raise Unsupported(BreakKind.USER_ERROR, "super(): __class__ cell not found")
    cls = getattr(cell.contents, "value", None)
    if not isinstance(cls, type):
        raise Unsupported(BreakKind.UNSUPPORTED_CALL, "super() in a class the tracer does not know")
    first = code.co_varnames[0]
    obj = tx.cells[first].contents if first in tx.cells else tx.locals.get(first)
    if obj is None:
        raise Unsupported(BreakKind.USER_ERROR, "super(): no arguments")
    return SuperVar(cls, obj)


def load_attr(tx: Translator, obj: UserObjectVar, name: str) -> Var:
    """`obj.name` for an object made in the trace (instance dict, then the class)."""
    if name in obj.attrs:
        return obj.attrs[name]
    if name == "__class__":
        return ObjectVar(obj.cls, source=obj.cls_source)
    if name == "__dict__":
        raise Unsupported(BreakKind.UNSUPPORTED_ATTRIBUTE,
                          "__dict__ of an object made in the trace")
    source = obj.cls_source and AttrSource(obj.cls_source, name)
    return _bind(tx, obj, obj.cls.__mro__, name, source,
                 f"'{obj.cls.__name__}' object has no attribute '{name}'")


def load_super_attr(tx: Translator, sup: SuperVar, name: str) -> Var:
    """`super().name`: looked up after `sup.cls` in the MRO of the object's class."""
    owner = _owner(sup.obj)
    mro = owner.__mro__
    if sup.cls not in mro:
        raise Unsupported(BreakKind.USER_ERROR, "super(type, obj): obj must be an instance or "
                          "subtype of type")
    after = mro[mro.index(sup.cls) + 1:]
    if name == "__init__" and _class_attribute(after, name) is object.__init__:
        return UserMethodVar(None, sup.obj)
    return _bind(tx, sup.obj, after, name, None, f"'super' object has no attribute '{name}'")


def store_attr(tx: Translator, obj: UserObjectVar, name: str, value: Var) -> None:
    """`obj.name = value`: the instance dict (nothing outside the trace sees the object),
    or the class's property setter, inlined."""
    if _is_frozen_dataclass(obj.cls):
        raise Unsupported(BreakKind.USER_ERROR, f"cannot assign to field {name!r}")  # eager's error
    attr = _class_attribute(obj.cls.__mro__, name)
    if isinstance(attr, property):
        setter = attr.fset
        if setter is None or not tx.ctx.is_user_function(setter):
            raise Unsupported(BreakKind.USER_ERROR if setter is None
                              else BreakKind.UNSUPPORTED_ATTRIBUTE,
                              f"property {name!r} of {obj.cls.__name__!r} object has no setter"
                              if setter is None else f"the setter of {name} is not Python "
                              "code the tracer can inline")
        source = obj.cls_source and AttrSource(AttrSource(obj.cls_source, name), "fset")
        tx.ctx.inline_function(tx, setter, ObjectVar(setter, source=source), [obj, value], {})
        return
    set_attr(obj, name, value)


def set_attr(obj: UserObjectVar, name: str, value: Var) -> None:
    """`object.__setattr__(obj, name, value)` (a frozen dataclass's __init__ writes so)."""
    if hasattr(_class_attribute(obj.cls.__mro__, name), "__set__"):
        raise Unsupported(BreakKind.UNSUPPORTED_ATTRIBUTE,
                          f"assigning {obj.cls.__name__}.{name}, a "
                          "property or descriptor, on an object made in the trace")
    obj.attrs[name] = value


def call_method(tx: Translator, method: UserMethodVar, args: list[Var],
                kwargs: dict[str, Var]) -> Var:
    if method.function is None:
        if args or kwargs:
            raise Unsupported(BreakKind.USER_ERROR, "object.__init__() takes exactly one argument")
        return ConstVar(None)
    return tx.ctx.inline_function(tx, method.function,
                                  ObjectVar(method.function, source=method.source),
                                  [method.obj, *args], kwargs)


def _owner(obj: Var) -> type:
    """The class whose MRO attribute reads through `obj` follow: an object's class, or the
    class itself for `super()` in a classmethod (whose first argument is the class)."""
    if isinstance(obj, UserObjectVar):
        return obj.cls
    value = getattr(obj, "value", None)
    return value if isinstance(value, type) else type(value)


_MISSING = object()


def _class_attribute(mro: tuple[type, ...], name: str, default: Any = None) -> Any:
    """`name` as the first class of `mro` defining it holds it (no binding)."""
    for klass in mro:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return default


def _bind(tx: Translator, obj: Var, mro: tuple[type, ...], name: str, source: Any,
          missing: str) -> Var:
    """A class attribute found in `mro`, bound to `obj` as Python binds it."""
    attr = _class_attribute(mro, name, _MISSING)
    if attr is _MISSING:
        raise Unsupported(BreakKind.USER_ERROR, missing)
    if isinstance(attr, staticmethod):
        return ObjectVar(attr.__func__)
    if isinstance(attr, classmethod):
        return ObjectVar(types.MethodType(attr.__func__, _owner(obj)))
    if isinstance(attr, property):
        function = attr.fget
        if function is None or not tx.ctx.is_user_function(function):
            raise Unsupported(BreakKind.UNSUPPORTED_ATTRIBUTE, f"the property {name} is not Python "
                              "code the tracer can inline")
        getter = ObjectVar(function, source=source and AttrSource(source, "fget"))
        return tx.ctx.inline_function(tx, function, getter, [obj], {})
    if isinstance(attr, types.FunctionType):
        if not tx.ctx.is_user_function(attr):
            raise Unsupported(BreakKind.UNSUPPORTED_CALL,
                              f"the method {name} is not Python code the "
                              "tracer can inline")
        return UserMethodVar(attr, obj, source=source)  # its code guarded when called
    if hasattr(attr, "__get__"):
        raise Unsupported(BreakKind.UNSUPPORTED_ATTRIBUTE, f"{name}, a descriptor of "
                          f"{type(attr).__name__}, read through an object made in the trace")
    return tx.ctx.wrap_value(attr, source)
