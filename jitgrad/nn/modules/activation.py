"""Activation modules (torch.nn.ReLU, GELU, ...), made from their declarations.

Each activation exposed by an `NNForm` with a module name (Note [Declaring an op once] in
jitgrad/eager/ops/declare.py) gets its class here, as PyTorch's: the constructor takes
the activation's parameters with PyTorch's defaults (and `inplace=False` where PyTorch
has it) and stores each under its own name, `forward` calls the functional form of
jitgrad.nn.functional, and `extra_repr` prints as PyTorch's (`ELU(alpha=1.0,
inplace=True)`, `GELU(approximate='none')`, `Hardshrink(0.5)`, `Tanh()`, and nothing for
Hardsigmoid and Hardswish, which print no options in PyTorch). `__init__` and `forward`
are Python functions with real signatures (`declare.define`), so the
tracer inlines `forward` as it does any module's. A form declared later (a user's op) gets
its class here and in jitgrad.nn at once.

Softmax, LogSoftmax, Softmin and GLU take a `dim` and stay hand-written.
"""

from __future__ import annotations

from collections.abc import Callable

from jitgrad.eager.ops.declare import REQUIRED, NNForm, define, watch_nn_forms
from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn import functional_activation
from jitgrad.nn.modules.attention import MultiheadAttention  # torch keeps it here
from jitgrad.nn.modules.module import Module


class Softmax(Module):
    """exp(x) / sum(exp(x)) along `dim`; each slice along `dim` sums to 1."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log(softmax(x)) along `dim`, computed stably (x - logsumexp(x))."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(Softmax):
    """softmax(-x) along `dim`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softmin(input, self.dim)


class GLU(Module):
    """a * sigmoid(b) for the two halves a, b of the input along `dim`."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


__all__ = ["MultiheadAttention", "Softmax", "LogSoftmax", "Softmin", "GLU"]


# ----- generated classes --------------------------------------------------------------


def _extra_repr(options: list[str], form: NNForm) -> Callable[[Module], str] | None:
    """PyTorch's extra_repr: `alpha=1.0, inplace=True` (inplace only when set), the bare
    value, or none."""
    if form.extra_repr == "none" or not (options or form.inplace):
        return None
    if form.extra_repr == "value":
        return lambda self: ", ".join(str(getattr(self, name)) for name in options)

    def extra_repr(self: Module) -> str:
        shown = [_option(name, getattr(self, name)) for name in options]
        return ", ".join(shown + (["inplace=True"] if form.inplace and self.inplace else []))
    return extra_repr


def _option(name: str, value: object) -> str:
    """`alpha=1.0`; a string quoted, as GELU's `approximate='none'`."""
    return f"{name}={value!r}" if isinstance(value, str) else f"{name}={value}"


def module_class(function: Callable[..., Tensor], form: NNForm) -> type[Module]:
    """The Module class `form.module` of the activation `function` (its functional form in
    jitgrad.nn.functional, PyTorch's `inplace` flag last)."""
    class_name = form.module
    assert class_name is not None, "only a form naming its module gets a class"
    params = [(p.name, p.default) for p in functional_activation.parameters(function)]
    options = [name for name, _ in params if name != "inplace"]
    attributes = options + (["inplace"] if form.inplace else [])
    namespace = {"__name__": __name__, "function": function}
    summary = (function.__doc__ or class_name).strip().splitlines()[0]
    members: dict = {
        "__module__": __name__, "__qualname__": class_name, "__doc__": summary,
        "forward": define(
            "forward", [("self", REQUIRED), ("input", REQUIRED)],
            "return function(input" + "".join(f", self.{a}" for a in attributes) + ")",
            namespace, f"{class_name} of `input`.")}
    if attributes:
        members["__init__"] = define(
            "__init__", [("self", REQUIRED), *params], "super(cls, self).__init__()\n"
            + "".join(f"self.{a} = {a}\n" for a in attributes), namespace,
            f"Stores {', '.join(attributes)}.")
    extra_repr = _extra_repr(options, form)
    if extra_repr is not None:
        members["extra_repr"] = extra_repr
    for member in ("forward", "__init__", "extra_repr"):
        if member in members:
            members[member].__qualname__ = f"{class_name}.{member}"
    cls = type(class_name, (Module,), members)
    namespace["cls"] = cls
    return cls


def _expose(function: Callable[..., Tensor], form: NNForm) -> None:
    if form.module is not None:
        public = getattr(functional_activation, function.__name__)
        functional_activation.publish(form.module, module_class(public, form),
                                      (__name__, "jitgrad.nn.modules", "jitgrad.nn"))


watch_nn_forms(_expose)
