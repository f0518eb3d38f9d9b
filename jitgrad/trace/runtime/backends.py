"""Backends: what turns a captured graph into the callable a compiled function runs.

Contract (as torch.compile's, DESIGN.md "Codegen"):
    backend(gm: GraphModule, example_inputs: list) -> callable(*flat_inputs) -> tuple
`example_inputs` are the real inputs of the call that triggered the compile, one per
placeholder. A backend is a registered name or any such callable. Built in here:
"eager", which runs the GraphModule's generated function (eager ops, so autograd works
through it: the correctness oracle). "numba" lives in jitgrad.codegen and is registered
by the composition root (jitgrad/compile.py), since trace never imports codegen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jitgrad.trace.ir.graph_module import GraphModule

Backend = Callable[[GraphModule, list], Callable[..., tuple]]

_BACKENDS: dict[str, Backend] = {}


class InvalidBackendError(RuntimeError):
    """A backend name that is not registered."""


def register_backend(name: str, backend: Backend) -> Backend:
    """Make `backend` available as `compile(..., backend=name)`; returns it.

    Raises: ValueError if `name` is already registered to a different callable.
    """
    existing = _BACKENDS.get(name)
    if existing is not None and existing is not backend:
        raise ValueError(f"backend {name!r} is already registered ({existing!r}); "
                         "pick another name")
    _BACKENDS[name] = backend
    return backend


def list_backends() -> list[str]:
    """The registered backend names, sorted."""
    return sorted(_BACKENDS)


def lookup_backend(backend: str | Backend) -> Backend:
    """The backend callable for a registered name, or `backend` itself if it is callable.

    Raises: InvalidBackendError (a RuntimeError) for an unknown name, listing the known ones;
    TypeError for anything that is neither a string nor callable.
    """
    if isinstance(backend, str):
        found = _BACKENDS.get(backend)
        if found is None:
            known = ", ".join(repr(n) for n in list_backends())
            raise InvalidBackendError(
                f"unknown backend {backend!r}; available: {known}. Pass one of these names "
                "or a callable (gm, example_inputs) -> callable")
        return found
    if callable(backend):
        return backend
    raise TypeError(f"backend must be a name or a callable (gm, example_inputs) -> callable, "
                    f"got {type(backend).__name__}")


def eager(gm: GraphModule, example_inputs: list[Any]) -> Callable[..., tuple]:
    """Run the graph with eager ops: the GraphModule's generated `forward` itself."""
    return gm.forward


register_backend("eager", eager)
