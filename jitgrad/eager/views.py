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
        (grad,) = self.op.backward(xp, self, g)
        shape = self.input_metadata[0][0]
        actual = grad._data.shape if isinstance(grad, Tensor) else np.shape(grad)
        return grad if actual == shape else xp.sum_to(grad, shape)


def make_view(source: Tensor, out: Tensor, op: OpDef, params: dict[str, Any],
              creation: str | None = None) -> Tensor:
    """Mark `out` (just produced from `source` by view op `op`) as a view of source's base."""
    step = ReplayStep(op, params, (source._data.shape, source._data.dtype))
    parent = source._view
    counter = source._version_counter()
    if parent is None:
        base, replay = source, (step,)
        base_creation = "default"
    else:
        base, replay = parent.base, parent.replay + (step,)
        base_creation = parent.creation
    if creation is None:
        creation = base_creation if base_creation != "default" else (
            "default" if STATE.enabled else "no_grad")
    out._view = ViewInfo(base, replay, creation, counter.value)
    out._vc = counter
    return out


def replay_forward(view: ViewInfo, value: Any) -> Any:
    """The region of `value` (shaped like the base) that the view looks at."""
    for step in view.replay:
        value = step.forward(value)
    return value


def replay_backward(view: ViewInfo, xp: Any, g: Any) -> Any:
    """Gradient of the base from a gradient of the view, through each view op's formula."""
    for step in reversed(view.replay):
        g = step.backward(xp, g)
    return g


class AsStridedBackward(Node):
    """Regenerated grad_fn of a view whose base was modified in place (see Note above).

    Shapes: grad of the view -> grad of the base (zeros outside the viewed region,
    summed where the view repeats elements, e.g. after expand).
    """

    __slots__ = ("view",)

    def __init__(self, view: ViewInfo, base_edge: Any, base: Tensor) -> None:
        super().__init__()
        self.view = view
        self.next_edges = (base_edge,)
        self.input_metadata = ((base._data.shape, base._data.dtype),)

    def apply(self, grad_outputs: list[Any], create_graph: bool) -> tuple[Any, ...]:
        xp = xp_namespaces.TENSOR if create_graph else xp_namespaces.NUMPY
        return (replay_backward(self.view, xp, grad_outputs[0]),)


def refresh_view_grad_fn(t: Tensor) -> None:
    """Rebuild a view's grad_fn on top of its base's current history (lazy, as PyTorch)."""
    view = t._view
    assert view is not None and t._vc is not None, "only views are refreshed"
    view.version = t._vc.value
    base = view.base
    if view.creation == "no_grad" or not (base._requires_grad or t._requires_grad):
        return
    edge = gradient_edge(base)
    if edge is None:
        return
    t._grad_fn = AsStridedBackward(view, edge, base)
    t._output_nr = 0
    t._requires_grad = True
