"""`out=`: writing an op's result into a tensor the caller gives, with PyTorch's rules.

Every declared pointwise op (declare.py) takes `out=` itself; the hand-written functions
PyTorch gives an `out=` (OUT_FUNCTIONS) get it where they are exported into the `jitgrad`
namespace (`accepts_out`), so Tensor methods and internal calls pay nothing for it.
Measured on torch 2.13:
- under grad mode, an input or `out` that requires grad raises RuntimeError
  "<op>(): functions with out=... arguments don't support automatic differentiation, but
  one of the arguments requires grad." (checked before computing: `check_out_grad`);
- the result is cast to out's dtype where PyTorch's canCast allows it (not a float into an
  integer, not a number into bool: "result type Float can't be cast to the desired output
  type Long"); amax/amin ask for the same dtype ("Expected the dtype for input and out to
  match, ..."); sum/prod/cumsum/cumprod compute in out's dtype, as with `dtype=`;
- an `out` of another shape is resized, with PyTorch's deprecation warning unless it has
  no elements;
- the op returns `out` itself.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.ops._binary import SCALAR_TYPE_NAMES
from jitgrad.eager.ops.inplace import copy_
from jitgrad.eager.ops.storage import resize_
from jitgrad.eager.tensor import Tensor


def check_out_grad(name: str, out: Tensor, *inputs: Any) -> None:
    """PyTorch's refusal of `out=` where autograd would have to record the op (inputs may
    be tensors or sequences of them, as cat's)."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    tensors = [t for x in (out, *inputs) for t in (x if isinstance(x, (list, tuple)) else (x,))]
    if STATE.enabled and any(isinstance(t, Tensor) and t.requires_grad for t in tensors):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support "
                           "automatic differentiation, but one of the arguments requires grad.")


def write_out(name: str, result: Tensor, out: Tensor, exact_dtype: bool = False) -> Tensor:
    """`result` written into `out` (resized to its shape, cast to its dtype); returns out."""
    source, target = result._data.dtype, out._data.dtype
    if exact_dtype and source != target:
        raise RuntimeError(f"Expected the dtype for input and out to match, but got "
                           f"{_type_name(source)} for input's dtype and {_type_name(target)} "
                           "for out's dtype.")
    if not _can_cast(source.kind, target.kind):
        raise RuntimeError(f"result type {_type_name(source)} can't be cast to the desired "
                           f"output type {_type_name(target)}")
    shape = tuple(result._data.shape)
    if tuple(out._data.shape) != shape:
        if out._data.size:
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out._data.shape)}, which does not match the required output "
                          f"shape {list(shape)}. This behavior is deprecated, and in a future "
                          "PyTorch release outputs will not be resized unless they have zero "
                          "elements. You can explicitly reuse an out tensor t by resizing it, "
                          "inplace, to zero elements with t.resize_(0).", UserWarning,
                          stacklevel=3)
        resize_(out, *shape)
    copy_(out, result)
    return out


def _can_cast(source: str, target: str) -> bool:
    """PyTorch's canCast between numpy dtype kinds: no float into an integer, nothing but
    bool into bool."""
    if source == "f" and target in "biu":
        return False
    return not (target == "b" and source != "b")


def _type_name(dtype: Any) -> str:
    return SCALAR_TYPE_NAMES.get(dtype.name, dtype.name)


# hand-written functions of the jitgrad namespace that take out= in PyTorch -> how the
# result's dtype meets out's: "cast" (canCast), "exact" (the same dtype), "accumulate"
# (computed in out's dtype, as with dtype=)
OUT_FUNCTIONS = {
    **dict.fromkeys(("add", "sub", "subtract", "mul", "multiply", "div", "divide",
                     "true_divide", "floor_divide", "remainder", "fmod", "pow", "atan2",
                     "arctan2", "lerp", "addcmul", "addcdiv", "clamp", "clip", "maximum",
                     "minimum", "where", "eq", "ne", "lt", "le", "gt", "ge",
                     "greater", "less", "greater_equal", "less_equal", "not_equal",
                     "logical_and", "logical_or", "logical_xor", "logical_not", "mean", "std",
                     "var", "logsumexp", "matmul", "mm", "bmm", "cat", "stack"), "cast"),
    **dict.fromkeys(("amax", "amin"), "exact"),
    **dict.fromkeys(("sum", "prod", "cumsum", "cumprod"), "accumulate"),
}


def accepts_out(function: Callable[..., Any], rule: str) -> Callable[..., Any]:
    """`function` with PyTorch's keyword `out=` (see the module docstring; `rule` as in
    OUT_FUNCTIONS)."""
    name = function.__name__

    @functools.wraps(function)
    def with_out(*args: Any, out: Tensor | None = None, **kwargs: Any) -> Any:
        if out is None:
            return function(*args, **kwargs)
        check_out_grad(name, out, *args, *kwargs.values())
        if rule == "accumulate" and kwargs.get("dtype") is None:
            kwargs["dtype"] = out.dtype
        return write_out(name, function(*args, **kwargs), out, exact_dtype=rule == "exact")
    return with_out


def install(namespace: dict[str, Any]) -> None:
    """Give the OUT_FUNCTIONS found in `namespace` (the jitgrad package's) their `out=`."""
    for name, rule in OUT_FUNCTIONS.items():
        if name in namespace:
            namespace[name] = accepts_out(namespace[name], rule)
