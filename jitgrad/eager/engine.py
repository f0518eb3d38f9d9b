"""The autograd engine: `backward()` and `grad()` run a GraphTask over Nodes.

Follows torch/csrc/autograd/engine.cpp, single-threaded and iterative (no recursion,
so 100,000-deep chains work):
1. Root gradients are checked against their outputs (scalar rule, shapes, dtype cast).
2. `GraphTask.compute_dependencies` walks `next_edges` from the roots with an explicit
   stack and counts incoming edges per node; with `inputs=` it also marks the nodes on
   a path to a requested input (PyTorch's exec_info) and skips the rest.
3. The ReadyQueue pops the ready node with the highest `sequence_nr` (newest first, so
   backward runs close to reverse forward order; AccumulateGrad has +inf and runs as
   soon as its gradient is complete). Gradients for a node are summed in its input
   buffer before it runs.
4. Each node's outputs are validated: count, shape (a broadcast-compatible gradient is
   summed down to the input's shape: the engine, not each op, reduces broadcasting),
   dtype (cast). Saved values are released unless `retain_graph`.

Gradients travel as numpy arrays, or as Tensors when `create_graph=True` (then every
formula records history). Note [Gradient ownership]: the first gradient stored into a
leaf's `.grad` is a copy, because formulas like add return their incoming gradient to
several inputs (and the root gradient belongs to the caller) while `.grad` is later
updated in place. PyTorch avoids the copy by checking reference counts; one copy per
leaf per backward is cheap next to the ops that produced the gradient.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from jitgrad.eager import layout
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.node import AccumulateGrad, Edge, Node
from jitgrad.eager.ops._binary import as_tensor
from jitgrad.eager.tensor import Tensor, gradient_edge
from jitgrad.eager.xp import TENSOR, sum_to

WARN_CREATE_GRAPH = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "autograd.grad when creating the graph to avoid this. If you have to use this function, "
    "make sure to reset the .grad fields of your parameters to None after use to break the "
    "cycle and avoid the leak.")

_engine_lock = threading.RLock()  # reentrant: hooks and formulas may call backward()


class ReadyQueue:
    """Nodes whose dependencies are all satisfied, highest sequence_nr first.

    A binary heap of `(-sequence_nr, tiebreak, node)`; `GraphTask.execute` pushes and pops
    on `heap` directly (it is the engine's innermost loop).
    """

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, Node]] = []
        self.tiebreak = itertools.count()

    def push(self, node: Node) -> None:
        heapq.heappush(self.heap, (-node.sequence_nr, next(self.tiebreak), node))

    def pop(self) -> Node:
        return heapq.heappop(self.heap)[2]

    def __len__(self) -> int:
        return len(self.heap)


class GraphTask:
    """One backward pass: dependency counts, input buffers and what to capture.

    captures: for `autograd.grad`, maps the Edge of each requested input to its position
    in the result; the gradient flowing into that edge is captured instead of being
    accumulated into `.grad`.
    """

    def __init__(self, retain_graph: bool, create_graph: bool,
                 capture_edges: Sequence[Edge | None] | None = None,
                 accumulate_only: Sequence[Edge] | None = None) -> None:
        self.retain_graph = retain_graph
        self.create_graph = create_graph
        self.dependencies: dict[Node, int] = {}
        self.input_buffers: dict[Node, list[Any]] = {}
        self.needed: set[Node] | None = None
        self.captures: dict[tuple[Node, int], list[int]] = {}
        self.captured: list[Any] = []
        if capture_edges is not None:
            self.captured = [None] * len(capture_edges)
            for i, edge in enumerate(capture_edges):
                if edge is not None:
                    self.captures.setdefault((edge.node, edge.input_nr), []).append(i)
        self._run_targets = [e.node for e in (accumulate_only or ())]
        self._capture_targets = [e.node for e in (capture_edges or ()) if e is not None]
        self._prune = capture_edges is not None or accumulate_only is not None

    def compute_dependencies(self, roots: Sequence[Node]) -> None:
        """Count incoming edges per node reachable from the roots (iterative DFS)."""
        dependencies = self.dependencies
        seen = set(roots)
        stack = list(roots)
        while stack:
            node = stack.pop()
            for edge in node.next_edges:
                if edge is None:
                    continue
                child = edge.node
                dependencies[child] = dependencies.get(child, 0) + 1
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        if self._prune:
            self.needed = self._nodes_reaching_targets(roots, seen)

    def _nodes_reaching_targets(self, roots: Sequence[Node], reachable: set[Node]) -> set[Node]:
        """Nodes with a path to a requested input (PyTorch's exec_info), without recursion."""
        parents: dict[Node, list[Node]] = {}
        for node in reachable:
            for edge in node.next_edges:
                if edge is not None:
                    parents.setdefault(edge.node, []).append(node)
        needed: set[Node] = set()
        # a captured input's own node does not run (only its ancestors do); an
        # accumulate-only leaf's AccumulateGrad does.
        stack = [t for t in self._run_targets if t in reachable or t in roots]
        stack += [p for t in self._capture_targets for p in parents.get(t, ())]
        while stack:
            node = stack.pop()
            if node in needed:
                continue
            needed.add(node)
            stack.extend(parents.get(node, ()))
        return needed

    def execute(self, root_edges: Sequence[Edge | None], root_grads: Sequence[Any]
                ) -> list[Any]:
        """Run the pass; returns the captured gradients (for `autograd.grad`)."""
        ready = ReadyQueue()
        roots = []
        for edge, grad in zip(root_edges, root_grads, strict=True):
            if edge is None:
                continue
            self._add_to_buffer(edge.node, edge.input_nr, grad)
            roots.append(edge.node)
        self.compute_dependencies(roots)
        dependencies = self.dependencies
        buffers = self.input_buffers
        needed = self.needed
        for node in dict.fromkeys(roots):
            if dependencies.get(node, 0) == 0:
                ready.push(node)
        heap, tiebreak = ready.heap, ready.tiebreak
        push, pop = heapq.heappush, heapq.heappop
        add_to_buffer = self._add_to_buffer
        while heap:
            node = pop(heap)[2]
            grads = buffers.pop(node)
            outputs = self._run_node(node, grads, needed is None or node in needed)
            for edge, grad in zip(node.next_edges, outputs, strict=True):
                if edge is None:
                    continue
                child = edge[0]
                if grad is not None:
                    add_to_buffer(child, edge[1], grad)
                remaining = dependencies[child] - 1
                dependencies[child] = remaining
                if remaining == 0:
                    if child not in buffers:
                        buffers[child] = [None] * child.num_outputs
                    push(heap, (-child.sequence_nr, next(tiebreak), child))
        return self.captured

    def _add_to_buffer(self, node: Node, slot: int, grad: Any) -> None:
        buffer = self.input_buffers.get(node)
        if buffer is None:
            buffer = self.input_buffers[node] = [None] * node.num_outputs
        previous = buffer[slot]
        if previous is None:
            buffer[slot] = grad
        else:
            buffer[slot] = previous + grad  # out of place: `previous` may be aliased elsewhere

    def _run_node(self, node: Node, grads: list[Any], needed: bool) -> tuple[Any, ...]:
        if node.hooks is not None or self.captures or not needed:
            return self._run_node_with_hooks(node, grads, needed)
        for g in grads:
            if g is not None:
                break
        else:
            return (None,) * len(node.next_edges)
        outputs = self._validate_outputs(node, node.apply(grads, self.create_graph))
        if not self.retain_graph:
            node.release_variables()
        return outputs

    def _run_node_with_hooks(self, node: Node, grads: list[Any], needed: bool) -> tuple[Any, ...]:
        """The general path: captures (autograd.grad), pruning, and hooks in PyTorch's order."""
        captured = self.captures and any((node, slot) in self.captures
                                         for slot in range(len(grads)))
        if not (needed or captured):
            return (None,) * len(node.next_edges)
        hooks = node.hooks
        if hooks is not None:
            grads = self._run_pre_hooks(node, hooks, grads)
        if captured:
            for slot, grad in enumerate(grads):
                for index in self.captures.get((node, slot), ()):
                    self.captured[index] = grad
        if not needed or isinstance(node, AccumulateGrad) and self.captures:
            return (None,) * len(node.next_edges)
        if all(g is None for g in grads):
            return (None,) * len(node.next_edges)
        outputs = self._validate_outputs(node, node.apply(grads, self.create_graph))
        if hooks is not None and hooks.post_hooks:
            outputs = _call_post_hooks(node, hooks, outputs, grads, self.create_graph)
        if not self.retain_graph:
            node.release_variables()
        return outputs

    def _run_pre_hooks(self, node: Node, hooks: Any, grads: list[Any]) -> list[Any]:
        grads = list(grads)
        for slot, table in hooks.tensor_pre_hooks.items():
            if grads[slot] is not None:
                for hook in list(table.values()):
                    grads[slot] = _call_tensor_hook(hook, grads[slot], self.create_graph)
        for slot, store in hooks.retains_grad.items():
            if grads[slot] is not None:
                store(_as_tensor_grad(grads[slot]))
        for hook in list(hooks.pre_hooks.values()):
            result = hook(tuple(_maybe_tensor(g) for g in grads))
            if result is not None:
                grads = [_unwrap(g, self.create_graph) for g in result]
        return grads

    def _validate_outputs(self, node: Node, outputs: Any) -> tuple[Any, ...]:
        """Check count, sum broadcast gradients to each input's shape, cast dtype."""
        edges = node.next_edges
        if len(outputs) != len(edges):
            raise RuntimeError(f"function {node.name()} returned an incorrect number of "
                               f"gradients (expected {len(edges)}, got {len(outputs)})")
        metadata = node.input_metadata
        fixed: list[Any] = []
        for i, grad in enumerate(outputs):
            if grad is None or edges[i] is None:
                fixed.append(None)
                continue
            shape, np_dtype = metadata[i]
            if self.create_graph:
                fixed.append(validate_tensor_grad(node, i, grad, shape, np_dtype))
                continue
            if type(grad) is not np.ndarray:
                grad = np.asarray(grad)
            if grad.shape != shape:
                grad = sum_to(grad, shape, node, i)
            if grad.dtype != np_dtype:
                grad = grad.astype(np_dtype)
            fixed.append(grad)
        return tuple(fixed)


def validate_tensor_grad(node: Any, i: int, grad: Any, shape: tuple[int, ...],
                         np_dtype: np.dtype) -> Tensor:
    """A Tensor gradient for input `i` of `node`: summed to `shape`, cast to `np_dtype`.

    The Tensor-side twin of `_validate_outputs` (create_graph, and the compiler's
    backward graphs, which run it on fake tensors). Raises RuntimeError when the
    gradient's shape does not broadcast to `shape` (naming `node.name()`).
    """
    grad = grad if isinstance(grad, Tensor) else Tensor._make(np.asarray(grad))
    if grad._data.shape != shape:
        sum_to(np.empty(grad._data.shape, dtype=np.bool_), shape, node, i)  # shape check only
        grad = TENSOR.sum_to(grad, shape)
    if grad._data.dtype != np_dtype:
        grad = TENSOR.cast(grad, np_dtype)
    return grad


def _maybe_tensor(g: Any) -> Any:
    return None if g is None else _as_tensor_grad(g)


def _as_tensor_grad(g: Any) -> Tensor:
    return g if isinstance(g, Tensor) else Tensor._make(g)


def _unwrap(g: Any, create_graph: bool) -> Any:
    if g is None or create_graph:
        return g
    return g._data if isinstance(g, Tensor) else np.asarray(g)


def _call_tensor_hook(hook: Any, grad: Any, create_graph: bool) -> Any:
    result = hook(_as_tensor_grad(grad))
    if result is None:
        return grad
    if not isinstance(result, Tensor):
        raise TypeError(f"expected Tensor, but hook returned '{type(result).__name__}'")
    if result._data.shape != np.shape(grad._data if isinstance(grad, Tensor) else grad):
        name = getattr(hook, "__name__", repr(hook))
        raise RuntimeError(f"hook '{name}' has changed the size of value")
    return _unwrap(result, create_graph)


def _call_post_hooks(node: Node, hooks: Any, outputs: tuple[Any, ...], grads: list[Any],
                     create_graph: bool) -> tuple[Any, ...]:
    for hook in list(hooks.post_hooks.values()):
        grad_inputs = tuple(_maybe_tensor(g) for g in outputs)
        result = hook(grad_inputs, tuple(_maybe_tensor(g) for g in grads))
        if result is not None:
            outputs = tuple(_unwrap(g, create_graph) for g in result)
    return outputs


def accumulate_into_leaf(variable: Tensor, grad: Any, create_graph: bool) -> None:
    """AccumulateGrad's work: run the leaf's hooks, then store or add into `.grad`.

    See Note [Gradient ownership] for why the first gradient is copied.
    """
    if variable._hooks:
        for hook in list(variable._hooks.values()):
            grad = _call_tensor_hook(hook, grad, create_graph)
    if grad is None:
        return
    current = variable._grad
    if create_graph:
        if current is None:
            variable._grad = TENSOR.clone(grad) if grad._requires_grad else grad.detach().clone()
        else:
            variable._grad = current + grad
    elif current is None:
        variable._grad = Tensor._make(_gradient_copy(np.asarray(grad), variable._data))
    elif current._requires_grad:
        variable._grad = Tensor._make(current._data + grad)
    else:
        np.add(current._data, grad, out=current._data, casting="unsafe")
    if variable._post_acc_hooks:
        for hook in list(variable._post_acc_hooks.values()):
            hook(variable)


def accumulate_grad(node: AccumulateGrad, grad_outputs: list[Any],
                    create_graph: bool) -> tuple[()]:
    """`AccumulateGrad.apply`: accumulate_into_leaf on the node's leaf."""
    accumulate_into_leaf(node.variable, grad_outputs[0], create_graph)
    return ()


def call_node(node: Node, *grads: Any) -> tuple[Any, ...]:
    """`Node.__call__`: apply the backward formula directly (no engine: broadcast
    gradients stay unreduced)."""
    arrays = [None if g is None else as_tensor(g)._data for g in grads]
    results = node.apply(arrays, create_graph=False)
    return tuple(None if r is None else Tensor._make(np.asarray(r)) for r in results)


def _gradient_copy(grad: np.ndarray, param: np.ndarray) -> np.ndarray:
    """A copy of a leaf's first gradient laid out by PyTorch's gradient layout contract
    (AccumulateGrad): the leaf's own strides when they are non-overlapping and dense, else
    C order. `w.t()`'s gradient is then laid out as `w` and `w.grad.view(-1)` works (an
    optimizer flattening gradients relies on it)."""
    if layout.non_overlapping_and_dense(param):
        strides = layout.element_strides(param)
    else:
        strides = layout.contiguous_strides(param.shape)
    laid_out = layout.with_strides(grad, strides)
    return np.array(grad, copy=True) if laid_out is grad else laid_out


def _make_root_grads(tensors: Sequence[Tensor], grad_tensors: Sequence[Any] | None,
                     create_graph: bool) -> list[Any]:
    """Check each root and its gradient (E4/E5/E14 of research) and convert the gradient."""
    grads: list[Any] = []  # Tensors under create_graph, arrays otherwise
    given = list(grad_tensors) if grad_tensors is not None else [None] * len(tensors)
    if len(given) != len(tensors):
        raise RuntimeError(f"got {len(given)} gradients for {len(tensors)} tensors")
    for i, (t, g) in enumerate(zip(tensors, given, strict=True)):
        if not isinstance(t, Tensor):
            raise TypeError(f"backward() expects Tensors, got {type(t).__name__} at index {i}")
        if not t._requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn "
                "(was it computed under no_grad, or from tensors without requires_grad=True?)")
        if g is None:
            if t._data.size != 1:
                raise RuntimeError(
                    "grad can be implicitly created only for scalar outputs (this output has "
                    f"shape {list(t.shape)}); pass gradient= of that shape, or reduce first, "
                    "e.g. y.sum().backward()")
            array = np.ones_like(t._data)
        else:
            gt = g if isinstance(g, Tensor) else Tensor._make(np.asarray(g))
            if gt._data.shape != t._data.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {gt.shape} and "
                    f"output[{i}] has a shape of {t.shape}.")
            if create_graph:
                grads.append(gt if gt._data.dtype == t._data.dtype else gt.to(t.dtype))
                continue
            array = gt._data.astype(t._data.dtype, copy=False)
        grads.append(Tensor._make(array) if create_graph else array)
    return grads


