"""Mutations of objects from outside the traced frame, replayed around the graph.

Traced code may assign a global, an attribute of an argument (`self.steps += 1`), a
tensor's `.grad`, or mutate a caller's list or dict (an optimizer's `state[p] = {...}`).
Tracing must not perform these for real (the user's
objects would change at trace time), so `SideEffects` records them in program order and
serves later reads of the same place from the record; the entry's runner replays them
right after the graph runs (and before the native instruction of a graph break), so
each happens exactly once per call, in order, with the values the graph computed.
In-place writes into input tensors are not recorded here but are functionalized
(Note [Functionalized in-place ops] in jitgrad/trace/capture/functionalize.py); the
runner applies them with `write_back` before this replay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jitgrad.trace.capture.sources import Source
from jitgrad.trace.capture.variables import ConstVar, DictVar, ListVar, ObjectVar, Var


class SideEffects:
    """The record of one trace: stores to globals and attributes, mutated containers."""

    def __init__(self) -> None:
        self._entries: list[tuple[str, Any, Any, Var | None]] = []
        self._stores: dict[tuple[int, str | int], Var] = {}  # (owner, attr or key id)

    def store_global(self, globals_dict: dict[str, Any], name: str, source: Source,
                     value: Var) -> None:
        self._stores[(id(globals_dict), name)] = value
        self._entries.append(("assign", source, None, value))

    def load_global(self, globals_dict: dict[str, Any], name: str) -> Var | None:
        return self._stores.get((id(globals_dict), name))

    def store_attr(self, obj: ObjectVar, name: str, value: Var) -> None:
        self._stores[(id(obj.value), name)] = value
        self._entries.append(("setattr", obj.source, name, value))

    def load_attr(self, obj: ObjectVar, name: str) -> Var | None:
        return self._stores.get((id(obj.value), name))

    def store_tensor_attr(self, tensor: Any, source: Source, name: str, value: Var) -> None:
        """`t.grad = value` on a graph input `t` (read back by later loads of the trace)."""
        self._stores[(id(tensor), name)] = value
        self._entries.append(("setattr", source, name, value))

    def load_tensor_attr(self, tensor: Any, name: str) -> Var | None:
        return self._stores.get((id(tensor), name))

    def store_item(self, mapping: dict, key: Any, source: Source, value: Var) -> None:
        """`mapping[key] = value` on a caller's mapping (a new optimizer state entry);
        `source` is the item's ItemSource (whose key may itself be a source)."""
        self._stores[(id(mapping), id(key))] = value
        self._entries.append(("assign", source, None, value))

    def load_item(self, mapping: dict, key: Any) -> Var | None:
        return self._stores.get((id(mapping), id(key)))

    def set_grad_mode(self, source: Source, enabled: bool) -> None:
        """The traced frame leaves grad mode switched (`set_grad_enabled(b)` called without
        `with`): replayed as `<grad state>.enabled = b`."""
        self._entries.append(("assign", source, None, ConstVar(enabled)))

    def mutated(self, container: ListVar | DictVar) -> None:
        """A caller's list or dict was changed in the trace (its Var holds the new items)."""
        self._entries.append(("contents", container.source, container, None))

    def values(self) -> list[Var]:
        """Every Var the replay reads (their tensors must be graph outputs)."""
        found: list[Var] = []
        for kind, _, target, value in self._entries:
            if kind == "contents":
                items = target.items.values() if isinstance(target, DictVar) else target.items
                found.extend(items)
            elif value is not None:
                found.append(value)
        return found

    def statements(self, expr: Callable[[Var], str], reconstruct: Callable[[Source], str]
                   ) -> list[str]:
        """Python statements replaying the record, in program order."""
        lines = []
        for kind, source, target, value in self._entries:
            place = reconstruct(source)
            if kind != "contents":
                assert value is not None, "a store records its value"
                attr = f".{target}" if kind == "setattr" else ""
                lines.append(f"{place}{attr} = {expr(value)}")
            elif isinstance(target, DictVar):
                items = ", ".join(f"{k!r}: {expr(v)}" for k, v in target.items.items())
                lines += [f"{place}.clear()", f"{place}.update({{{items}}})"]
            else:
                lines.append(f"{place}[:] = [{', '.join(expr(v) for v in target.items)}]")
        return lines

    def __bool__(self) -> bool:
        return bool(self._entries)


def write_back(target: Any, value: Any, writes: int) -> None:
    """Copy a graph's final value of a mutated input into the real tensor's storage and
    advance its version counter by the trace's in-place writes (Note [Functionalized
    in-place ops] in jitgrad/trace/capture/fake.py). A backward that saved the value saved, in
    eager, the real tensor: the value's counter follows the real tensor's from now on, so
    a later write to it raises "modified by an inplace operation" there too."""
    if value is not target:
        if type(target._data) is np.ndarray:
            target._data[...] = value._data
        else:  # a numpy scalar (some 0-d op results): immutable, so nothing shares it
            target._data = np.array(value._data, dtype=target._data.dtype)
    counter = target._version_counter()
    counter.value += writes
    if value is not target:
        value._version_counter().follows = (counter, counter.value, target)
