"""In-place ops (`add_`, `mul_`, `relu_`, `copy_`, `x[i] = v`, `+=`, ...) and their autograd.

Every in-place op runs through `apply_inplace`, PyTorch's recipe
(torch/csrc/autograd/VariableTypeUtils.h, research/eager_autograd.md §1 rows 8-9, §2.0):
1. compute the out-of-place result with the functional op, on an alias of the target
   that carries the target's history;
2. if that recorded a node (grad mode on and something requires grad), check the
   forbidden cases (`check_inplace`: E7 leaf, E8 view of a leaf, E9 output of
   split/unbind, E10 view made under no_grad);
3. check the write: no expanded memory, same shape, castable dtype;
4. write the result into the target's storage and bump the shared version counter;
5. rebase history: a plain tensor's grad_fn becomes the op's node; for a view, the
   base's grad_fn becomes `CopySlices` around that node, and the view's grad_fn is
   regenerated on top of it (see jitgrad.eager.views).

Note [Saving the old self]: when the op's node saved the target itself (mul_ saves self
to give `other` its gradient), the saved value must be the value *before* the write.
PyTorch clones the original self for such ops; we swap the saved alias for a copy.
Other nodes that saved the alias share the target's version counter, so a stale value
is reported by the usual "modified by an inplace operation" error rather than used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jitgrad.eager import layout
from jitgrad.eager.dtypes import scalar_as
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.node import SavedValues
from jitgrad.eager.ops import indexing
from jitgrad.eager.ops._binary import (
    binary,
    binary_operands,
    broadcast_error,
    scaled_number_overflows,
    shapes_of,
)
from jitgrad.eager.ops.creation import tensor
from jitgrad.eager.ops.index_parsing import parse_index
from jitgrad.eager.ops.registry import OPS, apply_op, register
from jitgrad.eager.ops.shape import expanded_shape
from jitgrad.eager.tensor import Tensor, values_known
from jitgrad.eager.views import CopySlices, make_view, refresh_view_grad_fn

ERR_LEAF = ("a leaf Variable that requires grad is being used in an in-place operation. "
            "Modify a clone (x = x.clone()) or do the update under jitgrad.no_grad().")
ERR_VIEW_OF_LEAF = ("a view of a leaf Variable that requires grad is being used in an in-place "
                    "operation. Modify a clone (x = x.clone()) or do the update under "
                    "jitgrad.no_grad().")
ERR_MULTI_OUTPUT_VIEW = (
    "Output {output_nr} of {creation} is a view and is being modified inplace. This view is the "
    "output of a function that returns multiple views. Such functions do not allow the output "
    "views to be modified inplace. You should replace the inplace operation by an out-of-place "
    "one.")
ERR_NO_GRAD_VIEW = (
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. "
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
    "your code by moving both the view and the inplace either both inside the no_grad block (if "
    "you don't want the inplace to be tracked) or both outside (if you want the inplace to be "
    "tracked).")
ERR_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to "
               "a single memory location. Please clone() the tensor before performing the "
               "operation.")

ERR_PARTIAL_OVERLAP = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer "
    "to a single memory location. Please clone() the tensor before performing the operation.")

# ----- checks ---------------------------------------------------------------------------

def check_inplace(t: Tensor, requires_grad: bool | None = None) -> None:
    """Raise PyTorch's error when `t` may not be written in place while grad mode is on.

    requires_grad: whether the in-place result would require grad (default: whether `t`
    does). Nothing is checked under no_grad (that is how optimizers update leaves).
    Raises RuntimeError: E7 (leaf requiring grad), E8 (view of such a leaf), E9 (output
    of split/chunk/unbind), E10 (view created under no_grad).
    """
    if not STATE.enabled or not (t._requires_grad if requires_grad is None else requires_grad):
        return
    view = t._view
    if view is not None:
        if view.creation == "no_grad":
            raise RuntimeError(ERR_NO_GRAD_VIEW)
        if view.creation != "default":  # PyTorch names the view's own (forward) op
            fn = t._grad_fn
            name = fn.name().removesuffix("Backward") if fn is not None else view.creation
            raise RuntimeError(ERR_MULTI_OUTPUT_VIEW.format(output_nr=t._output_nr, creation=name))
        base = view.base
        if t._requires_grad and base._grad_fn is None and base._requires_grad:
            raise RuntimeError(ERR_VIEW_OF_LEAF)
    elif t._requires_grad and t._grad_fn is None:
        raise RuntimeError(ERR_LEAF)


def check_no_overlap(data: np.ndarray) -> None:
    """Raise when several elements share memory (an expanded tensor), as PyTorch does.

    An empty array has no elements to share (numpy gives its other dims stride 0).
    """
    if data.size == 0:
        return
    for size, stride in zip(data.shape, data.strides, strict=True):
        if stride == 0 and size > 1:
            raise RuntimeError(ERR_OVERLAP)


def check_no_partial_overlap(target: Tensor, operands: Any,
                             region: np.ndarray | None = None) -> None:
    """Raise PyTorch's error when a tensor operand of an in-place op partly overlaps the
    target (`b += b[1:]`, `a.add_(a.t())`), as TensorIterator's assert_no_partial_overlap.

    region: the part of target's data written (`x[1:] = v` on a traced x), default all.
    Its rule (aten/src/ATen/MemoryOverlap.cpp, get_overlap_status): the same tensor, an
    empty one, or one that is not non-overlapping and dense (a strided slice, an expanded
    tensor) passes, since the result then does not depend on the order of the writes;
    otherwise the byte ranges may not intersect unless they coincide with the same strides.
    """
    written = target._data if region is None else region
    for x in operands:
        if isinstance(x, Tensor) and x is not target and _storage(x) is _storage(target) \
                and _partial_overlap(written, x._data):
            raise RuntimeError(ERR_PARTIAL_OVERLAP)


def _partial_overlap(x: Any, y: Any) -> bool:
    if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)) or not (x.size and y.size):
        return False
    if not (layout.non_overlapping_and_dense(x) and layout.non_overlapping_and_dense(y)):
        return False
    x_begin = x.__array_interface__["data"][0]
    y_begin = y.__array_interface__["data"][0]
    x_end, y_end = x_begin + x.nbytes, y_begin + y.nbytes
    if x_begin == y_begin and x_end == y_end:
        return x.strides != y.strides
    return x_begin < y_end and y_begin < x_end


def _storage(t: Tensor) -> Any:
    """What identifies t's storage: its data's root array, or for a compiler's fake tensor
    (whose arrays all lie on one zero mapping) the base tensor of its view."""
    if not values_known(t._data):
        return t._view.base if t._view is not None else t
    root = t._data
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root


def can_cast(source: np.dtype, target: np.dtype) -> bool:
    """PyTorch's canCast: no float -> integer, nothing but bool -> bool."""
    if source.kind == "f" and target.kind in "iub":
        return False
    return not (target.kind == "b" and source.kind != "b")