def _run_task(task: GraphTask, roots: Sequence[Tensor], grads: list[Any]) -> list[Any]:
    edges = [gradient_edge(t) for t in roots]
    previous_mode = STATE.enabled
    with _engine_lock:
        STATE.enabled = task.create_graph
        try:
            return task.execute(edges, grads)
        finally:
            STATE.enabled = previous_mode


def _tensors(x: Tensor | Sequence[Tensor] | None) -> list[Tensor] | None:
    if x is None:
        return None
    return [x] if isinstance(x, Tensor) else list(x)


def backward(tensors: Tensor | Sequence[Tensor], grad_tensors: Any = None,
             retain_graph: bool | None = None, create_graph: bool = False,
             inputs: Tensor | Sequence[Tensor] | None = None) -> None:
    """Accumulate gradients of `tensors` into the `.grad` of leaves (`torch.autograd.backward`).

    grad_tensors: one gradient per tensor (same shape), None for scalar outputs.
    inputs: if given, only these tensors' `.grad` are accumulated.
    Raises RuntimeError for a non-scalar output without gradient, an output that does not
    require grad, or a second backward through freed saved values without retain_graph.
    """
    roots = _tensors(tensors) or []
    if isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors]
    if retain_graph is None:
        retain_graph = create_graph
    if create_graph:
        warnings.warn(WARN_CREATE_GRAPH, UserWarning, stacklevel=3)
    grads = _make_root_grads(roots, grad_tensors, create_graph)
    only = None
    input_list = _tensors(inputs)
    if input_list is not None:
        if not input_list:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        only = [_input_edge(t, i) for i, t in enumerate(input_list)]
    _run_task(GraphTask(retain_graph, create_graph, accumulate_only=only), roots, grads)


