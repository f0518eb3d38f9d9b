"""What the translator does with values: constants, items, attributes, operators, truth,
iteration, and real jitgrad code run on fake tensors (`run_real`).

The rule for every operation: if all operands are trace-time constants, compute it for
real; if tensors are involved, run the real jitgrad function on fake tensors (the op
recorder turns it into graph nodes); anything else is `Unsupported`. Calls are decided in
calls.py, calls of Python builtins in builtin_calls.py.
"""

from __future__ import annotations

import operator
import types
from typing import TYPE_CHECKING, Any

from jitgrad.eager.ops.checks import check_values
from jitgrad.eager.ops.random import undone_draws
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.breaks.unsupported import BreakKind, Unsupported
from jitgrad.trace.capture import symbolic, user_objects
from jitgrad.trace.capture.fake import FakeNumber, FakeTensor
from jitgrad.trace.capture.sources import AttrSource, ItemSource, TypeSource
from jitgrad.trace.capture.variables import (
    BoundMethodVar,
    ConstVar,
    DictVar,
    GeneratorVar,
    GradModeVar,
    IteratorVar,
    ListVar,
    NestedFunctionVar,
    ObjectVar,
    SetVar,
    SuperVar,
    TensorMethodVar,
    TensorVar,
    TupleVar,
    UserObjectVar,
    Var,
)

if TYPE_CHECKING:
    from jitgrad.trace.capture.translator import Translator

# Python operators on numbers that int64/float64 graph values compute as Python does
# (see `_number_operator`): the comparisons, and arithmetic on bools made ints first
_COMPARISONS = {operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne}
_NUMBER_ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.truediv,
                      operator.floordiv, operator.mod, operator.neg, operator.pos}
# Python's ZeroDivisionError messages: (operator, both operands int) -> message
_ZERO_DIVISION = {(operator.truediv, True): "division by zero",
                  (operator.truediv, False): "float division by zero",
                  (operator.floordiv, True): "integer division or modulo by zero",
                  (operator.floordiv, False): "float floor division by zero",
                  (operator.mod, True): "integer modulo by zero",
                  (operator.mod, False): "float modulo"}

# attributes of a traced tensor that do not exist without real data or autograd state
# (`.grad` of a graph input is read through its source: TraceContext.grad_of)
_TENSOR_ATTRIBUTES_NOT_TRACEABLE = {"grad_fn", "_data", "_version", "_base", "_grad",
                                    "_grad_fn", "_vc", "_view", "_retains_grad", "_hooks"}


# ----- values -------------------------------------------------------------------------

def constant(tx: Translator, var: Var) -> Any:
    """The Python value of a trace-time constant, guarding it when it came from outside."""
    if isinstance(var, ConstVar):
        tx.ctx.guard_constant(var)
        if symbolic.contains_symint(var.value):  # a size needed as a plain int: exact now
            return symbolic.substitute(var.value, _Specialized())
        return var.value
    if isinstance(var, TupleVar):
        return tuple(constant(tx, v) for v in var.items)
    if isinstance(var, ObjectVar):
        if var.source is not None:  # baked into the trace (a dtype argument): the same object
            tx.ctx.guard_identity(var)
        return var.value
    if isinstance(var, TensorVar) and isinstance(var.fake, FakeNumber) and var.source is not None:
        # a changing number needed as a Python constant here (a loop bound): specialize it
        # again for this trace; see Note [Unspecialized numbers]
        value = var.fake.__dict__["value"]
        tx.ctx.guard_constant(ConstVar(value, source=var.source))
        return value
    if isinstance(var, TensorVar):
        raise Unsupported(BreakKind.TENSOR_TO_PYTHON,
                          "a tensor was used where a Python constant is "
                          "needed", "keep the computation in tensors")
    raise Unsupported(BreakKind.UNSUPPORTED_VALUE, f"a {type(var).__name__} used as a constant")


class _Specialized:
    """Symbol values for `symbolic.substitute` that are the hints, each specialized (its
    `expr == hint` guarded) as it is read."""

    def __getitem__(self, k: int) -> int:
        env = symbolic.ShapeEnv.active()
        assert env is not None, "SymInts exist only while tracing"
        return symbolic.specialize(symbolic.SymInt(env.hints[k], ("sym", k)))


