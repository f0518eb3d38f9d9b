"""Autograd graph objects: `Node` (a Tensor's grad_fn), `Edge`, `AccumulateGrad`.

Names and shapes follow PyTorch's engine (torch/csrc/autograd/function.h): a Node has
`next_edges`, one `Edge(node, input_nr)` per differentiable input of the op that made
it (None where an input needs no gradient); `sequence_nr` orders execution; leaves end
in one `AccumulateGrad` node each, created lazily and held weakly by the leaf, so a
graph is freed by reference counting alone (research/eager_autograd.md §0.1).

Saved values follow PyTorch's SavedVariable: an op saves its *input Tensors* (so
`create_graph=True` can differentiate through them) and its *output array* (never the
output Tensor, which would make a reference cycle), each with the version it had at
save time; unpacking checks versions (the "modified by an inplace operation" error) and
raises once the values were freed by a backward without `retain_graph`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from jitgrad.eager.tensor import Tensor

_sequence_nr = itertools.count()

ERR_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.")


class Edge(NamedTuple):
    """Where a gradient goes: input slot `input_nr` of `node`."""

    node: Node
    input_nr: int


def new_edge(node: Node, input_nr: int) -> Edge:
    """`Edge(node, input_nr)` without namedtuple's Python-level __new__ (hot path)."""
    return _tuple_new(Edge, (node, input_nr))


_tuple_new = tuple.__new__


class VersionCounter:
    """Counts in-place writes to one storage; shared by a base, its views and detach()es.

    follows: (counter, version, tensor) once a compiled graph has written this counter's
    tensor back into a caller's `tensor` (a mutated input's final value, which eager saved
    as that tensor itself): a write to it after `version` counts as a write to this one,
    so a backward that saved the value raises eager's error, naming that tensor.
    """

    __slots__ = ("value", "follows")

    def __init__(self) -> None:
        self.value = 0
        self.follows: tuple[VersionCounter, int, Any] | None = None

    def changed_since(self, version: int) -> bool:
        """Whether a write happened after this counter read `version` (or after the
        write-back it follows)."""
        follows = self.follows
        return self.value != version or follows is not None and follows[0].value != follows[1]

    def written_follower(self) -> tuple[VersionCounter, int, Any] | None:
        """`follows` when the tensor it follows was written since the write-back."""
        follows = self.follows
        return follows if follows is not None and follows[0].value != follows[1] else None


class NodeHooks:
    """Hooks attached to a Node, in PyTorch's order of execution (function.h).

    tensor_pre_hooks[output_nr]: hooks registered on the output tensor (`register_hook`);
    retains_grad[output_nr]: weakref-free setter storing `.grad` of a non-leaf;
    pre_hooks: `fn(grad_outputs)`; post_hooks: `fn(grad_inputs, grad_outputs)`.
    """

    __slots__ = ("tensor_pre_hooks", "retains_grad", "pre_hooks", "post_hooks")

    def __init__(self) -> None:
        self.tensor_pre_hooks: dict[int, dict[int, Callable]] = {}
        self.retains_grad: dict[int, Callable] = {}
        self.pre_hooks: dict[int, Callable] = {}
        self.post_hooks: dict[int, Callable] = {}


_hook_ids = itertools.count()


class RemovableHandle:
    """Returned by every `register_*hook`; `remove()` unregisters the hook."""

    def __init__(self, table: dict[int, Callable], key: int) -> None:
        self._table = table
        self.id = key

    def remove(self) -> None:
        self._table.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def add_hook(table: dict[int, Callable], fn: Callable) -> RemovableHandle:
    key = next(_hook_ids)
    table[key] = fn
    return RemovableHandle(table, key)


class Node:
    """A step of the backward graph: maps gradients of an op's outputs to its inputs.

    Subclasses implement `apply(grad_outputs, create_graph)`; `grad_outputs` holds one
    entry per forward output (numpy arrays, or Tensors when `create_graph=True`; None
    where no gradient arrived) and the result holds one entry per `next_edges` slot.
    `node(*grads)` applies it to Tensors directly (`engine.call_node`, attached by
    tensor_methods: it makes Tensors, a layer above this one).
    """

    __slots__ = ("next_edges", "sequence_nr", "input_metadata", "hooks", "_metadata",
                 "__weakref__")
    next_edges: tuple[Edge | None, ...]  # one per forward input (None: needs no gradient)
    input_metadata: tuple[Any, ...]  # (shape, dtype) per forward input
    sequence_nr: float  # creation order; math.inf for leaves
    __call__: Callable[..., tuple[Any, ...]]  # engine.call_node

    num_outputs = 1

    def __init__(self) -> None:
        self.sequence_nr = next(_sequence_nr)
        self.hooks: NodeHooks | None = None
        self._metadata: dict[str, Any] | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        """A dict for the user's annotations (as `torch.autograd.graph.Node.metadata`)."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def name(self) -> str:
        """The node's name, e.g. `MulBackward`."""
        return type(self).__name__

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        """PyTorch's view of `next_edges`: `(node or None, input_nr)` per input."""
        return tuple((None, 0) if e is None else (e.node, e.input_nr) for e in self.next_edges)

    def apply(self, grad_outputs: list[Any], create_graph: bool) -> tuple[Any, ...]:
        raise NotImplementedError(f"{type(self).__name__} does not define apply()")

    def release_variables(self) -> None:
        """Free saved values after a backward without retain_graph (no-op by default)."""

    def _hooks(self) -> NodeHooks:
        if self.hooks is None:
            self.hooks = NodeHooks()
        return self.hooks

    def register_hook(self, fn: Callable) -> RemovableHandle:
        """Run `fn(grad_inputs, grad_outputs)` after this node; a tuple return replaces them."""
        return add_hook(self._hooks().post_hooks, fn)

    def register_prehook(self, fn: Callable) -> RemovableHandle:
        """Run `fn(grad_outputs)` before this node; a tuple return replaces grad_outputs."""
        return add_hook(self._hooks().pre_hooks, fn)

    def __repr__(self) -> str:
        return f"<{self.name()}>"