def _input_edge(t: Tensor, index: int) -> Edge:
    edge = gradient_edge(t)
    if edge is None:
        raise RuntimeError("One of the differentiated Tensors does not require grad "
                           f"(input {index}, shape {list(t.shape)})")
    return edge


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
         grad_outputs: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
         allow_unused: bool | None = None, materialize_grads: bool = False) -> tuple[Any, ...]:
    """Gradients of `outputs` with respect to `inputs`, without touching `.grad`.

    Returns a tuple with one Tensor per input (None for unused inputs when
    `allow_unused=True`, zeros when `materialize_grads=True`).
    Raises RuntimeError when an input is unused (unless allowed) or does not require grad.
    """
    roots = _tensors(outputs) or []
    input_list = _tensors(inputs) or []
    if isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    if retain_graph is None:
        retain_graph = create_graph
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    grads = _make_root_grads(roots, grad_outputs, create_graph)
    edges = [_input_edge(t, i) for i, t in enumerate(input_list)]
    task = GraphTask(retain_graph, create_graph, capture_edges=edges)
    captured = _run_task(task, roots, grads)
    results: list[Tensor | None] = []
    for i, (t, g) in enumerate(zip(input_list, captured, strict=True)):
        if g is None:
            if materialize_grads:
                results.append(Tensor._make(np.zeros_like(t._data)))
                continue
            if not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in "
                    "the graph. Set allow_unused=True if this is the desired behavior.")
            results.append(None)
        elif isinstance(g, Tensor):
            results.append(g)
        else:
            results.append(Tensor._make(np.array(g, copy=True)))
    return tuple(results)


def _tensor_backward(self: Tensor, gradient: Any = None, retain_graph: bool | None = None,
                     create_graph: bool = False, inputs: Sequence[Tensor] | None = None) -> None:
    """Accumulate d(self)/d(leaf) into every leaf's `.grad` (`jitgrad.autograd.backward`)."""
    backward([self], None if gradient is None else [gradient], retain_graph, create_graph,
             inputs=inputs)


# attached by tensor_methods.install (Note [Eager layers])
METHODS = {"backward": _tensor_backward}
NODE_METHODS = ((Node, "__call__", call_node), (AccumulateGrad, "apply", accumulate_grad))