def to_python(tx: Translator, var: Var) -> Any:
    """The value to hand to real code: fakes for tensors, real containers of those; sizes
    stay SymInts (jitgrad's ops keep them in the graph, Note [Symbolic sizes])."""
    if isinstance(var, TensorVar):
        return var.fake
    if isinstance(var, ConstVar) and var.source is None:
        return var.value
    if isinstance(var, (ConstVar, ObjectVar)):
        return constant(tx, var)
    if isinstance(var, TupleVar):
        items = tuple(to_python(tx, v) for v in var.items)
        return items if var.cls is None else var.cls._make(items)  # a namedtuple's own class
    if isinstance(var, ListVar):
        return [to_python(tx, v) for v in var.items]
    if isinstance(var, DictVar):
        return {k: to_python(tx, v) for k, v in var.items.items()}
    if isinstance(var, (IteratorVar, GeneratorVar)):
        # real code gets an iterator over its items (`clip_grad_norm_(m.parameters(), 1)`):
        # the generator runs to its end first, so the code sees the same items in order
        return iter([to_python(tx, v) for v in unpack_iterable(tx, var)])
    raise Unsupported(BreakKind.UNSUPPORTED_VALUE,
                      f"cannot pass a {type(var).__name__} to a jitgrad "
                      "function while tracing")


def wrap_result(tx: Translator, value: Any) -> Var:
    """Wrap what real code returned: fakes become TensorVars, containers are recursed."""
    if isinstance(value, FakeTensor):
        return TensorVar(value)
    if isinstance(value, Tensor):
        return TensorVar(tx.ctx.constant_tensor(value))
    if type(value) is tuple:
        return TupleVar([wrap_result(tx, v) for v in value])
    if type(value) is list:
        return ListVar([wrap_result(tx, v) for v in value])
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple (max(dim=...))
        return TupleVar([wrap_result(tx, v) for v in value], cls=type(value))
    if callable(value) and not isinstance(value, type):
        return ObjectVar(value)  # e.g. a bound method of a traced tensor
    return ConstVar(value)


def next_item(tx: Translator, iterator: Var) -> Var | None:
    """The next item of an iterator Var (FOR_ITER), or None when it is exhausted; a
    generator runs to its next yield (Note [Generators] in translator.py)."""
    if isinstance(iterator, GeneratorVar):
        location = tx.ctx.recorder.location
        item = iterator.frame.next_item()
        tx.ctx.recorder.location = location
        return item
    assert isinstance(iterator, IteratorVar), "GET_ITER pushes an IteratorVar or GeneratorVar"
    if iterator.position < len(iterator.items):
        iterator.position += 1
        return iterator.items[iterator.position - 1]
    return None


def returned_value(iterator: Var) -> Var:
    """What an exhausted iterator returned (a generator's `return` value; else None): the
    value of a `yield from` over it."""
    if isinstance(iterator, GeneratorVar) and iterator.frame.return_value is not None:
        return iterator.frame.return_value
    return ConstVar(None)


def unpack_iterable(tx: Translator, var: Var) -> list[Var]:
    """The items of an iterable Var (loops over them are unrolled)."""
    if isinstance(var, (TupleVar, ListVar)):
        return list(var.items)
    if isinstance(var, (IteratorVar, GeneratorVar)):  # what is left of it, in order
        items = []
        while (item := next_item(tx, var)) is not None:
            items.append(item)
        return items
    if isinstance(var, (DictVar, SetVar)):
        return [ConstVar(k) for k in var.items]
    if isinstance(var, TensorVar):
        n = symbolic.specialize(var.fake.shape[0]) if var.fake.ndim else 0
        return [getitem(tx, var, ConstVar(i)) for i in range(n)]
    if isinstance(var, ConstVar):  # a shape's sizes stay SymInts
        return [ConstVar(v) for v in (var.value if var.source is None else constant(tx, var))]
    if isinstance(var, ObjectVar) and isinstance(var.value, tuple):
        return [wrap_result(tx, v) for v in var.value]
    if isinstance(var, ObjectVar) and type(var.value) is range:  # e.g. passed to a resume fn
        for part in ("start", "stop", "step"):
            constant(tx, load_attr(tx, var, part))  # guards the bounds it came from
        return [ConstVar(i) for i in var.value]
    if isinstance(var, ObjectVar):
        method = getattr(type(var.value), "__iter__", None)
        if isinstance(method, types.FunctionType):  # e.g. nn.Sequential, nn.ModuleList
            tx.ctx.guard_type(var)
            method_var = ObjectVar(method, source=var.source and AttrSource(
                TypeSource(var.source), "__iter__"))
            return unpack_iterable(tx, tx.ctx.inline_function(tx, method, method_var, [var], {}))
    raise Unsupported(BreakKind.UNSUPPORTED_ITERATION, f"iterating over a {type(var).__name__}"
                      + (f" ({type(var.value).__name__})" if isinstance(var, ObjectVar) else ""))