def tensor_type_name(t: Tensor) -> str:
    """PyTorch's legacy type name used in error messages, e.g. `jitgrad.FloatTensor`."""
    names = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
             "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}
    return f"jitgrad.{names.get(t.dtype.name, t.dtype.name)}Tensor"


class SavedValues:
    """The values a backward formula reads, with the versions they had when saved.

    values: Tensors (saved inputs), numpy arrays (the saved output) or plain Python
    values (scalars, None; never checked). counters[i] is the VersionCounter to compare
    with versions[i], or None for a saved Tensor, whose own `_version` is compared (a
    tensor, its views and detach()es share one counter, so that sees every write).
    """

    __slots__ = ("values", "counters", "versions")

    def __init__(self, values: Sequence[Any], counters: Sequence[Any],
                 versions: Sequence[int]) -> None:
        self.values = values
        self.counters = counters
        self.versions = versions

    def check(self, node: Node, output: Callable[[int], Tensor],
              read: Sequence[bool] | None = None) -> None:
        """Raise eager's "modified by an inplace operation" error for a saved value whose
        version changed; `read`: per value, whether this backward reads it (a compiled
        region's backward for some outputs reads only some, as eager runs only the nodes
        a gradient reaches)."""
        for i, counter in enumerate(self.counters):
            if read is not None and not read[i]:
                continue
            if counter is None:
                counter = getattr(self.values[i], "_vc", None)
            if counter is not None and counter.changed_since(self.versions[i]):
                self._raise_modified(node, i, output)

    def _raise_modified(self, node: Node, i: int, output: Callable[[int], Tensor]) -> None:
        value = self.values[i]
        # a value whose counter changed is a saved Tensor or the saved output's array (a
        # numpy scalar for some 0-d results); Tensor is a layer above (Note [Eager layers])
        saved_tensor = not isinstance(value, (np.ndarray, np.generic))
        t = value if saved_tensor else output(0)
        version, expected = t._version, self.versions[i]
        follows = (self.counters[i] or t._version_counter()).written_follower()
        if follows is not None:  # eager saved the caller's tensor (VersionCounter.follows)
            t, version, expected = follows[2], follows[0].value, follows[1]
        grad_fn = t.grad_fn
        while grad_fn is not None and grad_fn.name() == "WithHistoryBackward":
            # a compiled graph's stand-in for a tensor written unseen by autograd: the
            # error names that tensor, as eager's does (jitgrad/eager/ops/shape.py)
            grad_fn = grad_fn.next_functions[0][0]
            if type(grad_fn).__name__ == "AccumulateGrad":
                grad_fn = None
        where = "a leaf Tensor" if grad_fn is None else \
            f"output 0 of {forward_name(grad_fn.name())}"
        if not saved_tensor and follows is None:
            where = f"output 0 of {forward_name(node.name())}"
        raise modified_error(t, where, version, expected)


def modified_error(t: Tensor, where: str, version: int, expected: int) -> RuntimeError:
    """Eager's error for a saved tensor `t` (described by `where`) written in place after
    it was saved; compiled backward graphs raise the same one."""
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [{tensor_type_name(t)} {list(t.shape)}], which is {where}, "
        f"is at version {version}; expected version {expected} instead. Hint: the "
        "operation that last wrote it in place ran after the forward op; clone() the "
        "tensor before modifying it, or modify it out of place.")


def forward_name(node_name: str) -> str:
    """The forward op of a backward node's name: `MulBackward` -> `Mul`."""
    return node_name.removesuffix("Backward")


class AccumulateGrad(Node):
    """Leaf sink: adds the incoming gradient into `variable.grad`.

    First arrival stores the gradient (copied unless the engine owns the only
    reference), later arrivals add in place so `.grad` keeps its identity; under
    `create_graph` the sum is out of place so `.grad` carries history
    (research/eager_autograd.md §1 row 2). `apply` is `engine.accumulate_grad`, attached
    by tensor_methods: it needs Tensor and the engine, layers above this one.
    """

    __slots__ = ("variable",)

    def __init__(self, variable: Tensor) -> None:
        super().__init__()
        self.sequence_nr = math.inf  # leaves run as soon as their gradient is complete
        self.variable = variable
        self.next_edges = ()
        self.input_metadata = ()
