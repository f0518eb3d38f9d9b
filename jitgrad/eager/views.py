"""Views: tensors sharing storage with a base, and their autograd bookkeeping.

A view op (reshape when possible, permute, expand, slicing, squeeze, ...) returns a
Tensor whose `_data` is a numpy view of its input's data, sharing the input's version
counter, with a `ViewInfo` that records the root base and the *replay steps* that
produce the view from the base: `(OpDef, params, input_metadata)` per view op. Replaying
the steps' forwards maps any array of the base's shape to the view (used to write into
the region of a gradient); replaying their backwards in reverse maps a gradient of the
view to a gradient of the base.

Note [View grad_fn regeneration]: when the shared storage is modified in place through
another alias, PyTorch rebuilds the view's grad_fn lazily as `AsStridedBackward` on top
of the base's new history. We do the same: a view records the version at which its
grad_fn was built, and `Tensor.grad_fn` calls `refresh_view_grad_fn` when it changed.

An in-place op through a view rewrites the *base's* history: its grad_fn becomes a
`CopySlices` node around the op's node (the recipe is in `ops/inplace.py`).

Known difference: PyTorch computes a view's `requires_grad` from its base on every
access; here it is set when the view is made and when its grad_fn is rebuilt, so a view
taken before its base started to require grad (e.g. `v = x[:2]; x[1:] = w`) does not
record history until its grad_fn is next read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitgrad.eager import xp as xp_namespaces
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.node import Node
from jitgrad.eager.ops.registry import OpDef, apply_op
from jitgrad.eager.tensor import Tensor, ViewInfo, gradient_edge


class ReplayStep:
    """One view op applied on the way from the base to the view."""

    __slots__ = ("op", "params", "input_metadata", "next_edges")

    def __init__(self, op: OpDef, params: dict[str, Any], input_metadata: tuple) -> None:
        self.op = op
        self.params = params
        self.input_metadata = (input_metadata,)
        self.next_edges = (True,)  # read by formulas as ctx.needs_input_grad

    @property
    def needs_input_grad(self) -> tuple[bool, ...]:
        return (True,)

    def forward(self, value: Any) -> Any:
        """Apply this view op to an array (numpy view) or a Tensor (recorded op)."""
        if isinstance(value, Tensor):
            return apply_op(self.op, (value,), (value._data,), self.params)
        return self.op.forward(value, **self.params)

    def backward(self, xp: Any, g: Any) -> Any:
        """Map a gradient of this step's output to its input (the op's own formula)."""
        backward = self.op.backward
        assert backward is not None, f"view op {self.op.name} has a derivative"
        (grad,) = backward(xp, self, g)
        shape = self.input_metadata[0][0]
        actual = grad._data.shape if isinstance(grad, Tensor) else np.shape(grad)
        return grad if actual == shape else xp.sum_to(grad, shape)


def make_view(source: Tensor, out: Tensor, op: OpDef, params: dict[str, Any],
              creation: str | None = None) -> Tensor:
    """Mark `out` (just produced from `source` by view op `op`) as a view of source's base.

    creation: the multi-output op that made `out` ("Split", "Unbind"), whose outputs
    may not be modified in place; a view made under no_grad is "no_grad" regardless.
    """
    step = ReplayStep(op, params, (source._data.shape, source._data.dtype))
    parent = source._view
    counter = source._version_counter()
    if parent is None:
        base, replay = source, (step,)
        base_creation = "default"
    else:
        base, replay = parent.base, parent.replay + (step,)
        base_creation = parent.creation
    if base_creation != "default":
        creation = base_creation  # a view of a restricted view keeps the restriction
    elif creation is None or not STATE.enabled:
        creation = "default" if STATE.enabled else "no_grad"
    out._view = ViewInfo(base, replay, creation, counter.value)
    out._vc = counter
    return out


def view_op(source: Tensor, op: OpDef, params: dict[str, Any]) -> Tensor:
    """Apply view op `op` to `source` and mark the result as a view of source's base."""
    out = apply_op(op, (source,), (source._data,), params)
    return make_view(source, out, op, params)


def rebuild_view(base: Tensor, replay: tuple[ReplayStep, ...], creation: str) -> Tensor:
    """The view `replay` makes of `base`, made again with eager view ops (sharing its
    storage, version counter and autograd history), in the grad mode it was made in.

    creation: the ViewInfo's ("no_grad" replays under no_grad; a multi-output op's name
    keeps its restriction on in-place writes). Compiled graphs return the views they
    computed this way (AOTAutograd regenerates aliased outputs the same way).
    """
    enabled = STATE.enabled
    STATE.enabled = enabled and creation != "no_grad"
    try:
        for step in replay:
            out = apply_op(step.op, (base,), (base._data,), step.params)
            base = make_view(base, out, step.op, step.params,
                             None if creation in ("default", "no_grad") else creation)
    finally:
        STATE.enabled = enabled
    return base


def replay_forward(replay: tuple[ReplayStep, ...], value: Any) -> Any:
    """The region of `value` (shaped like the base) that the view looks at."""
    for step in replay:
        value = step.forward(value)
    return value