def truth(tx: Translator, var: Var) -> bool:
    """`bool(var)` for a branch; a tensor here is a data-dependent branch."""
    if isinstance(var, TensorVar):
        raise Unsupported(BreakKind.DATA_DEPENDENT_BRANCH, "a branch depends on a tensor's value",
                          "use torch.where, or compute the condition outside the compiled "
                          "function")
    if isinstance(var, (TupleVar, ListVar, DictVar)):
        return bool(var.items)
    if isinstance(var, (ObjectVar, NestedFunctionVar)):
        return True if not isinstance(var, ObjectVar) else bool(var.value)
    if isinstance(var, ConstVar) and isinstance(var.value, symbolic.SymInt):
        return bool(var.value)  # the relation `size != 0`
    return bool(constant(tx, var))


def is_same(tx: Translator, a: Var, b: Var) -> bool:
    if isinstance(a, TensorVar) and isinstance(b, TensorVar):
        return a.fake is b.fake
    if isinstance(a, TensorVar) or isinstance(b, TensorVar):
        return False
    if isinstance(a, UserObjectVar) or isinstance(b, UserObjectVar):
        return a is b  # one Var per object made in the trace
    return to_python(tx, a) is to_python(tx, b)


def contains(tx: Translator, container: Var, item: Var) -> bool:
    if isinstance(container, (DictVar, SetVar)):
        return constant(tx, item) in container.items
    return any(is_same(tx, item, v) or (isinstance(v, ConstVar) and isinstance(item, ConstVar)
                                        and constant(tx, v) == constant(tx, item))
               for v in unpack_iterable(tx, container))


# ----- operators and items -------------------------------------------------------------

def apply_operator(tx: Translator, fn: Any, args: list[Var], inplace: bool = False) -> Var:
    """An operator (`+`, `<`, `-x`, ...): on constants computed now, on tensors recorded."""
    tensors = [a for a in args if isinstance(a, TensorVar)]
    if tensors and all(isinstance(a.fake, FakeNumber) for a in tensors):
        return _number_operator(tx, fn, args)
    if tensors:
        if inplace and isinstance(args[0], TensorVar) and not isinstance(args[0].fake,
                                                                         FakeNumber):
            # `x += y` on a tensor: Tensor.__iadd__, functionalized on a traced tensor
            # (Note [Functionalized in-place ops] in jitgrad/trace/capture/functionalize.py)
            fn = getattr(operator, f"i{fn.__name__.rstrip('_')}")
        return run_real(tx, fn, [to_python(tx, a) for a in args], {})
    if any(isinstance(a, (ListVar, TupleVar)) for a in args) and fn in (operator.add,
                                                                        operator.iadd):
        a, b = args
        items = unpack_iterable(tx, a) + unpack_iterable(tx, b)
        return ListVar(items) if isinstance(a, ListVar) else TupleVar(items)
    if fn in (operator.mul, operator.imul) and any(isinstance(a, (ListVar, TupleVar))
                                                   for a in args):
        return _repeat_sequence(tx, *args)
    if any(isinstance(a, ConstVar) and isinstance(a.value, symbolic.SymInt) for a in args) \
            and all(isinstance(a, ConstVar) for a in args):
        # arithmetic on sizes stays symbolic; a comparison records the relation it relied on
        return wrap_result(tx, fn(*[to_python(tx, a) for a in args]))
    if fn in _COMPARISONS and all(isinstance(a, (ListVar, TupleVar, ConstVar))
                                         for a in args):
        # `tuple(h.shape) != (2, 3)`: items are trace-time constants (a tensor item raises)
        return ConstVar(fn(*[_constant_items(tx, a) for a in args]))
    if any(isinstance(a, (ListVar, TupleVar, DictVar)) for a in args):
        raise Unsupported(BreakKind.UNSUPPORTED_OPERATOR, f"{fn.__name__} on containers")
    return wrap_result(tx, fn(*[constant(tx, a) for a in args]))