def _check_result(target: Tensor, out: Tensor, check_dtype: bool) -> None:
    data = target._data
    check_no_overlap(data)
    if out._data.shape != data.shape:
        raise RuntimeError(f"output with shape {list(data.shape)} doesn't match the broadcast "
                           f"shape {list(out._data.shape)}")
    if check_dtype and not can_cast(out._data.dtype, data.dtype):
        raise RuntimeError(
            f"result type {indexing.scalar_type_name(out)} can't be cast to the desired output "
            f"type {indexing.scalar_type_name(target)}; use the out-of-place op "
            "(x = x.op(...)) or convert x first")


# ----- the generic in-place path -------------------------------------------------------

def writable_storage(t: Tensor) -> None:
    """Give a 0-d op result an array to be written into.

    An op's 0-d result may hold a numpy scalar (numpy's ufuncs return one; see Note [Hot
    path] in tensor.py), which cannot be written in place: `total += loss` and
    `x[...] = v` on it would fail or write into a temporary copy. No view shares a
    numpy scalar's memory, so swapping in an equal 0-d array changes nothing else.
    """
    if not isinstance(t._data, np.ndarray):
        t._data = np.array(t._data)


def apply_inplace(target: Tensor, compute: Callable[[Tensor], Tensor],
                  check_dtype: bool = True) -> Tensor:
    """Write `compute(target)` into target's storage and rebase its history (module doc).

    compute: the out-of-place op applied to an alias of `target`, e.g.
    `lambda t: t.mul(2)`. check_dtype: require the result dtype to be castable into the
    target's (arithmetic ops do; copy_ and fill_ cast anything).
    Returns `target`.
    """
    writable_storage(target)
    if not STATE.enabled:
        out = compute(target)
        _check_result(target, out, check_dtype)
        _write(target, out)
        return target
    view = target._view
    if view is not None and view.creation == "no_grad" and view.base._requires_grad:
        check_inplace(target, True)  # PyTorch counts such a view as requiring grad: E10
    history = target.grad_fn if view is not None else target._grad_fn  # refreshes a stale view
    alias = Tensor._make(target._data, target._requires_grad, history, target._output_nr)
    alias._vc = target._version_counter()
    out = compute(alias)
    fn = out._grad_fn
    if fn is None or out is alias or target._data.dtype.kind != "f":
        _check_result(target, out, check_dtype)
        _write(target, out)
        return target
    check_inplace(target, True)
    _check_result(target, out, check_dtype)
    _rebind_saved(fn, alias, out, alias._vc.value + 1)
    _write(target, out)
    if view is None:
        if target._retains_grad:
            _move_retains_grad(history, target._output_nr, fn, out._output_nr)
        target._grad_fn = fn
        target._output_nr = out._output_nr
        target._requires_grad = True
        return target
    base = view.base
    copy_slices = CopySlices(base, view, target._data.shape, fn)
    if base._retains_grad:
        _move_retains_grad(base._grad_fn, base._output_nr, copy_slices, 0)
    base._grad_fn = copy_slices
    base._output_nr = 0
    base._requires_grad = True
    refresh_view_grad_fn(target)
    return target


