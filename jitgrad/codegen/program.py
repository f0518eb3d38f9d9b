"""The program of a compiled graph: its kernels and externs on raw ndarrays.

Note [Graph programs]: a compiled graph runs as one generated Python function over numpy
arrays. Its inputs are unwrapped once (`tensor_data`: a Tensor's array, a number as
is), each fusion group is one call of its kernel (`Kernel.run`: arrays in, freshly
allocated arrays out), every other op node calls its OpDef's numpy forward directly with
the node's parameters (`OpDef.forward`, what eager's `apply_op` runs), and only the
results are wrapped into Tensors (`tensor_of`). So nothing inside constructs a Tensor,
dispatches through an OpDef or records autograd history: these programs run under
no_grad, or as the forward and backward graphs of a CompiledRegion, whose one autograd
node the region records itself (Note [Joint graphs] in joint_graphs.py). A returned input or
constant is the caller's Tensor object itself, as the captured graph returns it. A
functionalized `target.copy_(source)` whose source array nothing else reads returns that
array as the copy when it already is one (`copy_reusing_source`): the write-back into
the real tensor is then the update's only copy.

The program is a Graph of array-level calls rendered by GraphModule, so it reads like
the captured graph (one line per node, the user's file:line beside it, each value freed
after its last use) and an error inside maps to the user's line (Note [Errors at the
user's line]). Three other kinds of node keep their meaning: `operator.getitem` picks
one output of a multi-output node, `set_grad_mode` switches grad mode, and a function
the user allowed in the graph (`allow_in_graph`) is called on Tensors made from the
arrays.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from jitgrad.codegen.fusion import FusionGroup
from jitgrad.eager.grad_mode import set_grad_mode
from jitgrad.eager.ops.inplace import COPY
from jitgrad.eager.ops.registry import OpDef, laid_out_forward
from jitgrad.eager.tensor import Tensor
from jitgrad.trace.ir.graph import Graph, Node, map_arg


def tensor_data(value: Any) -> Any:
    """A program input as the program computes with it: a Tensor's array, else the value."""
    return value._data if isinstance(value, Tensor) else value


def tensor_of(value: Any) -> Any:
    """A program result as the caller gets it: an array (or numpy scalar) as a Tensor."""
    if isinstance(value, (np.ndarray, np.generic)):  # a numpy scalar is held as is, as eager
        return Tensor._make(cast(np.ndarray, value))  # holds some 0-d results
    return value


class _OnTensors:
    """A user function allowed in the graph, called on Tensors made from arrays; its
    Tensor result comes back as an array."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "allowed_function")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.fn(*map_arg(args, tensor_of), **map_arg(kwargs, tensor_of))
        return tensor_data(result)


def build_program_graph(graph: Graph, groups: list[FusionGroup],
                        kernels: list[Any]) -> Graph:
    """The array-level program of `graph` (Note [Graph programs]): each group is one call
    of its kernel at its last member; members that are not materialized disappear."""
    program = Graph()
    arrays: dict[Node, Any] = {}  # node of `graph` -> the program's node of its array
    tensors: dict[Node, Node] = {}  # placeholders and constants: the caller's Tensor
    group_at = {group.nodes[-1]: (group, kernel)
                for group, kernel in zip(groups, kernels, strict=True)}
    group_of = {node: group for group in groups for node in group.nodes}
    members = set(group_of)

    def array_of(node: Node) -> Any:
        if node not in arrays:  # an input or constant, unwrapped where first read
            arrays[node] = program.call_function(tensor_data, (tensors[node],),
                                                 name=f"{node.name}_data")
        return arrays[node]

    def array_args(value: Any) -> Any:
        return map_arg(value, array_of)

    def result(node: Node) -> Node:
        if node in tensors:
            return tensors[node]
        return _copy_meta(node, program.call_function(tensor_of, (arrays[node],),
                                                      name=f"{node.name}_out"))

    for node in graph.nodes:
        if node in group_at:
            group, kernel = group_at[node]
            _emit_kernel_call(program, group, kernel, [array_of(n) for n in group.inputs],
                              arrays)
        elif node in members:
            continue
        elif node.op in ("placeholder", "get_attr"):  # the caller's Tensor, or a constant
            tensors[node] = program.node_copy(node, arrays.__getitem__)
        elif node.op == "output":
            program.output(map_arg(node.args, result))
        else:
            target, callee = _array_target(node.target)
            if node.target is COPY and _sole_reader(node, group_of):
                target, callee = copy_reusing_source, "copy_reusing_source"
            call = program.call_function(target, array_args(node.args),
                                         array_args(node.kwargs), name=node.name)
            if callee is not None:
                call.meta["callee"] = callee
            arrays[node] = _copy_meta(node, call)
    return program


def _sole_reader(copy: Node, group_of: dict[Node, FusionGroup]) -> bool:
    """Whether `copy` is the only reader of its source's array, a value the program
    computes (members of the source's own fusion group read it inside the kernel)."""
    source = copy.args[1]
    if not (isinstance(source, Node) and source.op == "call_function"):
        return False
    group = group_of.get(source)
    return all(user is copy or (group is not None and group_of.get(user) is group)
               for user in source.users)


def copy_reusing_source(target: np.ndarray, source: Any) -> np.ndarray:
    """The functional copy of `source` over `target` (a functionalized `target.copy_(
    source)`, Note [Functionalized in-place ops] in functionalize.py), for a source nothing else
    reads: the source array itself when it owns its memory and already is the copy (the
    target's shape, dtype and strides), else a fresh copy as the op's forward makes. An
    optimizer step's new parameter and moments so skip one pass over memory each."""
    if isinstance(source, np.ndarray) and source.base is None \
            and source.shape == target.shape and source.dtype == target.dtype \
            and source.strides == target.strides:
        return source
    return cast(np.ndarray, COPY.forward(target, source))


def _array_target(target: Any) -> tuple[Callable[..., Any], str | None]:
    """What the program calls for a node's target, and the name it calls it by: an op's
    forward with eager's result layout (numpy's may differ: a square einsum of transposed
    operands, a cumsum of a transposed one; the check costs nothing when all is
    C-contiguous)."""
    if isinstance(target, OpDef):
        return laid_out_forward(target), target.name
    if target is operator.getitem or target is set_grad_mode:
        return target, None
    return _OnTensors(target), None


def _emit_kernel_call(program: Graph, group: FusionGroup, kernel: Any, inputs: list[Any],
                      arrays: dict[Node, Any]) -> None:
    args = tuple(inputs)
    if len(group.outputs) == 1:
        output = group.outputs[0]
        call = program.call_function(kernel.run, args, name=output.name)
        call.meta["callee"] = kernel.name
        arrays[output] = _copy_meta(output, call)
        return
    call = program.call_function(kernel.run, args, name=group.name)
    call.meta["callee"] = kernel.name
    for index, output in enumerate(group.outputs):
        arrays[output] = _copy_meta(output, program.call_function(
            operator.getitem, (call, index), name=output.name))


def _copy_meta(source: Node, copy: Node) -> Node:
    for key in ("val", "source"):
        if key in source.meta:
            copy.meta[key] = source.meta[key]
    return copy
