"""Containers: `Sequential`, `ModuleList`, `ModuleDict`, `ParameterDict` (torch.nn containers).

Children live in `_modules` like any submodule, so traversal, state_dict keys ("0.weight")
and printing come from `Module`. Sequential and ModuleList key their children "0", "1", ...
and renumber after a deletion, as PyTorch does. A ParameterDict stores each entry as an
attribute of itself (so tensors register as parameters named by their key) and keeps the
key order in `_keys`; a plain tensor is wrapped in a Parameter, other values stay as they are.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, overload

from jitgrad.eager.tensor import Tensor
from jitgrad.nn.modules.module import Module, _addindent, typename
from jitgrad.nn.parameter import Parameter


def _normalize_index(index: Any, size: int) -> int:
    """A list position in [0, size) for an int index. Raises IndexError when out of range."""
    index = operator.index(index)
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of range")
    return index % size


class _IndexedModules(Module):
    """What Sequential and ModuleList share: children keyed "0".."n-1", list-like access."""

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    if TYPE_CHECKING:  # each subclass indexes (and slices) in its own way
        def __getitem__(self, index: int | slice) -> Any: ...

    def _renumber(self, modules: Iterable[Module]) -> None:
        """Re-key the children "0".."n-1" in the given order (after deletions/insertions)."""
        self._modules.clear()
        for i, module in enumerate(modules):
            self._modules[str(i)] = module

    def __setitem__(self, index: int, module: Module) -> None:
        self.add_module(str(_normalize_index(index, len(self))), module)

    def __delitem__(self, index: int | slice) -> None:
        modules = list(self._modules.values())
        if isinstance(index, slice):
            del modules[index]
        else:
            del modules[_normalize_index(index, len(modules))]
        self._renumber(modules)

    def append(self, module: Module) -> _IndexedModules:
        """Add `module` at the end; returns self. Raises TypeError for a non-Module."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> _IndexedModules:
        """Append every module of an iterable; returns self."""
        if not isinstance(modules, Iterable):
            raise TypeError(f"{self._get_name()}.extend should be called with an iterable, "
                            f"but got {type(modules).__name__}")
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert `module` before position `index` (negative counts from the end, like a list)."""
        if not isinstance(module, Module):
            raise TypeError(f"{typename(module)} is not a Module subclass")
        modules = list(self._modules.values())
        modules.insert(operator.index(index), module)
        self._renumber(modules)

    def pop(self, index: int = -1) -> Module:
        """Remove and return the module at `index`."""
        module = self[index]
        del self[index]
        return module


class Sequential(_IndexedModules):
    """Runs its modules in order, feeding each output to the next.

    `Sequential(m1, m2)` keys them "0", "1"; `Sequential(OrderedDict(name=module))` keeps
    the names. `seq[i]` is a module, `seq[i:j]` a new Sequential sharing the modules.
    """

    @overload
    def __init__(self, *args: Module) -> None: ...

    @overload
    def __init__(self, arg: OrderedDict[str, Module], /) -> None: ...

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return type(self)(OrderedDict(list(self._modules.items())[index]))
        return list(self._modules.values())[_normalize_index(index, len(self))]

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        return Sequential(*self, *other)

    def forward(self, input: Any) -> Any:
        output = input
        for module in self:
            output = module(output)
        return output


class ModuleList(_IndexedModules):
    """A list of modules, registered as children (so their parameters are the owner's).

    It has no forward: iterate over it in the owner's forward.
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return type(self)(list(self._modules.values())[index])
        return list(self._modules.values())[_normalize_index(index, len(self))]

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        self.extend(modules)
        return self

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])

    def __repr__(self) -> str:
        # runs of equal children print once: "(0-1): 2 x ReLU()", as PyTorch does
        reprs = [repr(module) for module in self]
        if not reprs:
            return self._get_name() + "()"
        runs: list[list[Any]] = []
        for i, text in enumerate(reprs):
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        lines = []
        for start, end, text in runs:
            label = f"({start}): {text}" if start == end else \
                f"({start}-{end}): {end - start + 1} x {text}"
            lines.append(_addindent(label, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules registered as children; `md["name"]` and `md.name` both work."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None
                 ) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        module = self[key]
        del self[key]
        return module

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add (name, module) pairs from a mapping or an iterable of pairs.

        Raises TypeError/ValueError for an element that is not a (name, module) pair.
        """
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value "
                            f"pairs, but got {type(modules).__name__}")
        if isinstance(modules, Mapping):
            for key, module in modules.items():
                self[key] = module
            return
        for j, pair in enumerate(modules):
            if not isinstance(pair, Iterable):
                raise TypeError(f"ModuleDict update sequence element #{j} should be Iterable; "
                                f"is {type(pair).__name__}")
            entry: tuple[Any, ...] = tuple(pair)  # any iterable, checked here
            if len(entry) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length "
                                 f"{len(entry)}; 2 is required")
            self[entry[0]] = entry[1]


_NO_DEFAULT = object()


class ParameterDict(Module):
    """An ordered dict of parameters registered on the module under their keys (strings).

    Built from a mapping (a plain dict's keys are sorted, as PyTorch does; an OrderedDict or
    ParameterDict keeps its order) or from (key, value) pairs.
    Raises TypeError for a key that is not a string; a missing key raises AttributeError
    (the lookup is `getattr`, as in PyTorch).
    """

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def _check_key(self, key: Any) -> str:
        if not isinstance(key, str):
            raise TypeError("Index given to ParameterDict cannot be used as a key as it is not a "
                            f"string (type is '{type(key).__name__}'). Open an issue on github "
                            "if you need non-string keys.")
        return key

    def __getitem__(self, key: str) -> Any:
        return getattr(self, self._check_key(key))

    def __setitem__(self, key: str, value: Any) -> None:
        self._check_key(key)
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)
        self._keys[key] = None

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._keys))

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __or__(self, other: Any) -> ParameterDict:
        merged = self.copy()
        merged.update(other)
        return merged

    def __ior__(self, other: Any) -> ParameterDict:
        self.update(other)
        return self

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same parameter objects."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def keys(self) -> Iterable[str]:
        return self._keys.keys()

    def values(self) -> Iterable[Any]:
        return [self[k] for k in self._keys]

    def items(self) -> Iterable[tuple[str, Any]]:
        return [(k, self[k]) for k in self._keys]

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def pop(self, key: str, default: Any = _NO_DEFAULT) -> Any:
        if key not in self and default is not _NO_DEFAULT:
            return default
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> tuple[str, Any]:
        """The last (key, value) pair, removed."""
        key = next(reversed(self))
        return key, self.pop(key)

    def clear(self) -> None:
        for key in list(self._keys):
            del self[key]

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> ParameterDict:
        """A new ParameterDict with every key mapped to `default`."""
        return ParameterDict((k, default) for k in keys)

    def update(self, parameters: Any) -> None:
        """Add entries from a mapping or an iterable of (key, value) pairs.

        Raises TypeError/ValueError for an element that is not a (key, value) pair.
        """
        if not isinstance(parameters, Iterable):
            raise TypeError("ParametersDict.update should be called with an iterable of "
                            f"key/value pairs, but got {type(parameters).__name__}")
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs: Iterable[Any] = list(parameters.items())
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = parameters
        for j, pair in enumerate(pairs):
            if not isinstance(pair, Iterable):
                raise TypeError(f"ParameterDict update sequence element #{j} should be "
                                f"Iterable; is {type(pair).__name__}")
            pair = tuple(pair)
            if len(pair) != 2:
                raise ValueError(f"ParameterDict update sequence element #{j} has length "
                                 f"{len(pair)}; 2 is required")
            self[pair[0]] = pair[1]

    def extra_repr(self) -> str:
        lines = []
        for key, value in self.items():
            if isinstance(value, Tensor):
                size = "x".join(str(n) for n in value.size())
                lines.append(f"  ({key}): Parameter containing: [{value.type()} of size {size}]")
            else:
                lines.append(f"  ({key}): Object of type: {type(value).__name__}")
        return "\n".join(lines)


__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterDict"]