def _move_retains_grad(old: Any, old_nr: int, new: Any, new_nr: int) -> None:
    """`.grad` of a tensor that retains grad is its final value's gradient (as PyTorch)."""
    store = old.hooks.retains_grad.pop(old_nr, None) if old.hooks is not None else None
    if store is not None:
        new._hooks().retains_grad[new_nr] = store


def _write(target: Tensor, out: Tensor) -> None:
    if out is not target:
        target._data[...] = out._data
    target._bump_version()


def _rebind_saved(fn: Any, alias: Tensor, out: Tensor, version_after: int) -> None:
    """Before the write: keep a copy of the old value where fn saved the target (Note
    [Saving the old self]), and check a saved result, which now lives in the target,
    against the target's version after the write."""
    saved = getattr(fn, "saved", None)
    if saved is None:
        return
    values, counters, versions = list(saved.values), list(saved.counters), list(saved.versions)
    own = out._vc
    for i, value in enumerate(values):
        if value is alias:
            old = Tensor._make(np.array(alias._data, copy=True), alias._requires_grad,
                               alias._grad_fn, alias._output_nr)
            values[i], counters[i], versions[i] = old, old._version_counter(), 0
        elif own is not None and counters[i] is own:
            counters[i], versions[i] = alias._vc, version_after
    fn.saved = SavedValues(tuple(values), tuple(counters), tuple(versions))


# ----- copy_ / fill_ / zero_ ---------------------------------------------------------------

def _copy_forward(x: np.ndarray, src: Any) -> np.ndarray:
    out = np.empty_like(x)
    out[...] = src
    return out


def _copy_backward(xp: Any, ctx: Any, g: Any) -> tuple:
    need_x, need_src = ctx.needs_input_grad
    return (xp.zeros_like(g) if need_x else None), (g if need_src else None)


def _fill_forward(x: np.ndarray, value: Any) -> np.ndarray:
    return np.full_like(x, value)


COPY = register("copy", _copy_forward, _copy_backward,
                source="self is overwritten (zero grad); src: g summed to its shape",
                elementwise=True)
FILL = register("fill", _fill_forward, _copy_backward,
                source="self is overwritten (zero grad); value: sum of g", elementwise=True)


def _source(src: Any, target: Tensor, setitem: bool) -> Any:
    """`src` as the copy op's operand: a number, or a Tensor whose shape expands to target's.

    setitem: PyTorch's `x[i] = v` drops leading size-1 dims of v and reports a shape
    clash with expand's message; copy_ reports it with the broadcast message.
    """
    if isinstance(src, (bool, int, float)):
        return src
    if not isinstance(src, Tensor):
        src = tensor(src, dtype=target.dtype)
    shape = src._data.shape
    if not setitem:
        try:
            expanded_shape(shape, target._data.shape)
        except RuntimeError:
            raise broadcast_error("copy_", shapes_of(target, src)) from None
        return src
    lead = 0
    while len(shape) - lead > target._data.ndim and shape[lead] == 1:
        lead += 1
    expanded_shape(shape[lead:], target._data.shape)
    return src.reshape(shape[lead:]) if lead else src


