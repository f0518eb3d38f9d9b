"""Activations of `jitgrad.nn.functional`, made from their declarations.

Each activation exposed by an `NNForm` (Note [Declaring an op once] in
jitgrad/eager/ops/declare.py: relu, elu, hardtanh, selu, gelu, ...) is here as PyTorch
has it: the op itself when PyTorch's form takes no `inplace` flag (gelu, softplus,
hardshrink), else a function with PyTorch's signature `elu(input, alpha=1.0,
inplace=False)` that writes into `input` when asked (with its history rebased, see
inplace.py), and `elu_(input, alpha=1.0)` where PyTorch has one. They are Python
functions with real signatures (`declare.define`), so arguments bind and fail as PyTorch's do.
A form declared after this module loads (a user's op) is added here and to
jitgrad.nn.functional at once (`declare.watch_nn_forms`).

softmin and glu take a `dim` and stay hand-written.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

from jitgrad.eager.ops import activation, nn_ops, slicing
from jitgrad.eager.ops.declare import REQUIRED, NNForm, define, watch_nn_forms
from jitgrad.eager.ops.inplace import apply_inplace
from jitgrad.eager.ops.shape import clone
from jitgrad.eager.tensor import Tensor, normalize_dim


def softmin(input: Tensor, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """softmax(-x) along `dim`."""
    return nn_ops.softmax(-input, dim, dtype)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b) for the halves a, b of `input` along `dim`.

    Raises RuntimeError when that dim has an odd size (as PyTorch).
    """
    d = normalize_dim(dim, input.ndim)
    size = input.shape[d]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {size}")
    a, b = slicing.split(input, size // 2, d)
    return a * activation.sigmoid(b)


__all__ = ["softmin", "glu"]


# ----- generated forms ----------------------------------------------------------------


def parameters(function: Callable[..., Any]) -> list[inspect.Parameter]:
    """The parameters of an activation after its input, in order, with their defaults (not
    the declared op's keyword `out=`: torch.nn.functional has none)."""
    return [p for p in list(inspect.signature(function).parameters.values())[1:]
            if p.kind is not p.KEYWORD_ONLY]


def publish(name: str, value: Any, modules: tuple[str, ...]) -> None:
    """Bind `name` to `value` in each of the (loaded) `modules`, and list it in their
    `__all__`."""
    for module_name in modules:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        setattr(module, name, value)
        public = getattr(module, "__all__", None)
        if public is not None and name not in public:
            public.append(name)


def _inplace_forms(function: Callable[..., Tensor], form: NNForm) -> list[Callable[..., Tensor]]:
    """`name(input, *params, inplace=False)` and, with `inplace_function`, `name_(input,
    *params)`."""
    name, params = function.__name__, [(p.name, p.default) for p in parameters(function)]
    rest = "".join(f", {p}" for p, _ in params)
    read = "clone(t)" if form.reads_copy else "t"
    namespace = {"__name__": __name__, "function": function, "apply_inplace": apply_inplace,
                 "clone": clone}
    write = f"apply_inplace(input, lambda t: function({read}{rest}))"
    summary = (function.__doc__ or name).strip().splitlines()[0]
    forms = [define(name, [("input", REQUIRED), *params, ("inplace", False)],
                    f"if inplace:\n    return {write}\n"
                    f"return function(input{rest})",
                    namespace, f"{summary}\n\ninplace=True overwrites `input`.")]
    if form.inplace_function:
        forms.append(define(f"{name}_", [("input", REQUIRED), *params], f"return {write}",
                            dict(namespace), f"In-place `{name}`."))
    return forms


def _expose(function: Callable[..., Tensor], form: NNForm) -> None:
    forms = _inplace_forms(function, form) if form.inplace else [function]
    for public in forms:
        publish(public.__name__, public, (__name__, "jitgrad.nn.functional"))


watch_nn_forms(_expose)
