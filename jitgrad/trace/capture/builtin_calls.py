"""Calls of Python builtins while tracing (`BUILTINS`: builtin -> handler(tx, args, kwargs)).

`len`, `isinstance`, `range`, `zip`, `enumerate`, containers, `getattr`/`hasattr`, `print`,
folding builtins on constants, and `sum`/`min`/`max`/`sorted`/`any`/`all` consuming traced
iterables (generators included) as the builtin would.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.capture import symbolic
from jitgrad.trace.capture.fake import FakeNumber
from jitgrad.trace.capture.operations import (
    constant,
    load_attr,
    next_item,
    run_real,
    to_python,
    truth,
    unpack_iterable,
    wrap_result,
)
from jitgrad.trace.capture.variables import (
    ConstVar,
    DictVar,
    GeneratorVar,
    IteratorVar,
    ListVar,
    ObjectVar,
    SetVar,
    TensorVar,
    TupleVar,
    UserObjectVar,
    Var,
)

if TYPE_CHECKING:
    from jitgrad.trace.capture.translator import Translator


def _builtin_len(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    (value,) = args
    if isinstance(value, TensorVar):
        if not value.fake.ndim:
            raise Unsupported(BreakKind.USER_ERROR, "TypeError: len() of a 0-d tensor")
        return ConstVar(value.fake.size(0))
    if isinstance(value, (TupleVar, ListVar, DictVar, SetVar)):
        return ConstVar(len(value.items))
    return ConstVar(len(constant(tx, value)))


def _number_type(var: Var) -> type | None:
    """The Python type of a number that became a graph input (its type is guarded)."""
    if isinstance(var, TensorVar) and isinstance(var.fake, FakeNumber):
        example = var.fake.__dict__.get("value")
        if example is not None:
            return type(example)
        return {"b": bool, "i": int, "u": int}.get(var.fake._data.dtype.kind, float)
    return None


def _builtin_isinstance(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    value, classes = args
    classes = constant(tx, classes)
    number_type = _number_type(value)
    if number_type is not None:  # a Python number, whatever stands for it in the graph
        return ConstVar(issubclass(number_type, classes))
    if isinstance(value, TensorVar):
        return ConstVar(isinstance(value.fake, classes))
    if isinstance(value, UserObjectVar):
        return ConstVar(issubclass(value.cls, classes))
    if isinstance(value, TupleVar) and value.cls is not None:  # a namedtuple
        return ConstVar(issubclass(value.cls, classes))
    kinds = {TupleVar: tuple, ListVar: list, DictVar: dict}
    if type(value) in kinds:
        return ConstVar(issubclass(kinds[type(value)], classes))
    if isinstance(value, ObjectVar):
        tx.ctx.guard_type(value)
    return ConstVar(isinstance(to_python(tx, value), classes))


def _builtin_range(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    return TupleVar([ConstVar(i) for i in range(*[constant(tx, a) for a in args])])


def _builtin_enumerate(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    start = constant(tx, args[1]) if len(args) > 1 else constant(tx, kwargs.get("start",
                                                                               ConstVar(0)))
    items = unpack_iterable(tx, args[0])
    return TupleVar([TupleVar([ConstVar(start + i), v]) for i, v in enumerate(items)])


def _builtin_iter(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    (value,) = args
    if isinstance(value, (IteratorVar, GeneratorVar)):
        return value
    return IteratorVar(unpack_iterable(tx, value))


def _builtin_next(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    iterator = args[0]
    if not isinstance(iterator, (IteratorVar, GeneratorVar)):
        raise Unsupported(BreakKind.UNSUPPORTED_CALL, f"next() of a {type(iterator).__name__}")
    item = next_item(tx, iterator)
    if item is not None:
        return item
    if len(args) > 1:
        return args[1]
    raise Unsupported(BreakKind.RAISE, "next() of an exhausted iterator raises StopIteration")


def _short_circuit(stop_on: bool) -> Any:
    """any (stop_on True) / all (False): items are taken one at a time and the iteration
    stops at the first that decides, as the builtin stops a generator there."""
    def apply(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
        (iterable,) = args
        iterator = iterable if isinstance(iterable, (IteratorVar, GeneratorVar)) else \
            IteratorVar(unpack_iterable(tx, iterable))
        while (item := next_item(tx, iterator)) is not None:
            if truth(tx, item) is stop_on:
                return ConstVar(stop_on)
        return ConstVar(not stop_on)
    return apply


def _consuming(fn: Any) -> Any:
    """A builtin that consumes an iterable argument whole (sum, min, max, sorted): an
    iterator or generator is run to its end first, in order, then fn applies."""
    constant_fn = _constant_builtin(fn)

    def apply(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
        key = kwargs.get("key")
        if key is not None and not (isinstance(key, ConstVar) and key.value is None) \
                and fn is not builtins.sum and len(args) == 1:
            return _keyed(tx, fn, unpack_iterable(tx, args[0]), key, kwargs)
        args = [ListVar(unpack_iterable(tx, a)) if isinstance(a, (IteratorVar, GeneratorVar))
                else a for a in args]
        return constant_fn(tx, args, kwargs)
    return apply


def _keyed(tx: Translator, fn: Any, items: list[Var], key: Var, kwargs: dict[str, Var]) -> Var:
    """`sorted(items, key=f)`, `min(..., key=f)`, `max(..., key=f)` with f traced (a lambda
    or any function the tracer can call): the keys must be constants; the items are
    chosen or ordered by them as the builtin would (stable, first of equal keys)."""
    keys = [constant(tx, tx.call(key, [item], {})) for item in items]
    order = list(range(len(items)))
    if fn is builtins.sorted:
        reverse = bool(constant(tx, kwargs["reverse"])) if "reverse" in kwargs else False
        return ListVar([items[i] for i in sorted(order, key=keys.__getitem__, reverse=reverse)])
    if not items:
        if "default" in kwargs:
            return kwargs["default"]
        raise Unsupported(BreakKind.USER_ERROR, f"{fn.__name__}() iterable argument is empty")
    return items[fn(order, key=keys.__getitem__)]


def _builtin_zip(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    """Rows taken one item per iterable at a time, up to the first exhausted one, as zip
    does: a generator among them (even an endless one) stops where zip stops it."""
    if "strict" in kwargs and constant(tx, kwargs["strict"]):
        columns = [unpack_iterable(tx, a) for a in args]
        if len({len(c) for c in columns}) > 1:
            raise Unsupported(BreakKind.RAISE, "zip(strict=True) of iterables of different lengths "
                              "raises ValueError")
        return TupleVar([TupleVar(list(row)) for row in zip(*columns, strict=True)])
    iterators = [a if isinstance(a, (IteratorVar, GeneratorVar)) else
                 IteratorVar(unpack_iterable(tx, a)) for a in args]
    rows: list[Var] = []
    while iterators:
        row = []
        for iterator in iterators:
            item = next_item(tx, iterator)
            if item is None:
                return TupleVar(rows)
            row.append(item)
        rows.append(TupleVar(row))
    return TupleVar(rows)


def _builtin_container(kind: type) -> Any:
    def build(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
        items = unpack_iterable(tx, args[0]) if args else []
        if kind is dict:
            pairs = [unpack_iterable(tx, p) for p in items]
            return DictVar({constant(tx, k): v for k, v in pairs})
        return ListVar(items) if kind is list else TupleVar(items)
    return build


def _builtin_set(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    """`set()` or `set(iterable)` of constants in traced code: a SetVar. Sets of tensors or
    objects are refused: hashing them would key on the trace's stand-ins."""
    items = unpack_iterable(tx, args[0]) if args else []
    constants = [v for v in items if isinstance(v, ConstVar)]
    if kwargs or len(constants) != len(items):
        raise Unsupported(BreakKind.UNSUPPORTED_CALL, "set() of values other than constants",
                          "build the set outside the compiled function")
    return SetVar({v.value for v in constants})