def copy_(self: Tensor, src: Any, non_blocking: bool = False) -> Tensor:
    """Copy `src` (broadcast to self's shape, cast to self's dtype) into self.

    Gradient: src gets g (summed over broadcast dims); self's old value gets zeros.
    Raises RuntimeError when src does not expand to self's shape.
    """
    return _copy(self, _source(src, self, setitem=False))


def _copy(self: Tensor, src: Any) -> Tensor:
    check_no_partial_overlap(self, (src,))
    arrays_src = src._data if isinstance(src, Tensor) else src
    writable_storage(self)
    if _records_nothing(self, src) and (not isinstance(src, Tensor) or values_known(arrays_src)):
        check_no_overlap(self._data)  # Note [Writing in place]
        self._data[...] = arrays_src  # numpy buffers an overlapping source
        self._bump_version()
        return self
    return apply_inplace(self, lambda t: apply_op(COPY, (t, src), (t._data, arrays_src)),
                         check_dtype=False)


def fill_(self: Tensor, value: Any) -> Tensor:
    """Set every element to `value` (a number or a 0-d tensor, which then gets sum(g))."""
    if isinstance(value, Tensor):
        if value._data.ndim:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value._data.ndim} dimensions.")
        operand: Any = value._data
    else:  # PyTorch's checked conversion: fill_(1e6) of float16 raises, not fills inf
        operand = scalar_as(value, self._data.dtype)
    writable_storage(self)
    if _records_nothing(self, value) and values_known(np.asarray(operand)):
        check_no_overlap(self._data)  # Note [Writing in place]
        self._data[...] = operand
        self._bump_version()
        return self
    return apply_inplace(self, lambda t: apply_op(FILL, (t, value), (t._data, operand)),
                         check_dtype=False)


def zero_(self: Tensor) -> Tensor:
    """Set every element to zero."""
    return fill_(self, 0)


# ----- setitem and index ops ---------------------------------------------------------------

def setitem(self: Tensor, index: Any, value: Any) -> None:
    """`self[index] = value`: a copy into the indexed region (basic index: through a view,
    so a view's base gets CopySlices), or index_put for tensor/list/bool indices.

    value: a number or tensor broadcast to the region; cast to self's dtype. Writing a
    value that requires grad into a tensor that does not makes it require grad.
    """
    writable_storage(self)
    basic, advanced = parse_index(self._data.shape, index)
    view = self._view
    if not STATE.enabled or not (self._requires_grad
                                 or isinstance(value, Tensor) and value._requires_grad
                                 or view is not None and view.base._requires_grad):
        _setitem_untracked(self, basic, advanced, value)
        return
    target = self
    if basic is not None:
        params = {"index": basic}
        out = apply_op(indexing.GETITEM, (self,), (self._data,), params)
        target = make_view(self, out, indexing.GETITEM, params)
    if advanced is None:
        _copy(target, _source(value, target, setitem=True))
    else:
        apply_inplace(target, lambda t: indexing.put(indexing.INDEX_PUT, t, advanced, value, False),
                      check_dtype=False)


def _setitem_untracked(self: Tensor, basic: tuple | None, advanced: tuple | None,
                       value: Any) -> None:
    """`setitem` when no gradient is involved: the same checks, then one numpy write."""
    region = self._data if basic is None else self._data[basic]
    check_no_overlap(region)
    target = Tensor._make(region)
    if advanced is None:
        src = _source(value, target, setitem=True)
        check_no_partial_overlap(target, (src,))
        region[...] = src._data if isinstance(src, Tensor) else src
    else:
        region[advanced] = indexing.put_operand(indexing.INDEX_PUT, target, advanced, value)[1]
    self._bump_version()


