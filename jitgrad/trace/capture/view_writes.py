"""In-place writes and views in traced code: the functional form AOTAutograd gives them.

Note [Functionalized views]: a view made while tracing (`u = v.t()`, `v[0]`, `v.view(6)`)
is a FakeTensor with its own graph value and a ViewInfo naming its root base and the
view ops (replay steps) from the base to it. Graphs are functional, so a write that
eager performs on shared memory becomes new values here:
- a write into a base `v` (`v.mul_(2)`) gives `v` a new node; then every view of it
  made in the trace is *regenerated*: its node becomes its replay steps applied to the
  new base value, so `u` reads the write, and its gradient flows to the new value, as
  eager's regenerated view grad_fn (AsStridedBackward) does;
- a write through a view `u` (`u.add_(1)`, `u[0] = x`, `u.copy_(y)`) becomes a write of
  the base: `where(outside, v, scatter(u_new))`, where `scatter` is the replay steps'
  backward formulas (zero outside the viewed region) and `outside` the mask of the
  base's elements the view does not see; then every view is regenerated, `u` included.
  Its gradient is eager's CopySlices: the base keeps the incoming gradient outside the
  region, the value written gets the region's.
Views of `.data`/`.detach()` aliases count as views of the storage they share. A view
made under no_grad is regenerated as a `detach` of its replay (it never gets a history,
as in eager). Writes through views eager cannot write (an `expand`, outputs of split,
chunk or unbind) are refused, so they run eagerly (jitgrad/trace/capture/fake.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from jitgrad.eager import layout, xp
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.ops.comparison import where
from jitgrad.eager.ops.registry import OPS, apply_op
from jitgrad.eager.ops.shape import EXPAND
from jitgrad.eager.tensor import Tensor, ViewInfo
from jitgrad.eager.views import replay_backward, replay_forward

if TYPE_CHECKING:
    from jitgrad.trace.capture.fake import FakeTensor


def unwritable_view(view: ViewInfo) -> str | None:
    """Why eager would not let a write through this view happen as a plain write, if so."""
    if view.creation not in ("default", "no_grad"):
        return f"an output of {view.creation}"
    if any(step.op is EXPAND for step in view.replay):
        return "an expanded view (its elements share memory)"
    return None


def written_base(view: ViewInfo, base: Tensor, value: Tensor) -> Tensor:
    """The base's value after `value` is written into the region `view` sees.

    Shapes: base like the root base, value like the view -> like the base.
    """
    ones = np.ones(value._data.shape, dtype=value._data.dtype)
    outside = np.asarray(replay_backward(view.replay, xp.NUMPY, ones) == 0)
    # laid out as the base, so the where (whose first operand decides its result's layout)
    # gives the base its own layout back: through `b.t()` the mask comes out transposed
    # (new-user report: `b.t().add_(1)` left a compiled `b` transposed, eager's is not)
    outside = layout.with_strides(outside, layout.preserved_strides(base._data))
    scattered = replay_backward(view.replay, xp.TENSOR, value)
    return where(Tensor._make(outside), base, scattered)


def views_of(graph: Any, storage: Any) -> list[FakeTensor]:
    """The traced views whose root base holds `storage` (each once, in creation order)."""
    if not any(t._vc is not None for t in storage.tensors):  # make_view gives the base one
        return []
    found: dict[int, FakeTensor] = {}
    for node in graph.nodes:
        val = node.meta.get("val")
        view = getattr(val, "_view", None)
        if view is not None and view.base.__dict__.get("storage") is storage:
            found.setdefault(id(val), val)
    return list(found.values())


def regenerated(view: Tensor) -> Tensor:
    """The view's value replayed on its base's current value (a detach if it was made
    under no_grad). Recorded into the graph being traced."""
    info = view._view
    assert info is not None, "only views are regenerated"
    value = replay_forward(info.replay, info.base)
    if info.creation == "no_grad" and STATE.enabled and value._requires_grad:
        value = apply_op(OPS["detach"], (value,), (value._data,), {})
        value._requires_grad = False
    return value