def _number_operator(tx: Translator, fn: Any, args: list[Var]) -> Var:
    """An operator on Python numbers, some of them graph inputs (FakeNumbers), computed as
    Python computes it: in int64/float64 (jitgrad.eager.ops._binary.number_dtype), bools
    as ints in arithmetic, and a zero divisor raising Python's ZeroDivisionError when the
    graph runs (a `check_values` node, Note [Value checks in graphs]). Other operators
    (`**`, bit operations) run in Python at a graph break."""
    if fn not in _COMPARISONS and fn not in _NUMBER_ARITHMETIC:
        raise Unsupported(BreakKind.DYNAMIC_NUMBER,
                          f"Python `{fn.__name__}` on a number that changes "
                          "between calls (it is a graph input)", "it runs in Python between "
                          "graphs; use it in tensor ops to keep it in the graph")
    values = [to_python(tx, a) for a in args]
    if fn in _NUMBER_ARITHMETIC:
        values = [_int_if_bool(v) for v in values]
        integers = all(_number_kind(v) in "iu" for v in values)
        if (fn, integers) in _ZERO_DIVISION:
            values[1] = _nonzero_divisor(values[1], _ZERO_DIVISION[fn, integers])
    return run_real(tx, fn, values, {})


def _number_kind(value: Any) -> str:
    """'b', 'i' or 'f': the kind of a Python number or of a FakeNumber's value."""
    if isinstance(value, FakeNumber):
        return value._data.dtype.kind
    return "b" if isinstance(value, bool) else ("i" if isinstance(value, int) else "f")


def _int_if_bool(value: Any) -> Any:
    """Python arithmetic on bools is on ints (`True + True == 2`)."""
    if _number_kind(value) != "b":
        return value
    return value.long() if isinstance(value, FakeNumber) else int(value)


def _nonzero_divisor(value: Any, message: str) -> Any:
    """The divisor, checked to be nonzero: now for a constant, when the graph runs for a
    FakeNumber."""
    if not isinstance(value, FakeNumber):
        if value == 0:
            raise Unsupported(BreakKind.USER_ERROR, f"ZeroDivisionError: {message}",
                              "the eager run shows the error at your line")
        return value
    return check_values(value, reject="zero", error="ZeroDivisionError", message=message)


def _constant_items(tx: Translator, var: Var) -> Any:
    """A list or tuple of constants as its Python value, other constants as themselves."""
    if isinstance(var, ListVar):
        return [constant(tx, v) for v in var.items]
    return constant(tx, var)


def _repeat_sequence(tx: Translator, a: Var, b: Var) -> Var:
    """`[x] * n` or `n * (x, y)`: the items repeated, for an int n fixed at trace time."""
    sequence, count = (a, b) if isinstance(a, (ListVar, TupleVar)) else (b, a)
    if not isinstance(count, ConstVar) or not isinstance(count.value, int):
        raise Unsupported(BreakKind.UNSUPPORTED_OPERATOR, "mul of a container by a non-constant")
    items = unpack_iterable(tx, sequence) * constant(tx, count)
    return ListVar(items) if isinstance(sequence, ListVar) else TupleVar(items)


