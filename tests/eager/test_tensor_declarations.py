"""`jitgrad/eager/tensor_declarations.py` declares, for type checkers, every method that
`tensor_methods.install` attaches to Tensor, with its return type; this test fails when
the two drift. Regenerate with `python -m tests.eager.test_tensor_declarations`."""

import inspect
import pathlib
import typing

from jitgrad.eager import tensor_declarations, tensor_methods

PATH = pathlib.Path(tensor_declarations.__file__)
HEADER = '''"""The Tensor methods that `tensor_methods.install` attaches, declared for type checkers.

Tensor inherits `TensorMethods`, which holds annotations only: no attribute exists until
install() sets it, so the run time is unchanged and mypy sees `x.reshape(...)` as a
Tensor. Generated from the op modules' METHODS by tests/eager/test_tensor_declarations.py
(`python -m tests.eager.test_tensor_declarations`), which fails when the two drift.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jitgrad.eager.tensor import Tensor


class TensorMethods:
    __slots__ = ()

'''
BUILTIN = {"bool", "int", "float", "str"}


def _returns(fn) -> str:
    try:
        annotation = inspect.signature(fn).return_annotation
    except (TypeError, ValueError):  # a builtin without a signature
        return "Any"
    if annotation is inspect.Signature.empty:
        return "Any"
    text = annotation if isinstance(annotation, str) else typing._type_repr(annotation)
    return f"builtins.{text}" if text in BUILTIN else text


def declarations() -> str:
    # not `__new__`: mypy refuses a Callable attribute in place of object.__new__
    methods = {name: fn for module in tensor_methods.OP_MODULES
               for name, fn in module.METHODS.items() if name != "__new__"}
    lines = [(f"    {name}: {_returns(fn.fget)}" if isinstance(fn, property) else
              f"    {name}: Callable[..., {_returns(fn)}]") +
             ("  # noqa: N815 - torch's name" if name[:1].islower() and name != name.lower()
              else "") for name, fn in sorted(methods.items())]
    return HEADER + "\n".join(lines) + "\n"


def test_every_installed_method_is_declared_with_its_return_type():
    assert PATH.read_text() == declarations()


if __name__ == "__main__":
    PATH.write_text(declarations())
