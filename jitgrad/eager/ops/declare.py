"""Declaring a pointwise op once: `pointwise_op(...)` makes its OpDef, public function,
Tensor method, in-place method, aliases and the scalar form codegen lowers.

Note [Declaring an op once]: one call per op states every fact about it,

    exp = pointwise_op(
        "exp", np.exp, _exp_backward, saves=OUT, source="d/dx e^x = e^x",
        scalar=lambda s, x: s.exp(x), to_float=True, inplace=True,
        doc="e^x elementwise; integer inputs give the default float dtype.")

and everything else is generated from it:
- the OpDef (`registry.register`: forward, backward, saves, source; the meta rule is
  inferred from the forward as for every op) with its scalar form attached;
- the public function `exp(input)`: its dtype policy (`to_float`: integers compute in
  the default float dtype; `require_float` / `refuse_bool`: PyTorch's NotImplementedError
  naming the kernel), an optional `check(input, **params)` for other argument errors (it
  may return normalized params), the op's parameters with their defaults (`params`, in
  order, `REQUIRED` for none; passed by position or keyword, bound as Python binds them),
  and its docstring; its `__module__` is the declaring module's;
- `Tensor.exp` (`method=True`), `Tensor.exp_` (`inplace=True`, through
  `apply_inplace`), and the same for each name in `aliases` (`absolute` for `abs`);
- the module's share of `__all__` (`exported(__name__)`: the name and its aliases, unless
  `export=False`: PyTorch has the op only in nn.functional);
- the kernel lowering: `scalar(s, *operands, **params)` writes one element of the output
  with the scalar namespace `s` codegen passes in. It is codegen-neutral (eager never
  imports codegen, tests/test_layering.py): operands support `+ - * /`, unary `-`, the
  comparisons and `&`, `|` on comparisons; Python numbers mix in as literals of the
  compute dtype; `s.where(c, a, b)` selects, `s.maximum` / `s.minimum` propagate NaN as
  numpy's, `s.abs`, `s.pow(x, c)`, `s.floor` / `s.ceil` / `s.trunc`, `s.sigmoid`,
  `s.rsqrt`, and `s.<f>(...)` for any function f of Python's `math` module (codegen uses
  its vectorizable math library where it has f, else the libm call numba makes; a
  function numba lacks makes the form decline); `s.is_float` says whether the compute
  dtype is floating. The form is offered only for compute dtypes whose kind is in
  `scalar_kinds` ("f": floats; `registry.ANY_KIND`: every kernel dtype), and may return
  None to decline a call (it then runs as an extern). tests/codegen/test_dtypes.py
  compiles every scalar form and compares it with the forward at edge values (±0, ±inf,
  NaN, subnormals, huge) in every kernel dtype (its coverage test fails for a form without
  a case).
- the op's backward in compiled code: the compiler traces the same backward formula
  against graph values, so its nodes fuse like any others;
- with `nn=NNForm("Mish", inplace=True)`, its nn exposure: the `nn.functional` function
  with PyTorch's `inplace=False` flag (the op itself when it has none), `F.<name>_` with
  `inplace_function`, and the `nn.Module` class `nn.Mish` whose constructor takes the op's
  parameters and `inplace`, whose `forward` calls the functional form and whose
  `extra_repr` prints as PyTorch's (`extra_repr`: "named" `alpha=1.0, inplace=True`,
  "value" the bare parameter as Hardshrink's `0.5`, "none" nothing, as Hardswish's).
  Eager only records the form (it never imports nn); jitgrad/nn/functional_activation.py
  and jitgrad/nn/modules/activation.py make the functions and classes, for the forms
  declared before they load and, through `watch_nn_forms`, for those declared later.
  `nn_form(function, form)` exposes a composite (leaky_relu, gelu, selu, ... in
  activation.py) the same way.

A function declared outside jitgrad is traced as an op too (`is_declared`), so a user's
own op is one declaration as well (tests/codegen/test_declared_ops.py). Declare at import
time: FakeTensor's functionalized in-place methods are made when jitgrad.trace loads.

Aliases also need their module-level binding (`absolute = abs`), which
tests/eager/test_declare.py checks. A broadcasting binary op is one `binary_op(...)`
call in the same way (copysign, hypot, fmax, ... in pointwise_math.py): OpDef, scalar
form, `name(input, other)` with PyTorch's argument checks and promotion, Tensor method,
`__all__`. Ops whose entry point is neither (add's alpha, div's rounding_mode, pow's
exponent, igamma's sign, the comparisons) declare their OpDef with
`register(..., scalar=...)` and keep a hand-written entry point.
Composites (softplus, gelu, leaky_relu, ... in activation.py) are not declared here:
they are Python functions of declared ops, so their gradients and fusion come from those;
`nn_form` gives them their nn exposure.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jitgrad.eager.ops._binary import (
    as_tensor_operand,
    binary,
    not_implemented_for,
    require_tensor,
    result_dtype,
    unary,
)
from jitgrad.eager.ops.inplace import apply_inplace
from jitgrad.eager.ops.out import check_out_grad, write_out
from jitgrad.eager.ops.registry import OpDef, register
from jitgrad.eager.tensor import Tensor

REQUIRED = inspect.Parameter.empty  # a parameter without a default (`params={"value": REQUIRED}`)
DECLARED: dict[str, Callable[..., Tensor]] = {}  # op name -> its public function
METHODS: dict[str, Callable[..., Any]] = {}  # Tensor methods of declared ops, in-place too
_EXPORTED: dict[str, list[str]] = {}  # module name -> its declared public names


@dataclass(frozen=True)
class NNForm:
    """How jitgrad.nn exposes an activation (Note [Declaring an op once]): the Module class
    named `module` (None: nn.functional only); `inplace`: PyTorch's `inplace=False` flag on
    both; `inplace_function`: nn.functional also has `<name>_`; `reads_copy`: a composite
    written in place reads a copy of the old value (its inner ops save what they read);
    `extra_repr`: "named", "value" or "none"."""

    module: str | None
    inplace: bool = False
    inplace_function: bool = False
    reads_copy: bool = False
    extra_repr: str = "named"


NN_FORMS: dict[str, tuple[Callable[..., Tensor], NNForm]] = {}  # function name -> its nn form
_NN_WATCHERS: list[Callable[[Callable[..., Tensor], NNForm], None]] = []


def pointwise_op(name: str, forward: Callable, backward: Callable | None = None, *,
                 saves: tuple[str, ...] = (), source: str = "", scalar: Callable | None = None,
                 scalar_kinds: str = "f", params: dict[str, Any] | None = None,
                 to_float: bool = False, require_float: str | None = None,
                 refuse_bool: str | None = None, check: Callable | None = None, doc: str,
                 method: bool = True, inplace: bool = False, aliases: tuple[str, ...] = (),
                 export: bool = True, node_name: str | None = None,
                 nn: NNForm | None = None) -> Callable[..., Tensor]:
    """Declare the unary pointwise op `name` (Note [Declaring an op once]); returns its
    public function, whose `.op` is the OpDef."""
    op = register(name, forward, backward, inputs=("x",), saves=saves, source=source,
                  node_name=node_name, scalar=scalar, scalar_kinds=scalar_kinds,
                  elementwise=True)
    validate = _validation(_dtype_guard(to_float, require_float, refuse_bool), check)
    function = _entry(op, params or {}, to_float, validate)
    function.__name__ = function.__qualname__ = name
    function.__module__ = sys._getframe(1).f_globals["__name__"]  # as namedtuple does
    function.__doc__ = doc
    function.op = op  # type: ignore[attr-defined]
    function.aliases = aliases  # type: ignore[attr-defined]
    DECLARED[name] = function
    if export:
        _EXPORTED.setdefault(function.__module__, []).extend((name, *aliases))
    for method_name in (name, *aliases):
        if method:
            _add_method(method_name, function)
        if inplace:
            _add_method(f"{method_name}_", inplace_method(function))
    if nn is not None:
        nn_form(function, nn)
    return function


def binary_op(name: str, forward: Callable, backward: Callable | None = None, *,
              inputs: tuple[str, str] = ("a", "b"), saves: tuple[str, ...] = (),
              source: str = "", scalar: Callable | None = None, scalar_kinds: str = "f",
              operands: tuple[str, str] = ("input", "other"), numbers: str = "none",
              to_float: bool = False, require_float: str | None = None,
              check: Callable[[Any, Any], None] | None = None, doc: str,
              method: bool = True) -> Callable[..., Tensor]:
    """Declare the broadcasting binary op `name` (Note [Declaring an op once]): its OpDef
    (`inputs` name the backward's operands) and `name(input, other)` (`operands`), applied
    with PyTorch's promotion (`_binary.binary`, `to_float` as for unary ops) after
    PyTorch's argument checks: TypeError for a Python number where `numbers` allows none
    ("none": both are Tensors, "other": only the second may be a number, "one": either
    but not both), `require_float`'s NotImplementedError for an integer result dtype,
    then `check(input, other)`; returns the function, whose `.op` is the OpDef."""
    assert numbers in ("none", "other", "one"), numbers
    op = register(name, forward, backward, inputs=inputs, saves=saves, source=source,
                  scalar=scalar, scalar_kinds=scalar_kinds, elementwise=True)
    first, second = operands
    namespace = {"__name__": sys._getframe(1).f_globals["__name__"], "binary": binary, "op": op,
                 "validate": _binary_validation(name, operands, numbers, require_float, check),
                 "to_float": to_float}
    namespace.update(check_out_grad=check_out_grad, write_out=write_out)
    function = define(name, [(first, REQUIRED), (second, REQUIRED), ("*", None), ("out", None)],
                      f"validate({first}, {second})\n"
                      "if out is None:\n"
                      f"    return binary(op, {first}, {second}, to_float=to_float)\n"
                      f"check_out_grad({name!r}, out, {first}, {second})\n"
                      f"return write_out({name!r}, binary(op, {first}, {second}, "
                      "to_float=to_float), out)", namespace, doc)
    function.op = op  # type: ignore[attr-defined]
    function.aliases = ()  # type: ignore[attr-defined]
    DECLARED[name] = function
    _EXPORTED.setdefault(function.__module__, []).append(name)
    if method:
        _add_method(name, function)
    return function


def _binary_validation(name: str, operands: tuple[str, str], numbers: str,
                       require_float: str | None,
                       check: Callable[[Any, Any], None] | None) -> Callable[[Any, Any], None]:
    """The argument checks of a binary op's entry point, in PyTorch's order."""
    first, second = operands

    def validate(input: Any, other: Any) -> None:
        if numbers == "one":
            if not isinstance(input, Tensor) and not isinstance(other, Tensor):
                raise TypeError(f"{name}(): at least one of '{first}' and '{second}' must be a "
                                "Tensor")
        else:
            require_tensor(name, input, first, 1)
            if numbers == "none":
                require_tensor(name, other, second, 2)
        if require_float is not None:
            rd = result_dtype(as_tensor_operand(input), as_tensor_operand(other))
            if not rd.is_floating_point:
                raise not_implemented_for(require_float, rd)
        if check is not None:
            check(input, other)
    return validate


def define(name: str, arguments: list[tuple[str, Any]], body: str, namespace: dict[str, Any],
           doc: str) -> Callable[..., Any]:
    """The Python function `def name(arguments): body`, each argument a (name, default)
    pair (REQUIRED for none), whose globals are `namespace` (its `__name__` names the
    function's module): a real signature, so arguments bind and fail as Python's do, and
    the tracer reads its bytecode like any function's."""
    names = []
    for argument, default in arguments:
        if argument == "*" or default is REQUIRED:  # "*": the keyword-only ones follow
            names.append(argument)
        else:
            namespace[f"_default_{argument}"] = default
            names.append(f"{argument}=_default_{argument}")
    source = f"def {name}({', '.join(names)}):\n" + "".join(
        f"    {line}\n" for line in body.splitlines())
    exec(compile(source, f"<{namespace['__name__']}.{name}>", "exec"), namespace)  # noqa: S102
    function = namespace[name]
    function.__doc__ = doc
    return function


def nn_form(function: Callable[..., Tensor], form: NNForm) -> None:
    """Expose `function` (a declared op or a composite of ops) in jitgrad.nn as `form`
    says; the nn layer's watchers make its functions and class."""
    assert function.__name__ not in NN_FORMS, f"{function.__name__} is exposed twice"
    assert form.extra_repr in ("named", "value", "none"), form.extra_repr
    NN_FORMS[function.__name__] = (function, form)
    for watcher in _NN_WATCHERS:
        watcher(function, form)


def watch_nn_forms(watcher: Callable[[Callable[..., Tensor], NNForm], None]) -> None:
    """Call `watcher(function, form)` for every nn form declared so far and from now on."""
    _NN_WATCHERS.append(watcher)
    for function, form in list(NN_FORMS.values()):
        watcher(function, form)


def is_declared(fn: Any) -> bool:
    """Whether `fn` is the public function of a declared op (the tracer runs it on fakes,
    wherever it was declared)."""
    return DECLARED.get(getattr(fn, "__name__", "")) is fn


def exported(module: str) -> list[str]:
    """The public names (functions and aliases) declared by `module`, for its `__all__`."""
    return list(_EXPORTED.get(module, ()))


def inplace_method(function: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """`x.<name>_(...)`: `function(x, ...)` written back into x (see inplace.py)."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return apply_inplace(self, lambda t: function(t, *args, **kwargs))

    method.__name__ = method.__qualname__ = f"{function.__name__}_"
    method.__doc__ = f"In-place `{function.__name__}`: computes it and writes it into self."
    return method


def _add_method(name: str, fn: Callable[..., Any]) -> None:
    """A Tensor method from a declaration (also listed in METHODS, which tensor_methods.py
    checks against the other op modules' methods)."""
    assert name not in METHODS, f"Tensor.{name} is declared twice"
    METHODS[name] = fn
    setattr(Tensor, name, fn)


def _dtype_guard(to_float: bool, require_float: str | None,
                 refuse_bool: str | None) -> Callable[[Any], None] | None:
    """The dtype refusal of the entry point: PyTorch's NotImplementedError naming the kernel
    that has no loop for the input's dtype (ints for `require_float`, bool for
    `refuse_bool`)."""
    assert not (to_float and require_float), "an op either computes ints in float or refuses"
    kernel = require_float or refuse_bool
    if not kernel:
        return None
    refused = "biu" if require_float else "b"

    def guard(input: Any) -> None:
        if isinstance(input, Tensor) and input._data.dtype.kind in refused:
            raise not_implemented_for(kernel, input._data.dtype)
    return guard


def _validation(guard: Callable[[Any], None] | None,
                check: Callable[..., dict[str, Any] | None] | None) -> Callable[..., Any] | None:
    """One callable `(input, **params) -> params or None` running the dtype guard, then the
    declared check (which may normalize the params); None if there is nothing to check."""
    if guard is None or check is None:
        return check if guard is None else lambda x, **params: guard(x)

    def validate(input: Any, **params: Any) -> dict[str, Any] | None:
        guard(input)
        return check(input, **params)
    return validate


def _entry(op: OpDef, params: dict[str, Any], to_float: bool,
           validate: Callable[..., dict[str, Any] | None] | None) -> Callable[..., Tensor]:
    """The public function: `name(input, *params)` with the declared defaults."""
    name = op.name
    if not params:
        if validate is None:
            def function(input: Tensor, *, out: Tensor | None = None) -> Tensor:
                if out is None:
                    return unary(op, input, to_float=to_float)
                check_out_grad(name, out, input)
                return write_out(name, unary(op, input, to_float=to_float), out)
        else:
            def function(input: Tensor, *, out: Tensor | None = None) -> Tensor:
                validate(input)
                if out is None:
                    return unary(op, input, to_float=to_float)
                check_out_grad(name, out, input)
                return write_out(name, unary(op, input, to_float=to_float), out)
        return function
    bind = _binder(name, params)

    def function_with_params(input: Tensor, *args: Any, out: Tensor | None = None,
                             **kwargs: Any) -> Tensor:
        values = bind(args, kwargs)
        if validate is not None:
            values = validate(input, **values) or values
        if out is None:
            return unary(op, input, to_float=to_float, **values)
        check_out_grad(name, out, input)
        return write_out(name, unary(op, input, to_float=to_float, **values), out)

    keyword = inspect.Parameter.KEYWORD_ONLY
    function_with_params.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("input", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
           for p, d in params.items()] + [inspect.Parameter("out", keyword, default=None)])
    return function_with_params


def _binder(name: str, defaults: dict[str, Any]) -> Callable[[tuple, dict], dict[str, Any]]:
    """Python's binding of `(input, *params)` arguments, with its TypeErrors, without the
    cost of `inspect.Signature.bind` on every call."""
    names = tuple(defaults)

    def bind(args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(names):
            raise TypeError(f"{name}() takes {len(names) + 1} positional arguments but "
                            f"{len(args) + 1} were given")
        values = dict(defaults)
        values.update(zip(names, args, strict=False))  # defaults fill the rest
        for key in kwargs:
            if key not in defaults:
                raise TypeError(f"{name}() got an unexpected keyword argument '{key}'")
            if key in names[:len(args)]:
                raise TypeError(f"{name}() got multiple values for argument '{key}'")
        values.update(kwargs)
        missing = [key for key, value in values.items() if value is REQUIRED]
        if missing:
            raise TypeError(f"{name}() missing required argument(s): "
                            + ", ".join(f"'{key}'" for key in missing))
        return values
    return bind