def getitem(tx: Translator, container: Var, index: Var) -> Var:
    if isinstance(container, TensorVar):
        return run_real(tx, operator.getitem, [container.fake, to_python(tx, index)], {})
    if isinstance(container, (TupleVar, ListVar)):
        key = constant(tx, index)
        if isinstance(key, slice):
            items = container.items[key]
            return ListVar(items) if isinstance(container, ListVar) else TupleVar(items)
        return container.items[key]
    if isinstance(container, DictVar):
        return container.items[constant(tx, index)]
    if isinstance(container, ObjectVar) and isinstance(index, TensorVar):
        return tx.ctx.tensor_keyed_item(container, index)
    if isinstance(container, ObjectVar):
        key = constant(tx, index)
        source = ItemSource(container.source, key) if container.source is not None else None
        return tx.ctx.wrap_value(container.value[key], source)
    if isinstance(container, ConstVar) and container.source is None and isinstance(
            container.value, tuple):  # `x.shape[0]`: the size itself, a SymInt if symbolic
        return wrap_result(tx, container.value[constant(tx, index)])
    return wrap_result(tx, constant(tx, container)[constant(tx, index)])


def setitem(tx: Translator, container: Var, index: Var, value: Var) -> None:
    if isinstance(container, TensorVar):  # functionalized: FakeTensor.__setitem__
        run_real(tx, operator.setitem, [container.fake, to_python(tx, index),
                                        to_python(tx, value)], {})
        return
    if isinstance(container, (ListVar, DictVar)):
        container.items[constant(tx, index)] = value
        if container.source is not None:
            tx.ctx.side_effects.mutated(container)
        return
    raise Unsupported(BreakKind.SIDE_EFFECT,
                      "item assignment into an object from outside the compiled "
                      "function", "build a new value and return it")


# ----- attributes -------------------------------------------------------------------------

def load_attr(tx: Translator, obj: Var, name: str) -> Var:
    if isinstance(obj, TensorVar):
        if name == "grad":
            return tx.ctx.grad_of(obj)
        if name in _TENSOR_ATTRIBUTES_NOT_TRACEABLE:
            raise Unsupported(BreakKind.UNSUPPORTED_ATTRIBUTE, f"Tensor.{name} of a traced tensor",
                              f"read .{name} outside the compiled function")
        value = run_real(tx, getattr, [obj.fake, name], {}, wrap=False)
        if callable(value) and not isinstance(value, Tensor):
            return TensorMethodVar(obj, name)
        return wrap_result(tx, value)
    if isinstance(obj, TupleVar) and obj.cls is not None and name in obj.cls._fields:
        return obj.items[obj.cls._fields.index(name)]
    if isinstance(obj, (ListVar, DictVar, TupleVar, SetVar)):
        return BoundMethodVar(obj, name)
    if isinstance(obj, ObjectVar):
        tx.ctx.guard_type(obj)
        stored = tx.ctx.side_effects.load_attr(obj, name)
        if stored is not None:
            return stored
        value = getattr(obj.value, name)
        source = AttrSource(obj.source, name) if obj.source is not None else None
        var = tx.ctx.wrap_value(value, source)
        if isinstance(value, types.MethodType) and value.__self__ is obj.value and \
                isinstance(var, ObjectVar):
            var.receiver = obj
        return var
    if isinstance(obj, ConstVar):
        return wrap_result(tx, getattr(constant(tx, obj), name))
    if isinstance(obj, UserObjectVar):
        return user_objects.load_attr(tx, obj, name)
    if isinstance(obj, SuperVar):
        return user_objects.load_super_attr(tx, obj, name)
    if isinstance(obj, GradModeVar) and name in ("__enter__", "__exit__"):
        raise Unsupported(BreakKind.UNSUPPORTED_CONTEXT_MANAGER,
                          "calling __enter__/__exit__ directly")
    raise Unsupported(BreakKind.UNSUPPORTED_ATTRIBUTE, f".{name} of a {type(obj).__name__}")


