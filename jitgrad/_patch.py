"""The import swap: `import torch` (and every `torch.*` import) resolves to jitgrad.

`patch_torch()` puts `TorchFinder` first on `sys.meta_path`. The finder answers every
module name `torch` / `torch.<path>` with a `TorchAlias`: a module object named
`torch.<path>` whose attributes are those of `jitgrad.<path>`. A script written for
PyTorch therefore runs unmodified: `import torch.nn as nn`, `from torch.nn import
functional as F`, `from torch.utils.data import DataLoader` and `torch.compile` all
reach jitgrad's objects (the same objects, so `isinstance` and identity checks hold).

Note [Missing torch APIs]: a name jitgrad lacks raises `MissingTorchAPIError`, a subclass of
AttributeError (so `hasattr` feature probes answer False, as nanoGPT's probe of
`scaled_dot_product_attention` expects); an import of a missing module or name raises
`MissingTorchModuleError`, a subclass of ImportError that is not ModuleNotFoundError, because
`from torch.nn import Conv2d` would otherwise swallow it and print only "cannot import
name". Both messages name the torch API, say that jitgrad does not implement it, and
give the user's file:line (the first frame outside the import machinery and this file).

Note [Shadowed torch names]: a few torch functions share their name with a jitgrad
subpackage: `torch.trace` (the matrix trace) against `jitgrad.trace` (the tracer). The
package keeps its name; `SHADOWED` gives the alias of that module torch's object instead,
so `torch.trace(m)` in a swapped script is the matrix trace (plain jitgrad code calls
`m.trace()`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

from jitgrad.eager.ops.matrix import trace as matrix_trace

_IMPORT_FRAMES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>",
                  importlib.__file__)
HINT = ("jitgrad runs the part of the PyTorch API listed in its README "
        "(section 'Running PyTorch scripts'); rewrite this use, or run the script with PyTorch")


# torch module -> {name: jitgrad's object for torch's}: see Note [Shadowed torch names]
SHADOWED: dict[str, dict[str, Any]] = {"torch": {"trace": matrix_trace}}


class MissingTorchAPIError(AttributeError):
    """A torch attribute jitgrad does not implement (see Note [Missing torch APIs])."""


class MissingTorchModuleError(ImportError):
    """A torch module or imported name jitgrad does not implement."""


def user_location() -> str:
    """`file:line` of the innermost frame outside importlib and this module."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in (*_IMPORT_FRAMES, __file__):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def missing_message(torch_path: str, owner: str, name: str) -> str:
    return (f"module '{owner}' has no attribute '{name}': jitgrad does not implement "
            f"{torch_path} (used at {user_location()}); {HINT}")


def torch_name(jitgrad_name: str) -> str:
    """`jitgrad.nn.functional` -> `torch.nn.functional`."""
    return "torch" + jitgrad_name[len("jitgrad"):]


def alias_of(value: Any) -> Any:
    """The torch alias module for a jitgrad module, any other value unchanged."""
    if isinstance(value, types.ModuleType) and not isinstance(value, TorchAlias):
        name = value.__name__
        if name == "jitgrad" or name.startswith("jitgrad."):
            return importlib.import_module(torch_name(name))
    return value


def _submodule(package: Any, name: str) -> types.ModuleType | None:
    """jitgrad's submodule `name` of `package`, imported now; None if there is none."""
    if not hasattr(package, "__path__"):
        return None
    full_name = f"{package.__name__}.{name}"
    try:
        return importlib.import_module(full_name)
    except ModuleNotFoundError as err:
        if err.name != full_name:
            raise
        return None


class TorchAlias(types.ModuleType):
    """Module `torch.<path>` whose attributes are looked up on its jitgrad target.

    Lookups are cached on the alias after the first access, so a hot loop calling
    `torch.zeros` pays for `__getattr__` once.
    """

    def __init__(self, name: str, target: Any) -> None:
        super().__init__(name, getattr(target, "__doc__", None))
        self.__dict__["_jitgrad_target"] = target

    def __getattr__(self, name: str) -> Any:
        target = self.__dict__["_jitgrad_target"]
        shadowed = SHADOWED.get(self.__name__, {})
        if name in shadowed:
            self.__dict__[name] = shadowed[name]
            return shadowed[name]
        try:
            value = getattr(target, name)
        except AttributeError:
            if name == "__all__":  # `from torch import *` takes jitgrad's public names
                return [n for n in dir(target) if not n.startswith("_")]
            if name.startswith("__"):
                raise
            value = _submodule(target, name)  # torch.nn.parallel works without an import
            if value is None:
                path = f"{self.__name__}.{name}"
                error = MissingTorchAPIError(missing_message(path, self.__name__, name))
                error.name, error.obj = name, self
                raise error from None
        value = alias_of(value)
        self.__dict__[name] = value
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self.__dict__["_jitgrad_target"])) | set(self.__dict__))

    def __repr__(self) -> str:
        return f"<module '{self.__name__}' (jitgrad alias of {self.__dict__['_jitgrad_target']!r})>"


class TorchFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `torch` and `torch.*` and loads each as a `TorchAlias` of jitgrad's module."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> TorchAlias:
        jitgrad_name = "jitgrad" + spec.name[len("torch"):]
        try:
            return TorchAlias(spec.name, importlib.import_module(jitgrad_name))
        except ModuleNotFoundError as err:
            if err.name != jitgrad_name:
                raise
        # not a module in jitgrad: maybe an object, e.g. `import torch.backends.cudnn`
        parent_name, _, child = spec.name.rpartition(".")
        parent = sys.modules[parent_name]
        value = getattr(parent.__dict__["_jitgrad_target"], child, None)
        if value is None:
            raise MissingTorchModuleError(
                f"No module named '{spec.name}': jitgrad does not implement {spec.name} "
                f"(imported at {user_location()}); {HINT}", name=spec.name)
        return TorchAlias(spec.name, value)

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the alias reads its jitgrad target."""


_FINDER = TorchFinder()
_saved_modules: dict[str, types.ModuleType] = {}


def _torch_module_names() -> list[str]:
    return [name for name in sys.modules if name == "torch" or name.startswith("torch.")]


def patch_torch() -> types.ModuleType:
    """Make `import torch` and every `torch.*` import resolve to jitgrad; return `torch`.

    Modules of a real PyTorch already imported are set aside (and restored by
    `unpatch_torch`). Calling it again while patched changes nothing.
    """
    if _FINDER not in sys.meta_path:
        for name in _torch_module_names():
            _saved_modules[name] = sys.modules.pop(name)
        sys.meta_path.insert(0, _FINDER)
    return importlib.import_module("torch")


def unpatch_torch() -> None:
    """Undo `patch_torch`: drop the aliases and the finder, restore a real torch's modules."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in _torch_module_names():
        if isinstance(sys.modules[name], TorchAlias):
            del sys.modules[name]
    sys.modules.update(_saved_modules)
    _saved_modules.clear()


def is_patched() -> bool:
    """Whether `patch_torch()` is in effect."""
    return _FINDER in sys.meta_path


__all__ = ["patch_torch", "unpatch_torch", "is_patched", "MissingTorchAPIError",
           "MissingTorchModuleError", "TorchAlias"]
