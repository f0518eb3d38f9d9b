"""`Optimizer`: parameter groups, per-parameter state, state dicts (torch.optim.Optimizer).

Subclasses implement `_update_group(group)`; `step()` runs it for every group under
`no_grad` after evaluating the optional closure. Updates write the parameters' numpy
arrays in place and bump their versions, which is what PyTorch's in-place updates under
`no_grad` amount to (parameters keep their identity; autograd is not involved).
Parameters whose `.grad` is None are skipped and get no state (research/eager_autograd.md
§3.2).

Note [Compiled optimizer step]: `optimizer.step()` and `optimizer.zero_grad()` called
inside `jitgrad.compile`d code are traced like user code (jitgrad/trace/capture/inlining.py lists
these modules), so their Python runs symbolically: the loop over `param_groups` unrolls,
hyperparameters are guarded constants, each `p.grad` is read through the parameter's
source (a graph input, or None guarded as None), `self.state[p]` is the item of a dict
keyed by tensors (guarded to be that parameter), and state created lazily on the first
step is made in the graph and stored after it (a guard on its absence makes the second
call trace again, with the state as inputs; later calls hit the cache). The update itself
is `jitgrad.optim.functional` (`sgd`, `adam`, `rmsprop`), which the tracer runs on its traced
tensors: the formulas become tensor ops (fused by the numba backend into one kernel per
parameter) and the in-place writes into parameters and state (`p.copy_(new)`, the step
counter's `add_(1)`, a float32 0-d tensor and therefore a graph input rather than a
constant recompiled per step) are functionalized: the graph returns the new values and the
compiled function writes them back into the same tensors, bumping their versions (Note
[Functionalized in-place ops] in jitgrad/trace/capture/functionalize.py). `zero_grad()`
becomes replayed `p.grad = None` assignments (or `grad.zero_()` write-backs with set_to_none=False).
Code that cannot be traced (a grad that requires grad, an optimizer whose update writes
numpy arrays, as other subclasses may) makes the call a graph break: it then runs eagerly,
with the same values. An optimizer module joins by writing its update as a function of
tensors in jitgrad.optim.functional and being listed in `_TRACED_LIBRARY_MODULES`
(jitgrad/trace/capture/inlining.py); a user's optimizer written with in-place tensor ops under
`@no_grad()`, as PyTorch's are, is traced as it is.
"""

from __future__ import annotations

import copy
import itertools
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from jitgrad.eager.dtypes import float32
from jitgrad.eager.grad_mode import enable_grad, no_grad
from jitgrad.eager.node import tensor_type_name
from jitgrad.eager.ops.creation import zeros, zeros_like
from jitgrad.eager.tensor import Tensor
from jitgrad.optim.functional import fma as fma  # used by the optimizers written on numpy

ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]


class Optimizer:
    """Base class: holds `param_groups` (dicts with "params" and hyperparameters) and `state`.

    params: an iterable of Tensors, or of dicts each with "params" and per-group overrides
    (missing keys take `defaults`). Raises TypeError for a lone Tensor or a non-tensor
    parameter, ValueError for an empty list, a non-leaf tensor, or a tensor in two groups.
    """

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {tensor_type_name(params)}")
        groups: list[Any] = list(params)  # dicts, or tensors; add_param_group checks
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyperparameters (e.g. when unfreezing layers)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        param_group["params"] = [params] if isinstance(params, Tensor) else list(params)
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                f"{type(param).__qualname__}")
            if not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            param_group.setdefault(name, default)
        ids = [id(p) for p in param_group["params"]]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        existing = {id(p) for group in self.param_groups for p in group["params"]}
        if not existing.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's `.grad`: to None (default) or to zeros in place (a grad
        that records history is first cut from it, as PyTorch does)."""
        for group in self.param_groups:
            for param in group["params"]:
                if set_to_none:  # without reading it: compiled, no guard on each grad
                    param.grad = None
                    continue
                grad = param.grad
                if grad is None:
                    continue
                if grad.requires_grad:
                    if grad.grad_fn is not None:
                        grad.detach_()
                    else:
                        grad.requires_grad_(False)
                grad.zero_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; returns the closure's loss (or None).

        The closure, if given, runs with grad enabled before the update (it usually zeroes
        the grads, computes the loss and calls backward).
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _update_group(self, group: dict[str, Any]) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement _update_group")

    # ----- state dicts ------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """{"state": {index: per-parameter state}, "param_groups": [group with "params": [index]]}.

        Parameters are numbered in group order; state tensors are the optimizer's own
        (not copies), as in PyTorch.
        """
        index_of: dict[int, int] = {}
        counter = itertools.count()
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for param in group["params"]:
                if id(param) not in index_of:
                    index_of[id(param)] = next(counter)
            packed["params"] = [index_of[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {index_of[id(p)]: s for p, s in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyperparameters and per-parameter state saved by `state_dict()`.

        Float state tensors are cast to their parameter's dtype (the "step" counter keeps
        its own). Raises ValueError when the group count or group sizes differ.
        """
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"])
               for g, s in zip(self.param_groups, saved_groups, strict=True)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        param_of = dict(zip(itertools.chain.from_iterable(g["params"] for g in saved_groups),
                            itertools.chain.from_iterable(g["params"] for g in self.param_groups),
                            strict=True))
        state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for index, values in state_dict["state"].items():
            param = param_of[index]
            state[param] = {key: _cast_state(param, key, value) for key, value in values.items()}
        for group, saved in zip(self.param_groups, saved_groups, strict=True):
            saved["params"] = group["params"]
        self.state = state
        self.param_groups = saved_groups

    def __repr__(self) -> str:
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"


def _cast_state(param: Tensor, key: str, value: Any) -> Any:
    """A state entry ready for `param`: float tensors take the parameter's dtype, except "step";
    lists, tuples and dicts are rebuilt around them (as torch's `_cast`), so the loaded
    optimizer never appends to the saved one's history lists (LBFGS's "old_dirs")."""
    if isinstance(value, dict):
        return {k: _cast_state(param, k, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, key, v) for v in value)
    if key == "step" or not isinstance(value, Tensor) or not param.is_floating_point():
        return value
    return value.to(param.dtype)


def lazy_state(optimizer: Optimizer, param: Tensor, names: tuple[str, ...]) -> dict[str, Any]:
    """The parameter's state, created on its first update: step 0. (float32) and zero buffers."""
    state = optimizer.state[param]
    if not state:
        state["step"] = zeros((), dtype=float32)
        for name in names:
            state[name] = zeros_like(param)
    return state


__all__ = ["Optimizer"]