def replay_backward(replay: tuple[ReplayStep, ...], xp: Any, g: Any) -> Any:
    """Gradient of the base from a gradient of the view, through each view op's formula."""
    for step in reversed(replay):
        g = step.backward(xp, g)
    return g


class AsStridedBackward(Node):
    """Regenerated grad_fn of a view whose base was modified in place (see Note above).

    Shapes: grad of the view -> grad of the base (zeros outside the viewed region,
    summed where the view repeats elements, e.g. after expand).
    """

    __slots__ = ("replay",)

    def __init__(self, view: ViewInfo, base_edge: Any, base: Tensor) -> None:
        super().__init__()
        self.replay = view.replay  # not the ViewInfo: the graph must not keep the base alive
        self.next_edges = (base_edge,)
        self.input_metadata = ((base._data.shape, base._data.dtype),)

    def apply(self, grad_outputs: list[Any], create_graph: bool) -> tuple[Any, ...]:
        xp = xp_namespaces.TENSOR if create_graph else xp_namespaces.NUMPY
        return (replay_backward(self.replay, xp, grad_outputs[0]),)


def refresh_view_grad_fn(t: Tensor) -> None:
    """Rebuild a view's grad_fn on top of its base's current history (lazy, as PyTorch).

    Raises RuntimeError for an output of split/chunk/unbind that needs gradients: PyTorch
    cannot rebuild those either.
    """
    view = t._view
    assert view is not None and t._vc is not None, "only views are refreshed"
    base = view.base
    if view.creation not in ("default", "no_grad") and (base._requires_grad or t._requires_grad):
        raise RuntimeError(
            f"Output {t._output_nr} of {view.creation} is a view and its base or another view of "
            "its base has been modified inplace. This view is the output of a function that "
            "returns multiple views. Such functions do not allow the output views to be modified "
            "inplace. You should replace the inplace operation by an out-of-place one.")
    view.version = t._vc.value
    if view.creation == "no_grad" or not (base._requires_grad or t._requires_grad):
        return
    edge = gradient_edge(base)
    if edge is None:
        return
    t._grad_fn = AsStridedBackward(view, edge, base)
    t._output_nr = 0
    t._requires_grad = True


class CopySlices(Node):
    """grad_fn of a base after an in-place op wrote through one of its views.

    PyTorch's CopySlices (torch/csrc/autograd/functions/tensor.h): `fn` is the in-place
    op's own node, whose input 0 is the view's old value. The base's gradient is the
    incoming gradient `g` with the viewed region replaced by fn's gradient for that old
    value; fn's other inputs (e.g. the value written by `x[i] = v`) get fn's gradients.
    Shapes: g like the base -> (grad of the base, fn's grads for inputs 1..n).
    """

    __slots__ = ("replay", "fn", "view_shape")

    def __init__(self, base: Tensor, view: ViewInfo, view_shape: tuple[int, ...],
                 fn: Node) -> None:
        super().__init__()
        self.replay = view.replay  # not the ViewInfo, which refers to the base: no cycle
        self.fn = fn
        self.view_shape = view_shape
        self.next_edges = (gradient_edge(base),) + tuple(fn.next_edges[1:])
        self.input_metadata = ((base._data.shape, base._data.dtype),) + tuple(
            fn.input_metadata[1:])

    def apply(self, grad_outputs: list[Any], create_graph: bool) -> tuple[Any, ...]:
        g = grad_outputs[0]
        if create_graph:
            return self._apply_by_masks(xp_namespaces.TENSOR, g, True)
        result = np.array(g, copy=True)
        region = replay_forward(self.replay, result)
        if not np.may_share_memory(region, result):  # a reshape step had to copy
            return self._apply_by_masks(xp_namespaces.NUMPY, g, False)
        grads = self.fn.apply([np.array(region, copy=True)], False)
        region[...] = 0 if grads[0] is None else self._fit(xp_namespaces.NUMPY, grads[0])
        return (result,) + tuple(grads[1:])

    def _apply_by_masks(self, xp: Any, g: Any, create_graph: bool) -> tuple[Any, ...]:
        """The same result without writing into a buffer: g outside the region + fn's grad."""
        grads = self.fn.apply([replay_forward(self.replay, g)], create_graph)
        ones = np.ones(self.view_shape, dtype=self.input_metadata[0][1])
        outside = replay_backward(self.replay, xp_namespaces.NUMPY, ones) == 0
        base_grad = g * outside
        if grads[0] is not None:
            base_grad = base_grad + replay_backward(self.replay, xp, self._fit(xp, grads[0]))
        return (base_grad,) + tuple(grads[1:])

    def _fit(self, xp: Any, grad: Any) -> Any:
        """fn's gradient for the old view value, at exactly the view's shape."""
        shape = grad._data.shape if isinstance(grad, Tensor) else np.shape(grad)
        target = self.view_shape
        if shape == target:
            return grad
        if len(shape) <= len(target) and all(
                s in (1, t) for s, t in zip(shape[::-1], target[::-1], strict=False)):
            return xp.expand(grad, target)
        return xp.sum_to(grad, target)

    def release_variables(self) -> None:
        self.fn.release_variables()


# Tensor.grad_fn rebuilds a stale view's history with it (Note [View grad_fn regeneration])
METHODS = {"_refresh_view_grad_fn": refresh_view_grad_fn}