def store_attr(tx: Translator, obj: Var, name: str, value: Var) -> None:
    """`obj.name = value` on an argument's object: recorded, replayed after the graph."""
    if isinstance(obj, TensorVar) and name == "grad":
        tx.ctx.store_grad(obj, value)
        return
    if isinstance(obj, UserObjectVar):
        user_objects.store_attr(tx, obj, name, value)
        return
    if isinstance(obj, ObjectVar) and obj.source is not None and not isinstance(
            getattr(type(obj.value), name, None), property):
        tx.ctx.guard_type(obj)
        tx.ctx.side_effects.store_attr(obj, name, value)
        return
    raise Unsupported(BreakKind.SIDE_EFFECT, f"attribute assignment `.{name} = ...` on an object "
                      "the tracer does not track", "return the new value and assign it outside")


def run_real(tx: Translator, fn: Any, args: list[Any], kwargs: dict[str, Any],
             wrap: bool = True) -> Any:
    """Run real jitgrad code on fake tensors under the op recorder.

    A call that draws random numbers outside a random op would bake them into the graph as
    constants, so its draws are undone and it is refused (random factories, fills and
    dropout are captured: Note [Random draws are ops]).
    """
    try:
        with undone_draws() as drawn:
            result = fn(*args, **kwargs)
    except Unsupported:
        raise
    except ValueError as err:
        if "read-only" not in str(err):
            raise Unsupported(BreakKind.USER_ERROR,
                              f"{callable_name(fn)} raised ValueError: {err}") from err
        # an in-place op writing into a traced tensor (fakes hold read-only data)
        raise Unsupported(BreakKind.INPLACE_ON_TENSOR,
                          f"in-place {callable_name(fn)} on a traced tensor",
                          "use the op's out-of-place form (`x = x + y` for `x += y`)") from err
    except Exception as err:  # the user's own error (shapes, dtypes): rerun eagerly shows it
        raise Unsupported(BreakKind.USER_ERROR,
                          f"{callable_name(fn)} raised {type(err).__name__}: {err}") from err
    if drawn:  # undone: the eager run at the break draws them, in eager's order
        raise Unsupported(BreakKind.RANDOM_OP,
                          f"{callable_name(fn)} draws random numbers outside a random op",
                          "draw the random tensor outside the compiled function and pass "
                          "it in (rand, randn, randint, *_like, in-place fills and dropout "
                          "are captured)")
    return wrap_result(tx, result) if wrap else result


def call_container_method(tx: Translator, method: BoundMethodVar, args: list[Var],
                          kwargs: dict[str, Var]) -> Var:
    receiver, name = method.receiver, method.name
    if isinstance(receiver, DictVar):
        if name in ("items", "keys", "values"):
            keys = list(receiver.items)
            if name == "keys":
                return TupleVar([ConstVar(k) for k in keys])
            if name == "values":
                return TupleVar(list(receiver.items.values()))
            return TupleVar([TupleVar([ConstVar(k), v]) for k, v in receiver.items.items()])
        if name == "get":
            key = constant(tx, args[0])
            return receiver.items.get(key, args[1] if len(args) > 1 else ConstVar(None))
    if isinstance(receiver, ListVar) and name in ("append", "extend", "pop", "insert"):
        if name == "append":
            receiver.items.append(args[0])
            result: Var = ConstVar(None)
        elif name == "extend":
            receiver.items.extend(unpack_iterable(tx, args[0]))
            result = ConstVar(None)
        elif name == "insert":
            receiver.items.insert(constant(tx, args[0]), args[1])
            result = ConstVar(None)
        else:
            result = receiver.items.pop(constant(tx, args[0]) if args else -1)
        if receiver.source is not None:  # the caller's list: replayed after the graph
            tx.ctx.side_effects.mutated(receiver)
        return result
    if isinstance(receiver, SetVar) and name in ("add", "discard"):
        getattr(receiver.items, name)(constant(tx, args[0]))
        return ConstVar(None)
    if isinstance(receiver, (ListVar, TupleVar)) and name == "index":
        target = constant(tx, args[0])
        return ConstVar([constant(tx, v) for v in receiver.items].index(target))
    raise Unsupported(BreakKind.SIDE_EFFECT if receiver.source is not None
                      else BreakKind.UNSUPPORTED_CALL,
                      f"{type(receiver).__name__[:-3].lower()}.{name}() while tracing")


def callable_name(fn: Any) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{name}" if module and module != "builtins" else name