def _builtin_id(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    """`id(obj)` of an object the trace reached (a module, a parameter): the identity of the
    real object, or of a traced tensor's stand-in (one per real tensor: the same tensor read
    twice is one stand-in, and that is guarded), for comparisons inside the trace."""
    (value,) = args
    if isinstance(value, ObjectVar):
        return ConstVar(id(value.value))
    if isinstance(value, TensorVar):
        return ConstVar(id(value.fake))
    raise Unsupported(BreakKind.UNSUPPORTED_CALL, f"id() of a {type(value).__name__}",
                      "compare the objects outside the compiled function")


def _builtin_getattr(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    name = constant(tx, args[1])
    if len(args) == 3:
        try:
            return load_attr(tx, args[0], name)
        except AttributeError:
            return args[2]
    return load_attr(tx, args[0], name)


def _builtin_hasattr(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    try:
        load_attr(tx, args[0], constant(tx, args[1]))
    except AttributeError:
        return ConstVar(False)
    return ConstVar(True)


def _builtin_print(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
    raise Unsupported(BreakKind.UNSUPPORTED_CALL, "call to print()", "print outside the compiled "
                      "function (return what you want to print)")


def _constant_builtin(fn: Any) -> Any:
    def apply(tx: Translator, args: list[Var], kwargs: dict[str, Var]) -> Var:
        if fn is builtins.type and len(args) == 1 and _number_type(args[0]) is not None:
            return ConstVar(_number_type(args[0]))
        if fn is builtins.type and len(args) == 1 and isinstance(args[0], UserObjectVar):
            return ObjectVar(args[0].cls, source=args[0].cls_source)
        if fn is builtins.type and len(args) == 1 and isinstance(args[0], ConstVar) and \
                isinstance(args[0].value, symbolic.SymInt):
            return ConstVar(int)
        if any(isinstance(a, TensorVar) for a in args):
            if fn in (builtins.float, builtins.int, builtins.bool):
                raise Unsupported(BreakKind.TENSOR_TO_PYTHON, f"{fn.__name__}(tensor) needs the "
                                  "tensor's value", "keep the value a tensor")
            return run_real(tx, fn, [to_python(tx, a) for a in args], {})
        values = [to_python(tx, a) for a in args]
        return wrap_result(tx, fn(*values, **{k: constant(tx, v) for k, v in kwargs.items()}))
    return apply


BUILTINS: dict[Any, Any] = {
    builtins.len: _builtin_len,
    builtins.isinstance: _builtin_isinstance,
    builtins.range: _builtin_range,
    builtins.enumerate: _builtin_enumerate,
    builtins.zip: _builtin_zip,
    builtins.iter: _builtin_iter,
    builtins.list: _builtin_container(list),
    builtins.tuple: _builtin_container(tuple),
    builtins.dict: _builtin_container(dict),
    builtins.getattr: _builtin_getattr,
    builtins.set: _builtin_set,
    builtins.id: _builtin_id,
    builtins.hasattr: _builtin_hasattr,
    builtins.print: _builtin_print,
}
for _fn in (builtins.abs, builtins.int, builtins.float, builtins.bool, builtins.str,
            builtins.round, builtins.divmod, builtins.pow, builtins.issubclass, builtins.type,
            builtins.repr):
    BUILTINS[_fn] = _constant_builtin(_fn)
for _reducer in (builtins.sum, builtins.min, builtins.max, builtins.sorted):
    BUILTINS[_reducer] = _consuming(_reducer)
BUILTINS[builtins.any] = _short_circuit(True)
BUILTINS[builtins.all] = _short_circuit(False)
BUILTINS[builtins.next] = _builtin_next