def index_put_(self: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
    """In-place `index_put`: write (or add) `values` at `indices` (one tensor per leading dim)."""
    index = indexing.put_index(self._data.shape, indices)
    return apply_inplace(self, lambda t: indexing.put(indexing.INDEX_PUT, t, index, values,
                                                      accumulate))


def index_add_(self: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:
    """In-place `index_add`: add alpha * source[i] into slice index[i] along `dim`."""
    return apply_inplace(self, lambda t: indexing.index_add(t, dim, index, source, alpha=alpha))


def scatter_(self: Tensor, dim: int, index: Tensor, src: Any = None, *,
             value: Any = None) -> Tensor:
    """In-place `scatter`: write src (tensor or number) at `index` along `dim`."""
    return apply_inplace(self, lambda t: indexing.scatter(t, dim, index, src, value=value))


def scatter_add_(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """In-place `scatter_add`: add src at `index` along `dim`."""
    return apply_inplace(self, lambda t: indexing.scatter_add(t, dim, index, src))


# ----- in-place view ops: squeeze_ / unsqueeze_ -----------------------------------------------

def _reshape_in_place(self: Tensor, view: Tensor) -> Tensor:
    """Give `self` the shape and history of `view`, a view of `self` (no data moves).

    As PyTorch's in-place view ops: the storage stays, the version is bumped, the
    tensor's grad_fn becomes the view op's node, and a view keeps its base.
    """
    check_inplace(self)
    self._data = view._data
    if view._grad_fn is not None:
        self._grad_fn = view._grad_fn
        self._output_nr = view._output_nr
    if self._view is not None:
        self._view = view._view  # same base, one more replay step
    self._bump_version()
    return self


def squeeze_(self: Tensor, dim: Any = None) -> Tensor:
    """In-place `squeeze`: drops size-1 dims (all, or those in `dim`) from self's shape.

    Raises RuntimeError for a leaf that requires grad while grad mode is on.
    """
    return _reshape_in_place(self, self.squeeze() if dim is None else self.squeeze(dim))


def unsqueeze_(self: Tensor, dim: int) -> Tensor:
    """In-place `unsqueeze`: inserts a size-1 dim at `dim` into self's shape.

    Raises RuntimeError for a leaf that requires grad while grad mode is on.
    """
    return _reshape_in_place(self, self.unsqueeze(dim))


# ----- pointwise in-place ops ----------------------------------------------------------------

# Note [Writing in place]: with nothing to record, `x.add_(y)`, `sub_`, `mul_` and `div_`
# (and `+=` ...) on a float x compute straight into x's memory (the ufunc's `out=`), as
# PyTorch's kernels do, instead of into a temporary copied in afterwards: an optimizer
# step pays every pass over memory. The ufunc gets exactly the arrays the functional op's
# forward would (`binary_operands`: promotion, weak Python numbers, `alpha * y` first), so
# the values are the functional op's; it writes in place only when that result has x's
# dtype and shape. Anything that might record (grad mode on and x, a view, or an operand
# requiring grad; tracing) takes `apply_inplace`. copy_, fill_ and zero_ write directly too.
_DIRECT_BINARY = {"add": True, "sub": True, "mul": False, "div": False}  # takes alpha


def _records_nothing(self: Tensor, *operands: Any) -> bool:
    """Whether an in-place op on self with these operands cannot record history or be
    traced (Note [Writing in place])."""
    if STATE.recorder is not None or not isinstance(self._data, np.ndarray) \
            or not values_known(self._data):
        return False
    if not STATE.enabled:
        return True
    return self._view is None and not self._requires_grad and not any(
        isinstance(x, Tensor) and x._requires_grad for x in operands)


def _write_binary_directly(self: Tensor, name: str, args: tuple, kwargs: dict) -> bool:
    """`self.<name>_(other, alpha=...)` computed into self's memory, if it may be (Note
    [Writing in place]); False when the generic path must run."""
    if len(args) != 1 or (kwargs and (not _DIRECT_BINARY[name] or set(kwargs) != {"alpha"})):
        return False
    data = self._data
    other = args[0]
    if data.dtype.kind != "f" or not (type(other) in (int, float) or isinstance(other, Tensor)
                                      and values_known(other._data)):
        return False
    if not _records_nothing(self, other):
        return False
    alpha = kwargs.get("alpha", 1)
    if type(alpha) not in (int, float):
        return False
    if alpha != 1:  # as the functional op: alpha * other first (in x's dtype)
        if scaled_number_overflows(self, other, alpha):
            return False  # the functional op rounds the fused sum once
        if _scaled_in_blocks(self, name, other, alpha):
            return True
        if type(other) in (int, float):
            other = other * alpha
        elif other._data.dtype == data.dtype:
            other = binary(OPS["mul"], other, alpha)
        else:
            return False
    op = OPS[name]
    _, arrays = binary_operands(op, self, other, to_float=name == "div")
    operand = arrays[1]
    if arrays[0] is not data or getattr(operand, "dtype", data.dtype) != data.dtype \
            or not _broadcasts_to(np.shape(operand), data.shape):
        return False  # the generic path computes it, or raises PyTorch's error
    check_no_overlap(data)
    op.forward(data, operand, out=data)
    self._bump_version()
    return True


# elements per block of `x.add_(y, alpha=a)` (Note [Writing in place]): 512 KiB of float32,
# so the scaled block stays in the L2 cache between its two passes (measured: 7.5 ms for
# 2^24 float32 against 11.8 ms with 64 KiB blocks)
_SCALED_BLOCK = 131072


def _scaled_in_blocks(self: Tensor, name: str, other: Any, alpha: Any) -> bool:
    """`self.add_(other, alpha=alpha)` (or sub_) for a large C-contiguous other of self's
    shape and dtype, one block at a time: the functional op's `alpha * other` into a small
    scratch block, then added into self, so neither pass goes through a temporary of
    self's size (measured on 2^24 float32: 17.9 ms through the temporary, torch 6.1 ms)."""
    data = self._data
    if not (isinstance(other, Tensor) and other._data.dtype == data.dtype
            and other._data.shape == data.shape and data.size > _SCALED_BLOCK
            and data.flags.c_contiguous and other._data.flags.c_contiguous):
        return False
    multiply, op = OPS["mul"], OPS[name]
    _, (scaled, factor) = binary_operands(multiply, other, alpha)
    if scaled is not other._data or getattr(factor, "dtype", data.dtype) != data.dtype:
        return False
    check_no_overlap(data)
    flat, source = data.reshape(-1), scaled.reshape(-1)
    block = np.empty(_SCALED_BLOCK, data.dtype)
    for start in range(0, flat.size, _SCALED_BLOCK):
        part = flat[start:start + _SCALED_BLOCK]
        product = block[:part.size]
        multiply.forward(source[start:start + _SCALED_BLOCK], factor, out=product)
        op.forward(part, product, out=part)
    self._bump_version()
    return True


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(target, shape) == target
    except ValueError:
        return False


def _inplace_of(name: str) -> Callable[..., Tensor]:
    """`x.<name>_(...)`: the functional `x.<name>(...)` written back into x."""
    direct = name in _DIRECT_BINARY

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        check_no_partial_overlap(self, (*args, *kwargs.values()))
        writable_storage(self)
        if direct and _write_binary_directly(self, name, args, kwargs):
            return self
        return apply_inplace(self, lambda t: getattr(t, name)(*args, **kwargs))

    method.__name__ = method.__qualname__ = f"{name}_"
    method.__doc__ = f"In-place `{name}`: computes `self.{name}(...)` and writes it into self."
    return method


# PyTorch's in-place pointwise methods, each computed by the functional op of that name
POINTWISE = (
    "add", "sub", "mul", "div", "pow", "square", "round", "clamp", "clamp_min", "clamp_max",
    "lerp", "addcmul", "addcdiv", "fmod", "remainder", "floor_divide", "atan2", "masked_fill",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or",
    "logical_xor", "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor", "polygamma",
    "deg2rad", "rad2deg", "sgn", "copysign", "hypot", "xlogy", "heaviside", "ldexp",
    "nextafter", "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm", "igamma",
    "igammac", "mvlgamma",
)  # declared ops get theirs from their declaration (jitgrad/eager/ops/declare.py)
_ALIASES = {"subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div",
            "clip": "clamp", "arctan2": "atan2"}
_OPERATORS = {"__iadd__": "add", "__isub__": "sub", "__imul__": "mul", "__itruediv__": "div",
              "__ipow__": "pow", "__ifloordiv__": "floor_divide", "__imod__": "remainder",
              "__iand__": "bitwise_and", "__ior__": "bitwise_or", "__ixor__": "bitwise_xor",
              "__ilshift__": "bitwise_left_shift", "__irshift__": "bitwise_right_shift"}

METHODS: dict[str, Any] = {f"{name}_": _inplace_of(name) for name in POINTWISE}
METHODS.update({f"{alias}_": METHODS[f"{name}_"] for alias, name in _ALIASES.items()})
METHODS.update({operator: METHODS[f"{name}_"] for operator, name in _OPERATORS.items()})
METHODS.update({
    "copy_": copy_, "fill_": fill_, "zero_": zero_, "__setitem__": setitem,
    "index_put_": index_put_, "index_add_": index_add_, "scatter_": scatter_,
    "scatter_add_": scatter_add_, "squeeze_": squeeze_, "unsqueeze_": unsqueeze_,
})

__all__: list[str] = []
