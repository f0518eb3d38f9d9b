"""`DistributedDataParallel`: one model replica per rank, gradients averaged during backward.

As torch's DDP: at wrap time rank 0's parameters and buffers are broadcast to every rank;
the parameters are split into buckets (reverse registration order, roughly the order
backward produces their gradients; the first bucket 1 MiB, the others `bucket_cap_mb`),
and a post-accumulate-grad hook on each parameter marks it ready. When a bucket is
complete and every bucket before it has been launched, its gradients are packed into one
flat buffer, divided by the world size and all-reduced with a non-blocking MPI call, while
backward goes on with the remaining layers. When the last bucket has been launched the
reducer waits for all of them and writes the averages back into each `.grad`.

Note [Reducer rounds]: a forward that needs gradients (grad mode on, outside `no_sync()`)
arms the reducer for the backward that follows; a backward after a forward inside
`no_sync()` only accumulates `.grad` locally (and records which parameters it used), and
the next synchronized backward averages the accumulated sums, as torch does. Buckets are
launched strictly in index order, so every rank issues the same collectives in the same
order whatever order its hooks fire in. With `find_unused_parameters=True` the forward
walks the autograd graph from the outputs and marks the parameters it cannot reach ready
at once (contributing their `.grad` so far, zeros if None); a parameter that
no rank used keeps its `.grad` untouched (torch's "globally unused" rule), found by an
all-reduce of the per-rank use flags. Without it, a parameter that got no gradient leaves
its bucket unlaunched, and the next forward raises torch's "Expected to have finished
reduction in the prior iteration" error instead of training on unaveraged gradients.

Compiled code: the reducer runs in eager Python at the places where compiled code hands
back to it, never silently skipped. `jitgrad.compile(ddp_model)` traces DDP's forward and
breaks the graph at the reducer's calls (the wrapped model's forward is one graph); a
compiled training step breaks at `loss.backward()` (the tape runs eagerly, so the hooks
fire); `DistributedDataParallel(jitgrad.compile(model))` wraps the compiled model, whose
compiled backward node feeds the parameters' AccumulateGrad nodes, so the hooks fire after
it (all buckets at the end of that node: no overlap inside one compiled backward).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from jitgrad import distributed as dist
from jitgrad.distributed.process_group import default_group
from jitgrad.eager.grad_mode import STATE
from jitgrad.eager.node import AccumulateGrad
from jitgrad.eager.tensor import Tensor
from jitgrad.nn.modules.module import Module
from jitgrad.nn.parameter import Parameter

FIRST_BUCKET_BYTES = 1024 * 1024  # torch's dist._DEFAULT_FIRST_BUCKET_BYTES
UNFINISHED_REDUCTION = (
    "Expected to have finished reduction in the prior iteration before starting a new one. "
    "This error indicates that your module has parameters that were not used in producing "
    "loss. You can enable unused parameter detection by passing the keyword argument "
    "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`; parameters "
    "that did not receive a gradient: {names}")


class _Bucket:
    """Parameters of one dtype whose gradients travel in one flat buffer."""

    def __init__(self, params: list[Parameter]) -> None:
        self.params = params
        sizes = [p._data.size for p in params]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.buffer = np.zeros(int(self.offsets[-1]), params[0]._data.dtype)
        self.pending = len(params)
        self.work: dist.Work | None = None

    def slot(self, i: int) -> np.ndarray:
        return self.buffer[self.offsets[i]:self.offsets[i + 1]].reshape(self.params[i].shape)


def bucket_params(params: list[Parameter], cap_bytes: int) -> list[list[Parameter]]:
    """Reverse registration order, split by dtype and when a bucket passes its byte cap
    (the first bucket's cap is FIRST_BUCKET_BYTES, as torch's)."""
    buckets: list[list[Parameter]] = []
    open_by_dtype: dict[Any, list[Parameter]] = {}
    for param in reversed(params):
        current = open_by_dtype.setdefault(param._data.dtype, [])
        if not current:
            buckets.append(current)
        current.append(param)
        cap = FIRST_BUCKET_BYTES if len(buckets) == 1 else cap_bytes
        if sum(p._data.nbytes for p in current) >= cap:
            open_by_dtype[param._data.dtype] = []
    return buckets


def reachable_leaves(outputs: Any) -> set[int]:
    """ids of the leaf tensors the autograd graph of `outputs` reaches (tensors found in
    nested tuples, lists and dict values)."""
    stack = [outputs]
    nodes: list[Any] = []
    leaves: set[int] = set()
    while stack:
        value = stack.pop()
        if isinstance(value, Tensor):
            if value.grad_fn is None:
                leaves.add(id(value))
            else:
                nodes.append(value.grad_fn)
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
    seen: set[int] = set()
    while nodes:
        node = nodes.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            leaves.add(id(node.variable))
        nodes.extend(edge.node for edge in node.next_edges if edge is not None)
    return leaves


class Reducer:
    """Averages the gradients of `params` over the group's ranks (Note [Reducer rounds])."""

    def __init__(self, params: list[Parameter], names: dict[int, str],
                 group: dist.ProcessGroup, cap_bytes: int, find_unused: bool) -> None:
        self.group = group
        self.names = names
        self.find_unused = find_unused
        self.buckets = [_Bucket(ps) for ps in bucket_params(params, cap_bytes)]
        self.where = {id(p): (b, i) for b, bucket in enumerate(self.buckets)
                      for i, p in enumerate(bucket.params)}
        self.flat_index = {key: n for n, key in enumerate(self.where)}
        self.armed = False
        self.ready: set[int] = set()
        self.used = np.zeros(len(self.where), np.int32)
        self.next_bucket = 0
        self.handles = [p.register_post_accumulate_grad_hook(self._mark_ready) for p in params]

    def prepare_for_backward(self, outputs: Any) -> None:
        """Arm for the backward of `outputs`; with find_unused, mark unreachable ones ready."""
        self.armed = True
        self.ready.clear()
        self.next_bucket = 0
        for bucket in self.buckets:
            bucket.pending = len(bucket.params)
        if self.find_unused:
            reached = reachable_leaves(outputs)
            for bucket in self.buckets:
                for param in bucket.params:
                    if id(param) not in reached:
                        self._mark(param, used=False)

    def disarm(self) -> None:
        """The next backward only accumulates locally (no_sync or no grad mode)."""
        self.armed = False

    def check_finished(self) -> None:
        """Raises RuntimeError if the last armed backward left gradients unaveraged."""
        if self.armed and self.ready and self.next_bucket < len(self.buckets):
            missing = [self.names[id(p)] for b in self.buckets for p in b.params
                       if id(p) not in self.ready]
            self.armed = False
            raise RuntimeError(UNFINISHED_REDUCTION.format(names=", ".join(missing)))

    def _mark_ready(self, param: Tensor) -> None:
        if self.armed:
            self._mark(param, used=True)
        else:  # a no_sync backward: its use counts at the next synchronized one, as torch's
            self.used[self.flat_index[id(param)]] = 1

    def _mark(self, param: Tensor, used: bool) -> None:
        key = id(param)
        if key in self.ready:
            raise RuntimeError(
                f"Expected to mark a variable ready only once. Parameter {self.names[key]} "
                "received its gradient twice in one backward (a second backward without a "
                "forward through DistributedDataParallel, or a reentrant backward)")
        self.ready.add(key)
        b, i = self.where[key]
        if used:
            self.used[self.flat_index[key]] = 1
        self.buckets[b].pending -= 1
        for bucket in self.buckets[:self.next_bucket]:
            assert bucket.work is not None, "a bucket before next_bucket was launched"
            bucket.work.is_completed()  # lets MPI progress the launched buckets
        while self.next_bucket < len(self.buckets) and \
                self.buckets[self.next_bucket].pending == 0:
            self._launch(self.buckets[self.next_bucket])
            self.next_bucket += 1
        if self.next_bucket == len(self.buckets):
            self._finalize()

    def _launch(self, bucket: _Bucket) -> None:
        for i, param in enumerate(bucket.params):
            slot = bucket.slot(i)
            if param._grad is None:
                slot[...] = 0
            else:
                slot[...] = param._grad._data
        np.divide(bucket.buffer, self.group.size(), out=bucket.buffer)
        bucket.work = dist.all_reduce(Tensor._make(bucket.buffer), group=self.group,
                                      async_op=True)

    def _finalize(self) -> None:
        if self.find_unused:
            used = Tensor._make(self.used)
            dist.all_reduce(used, dist.ReduceOp.MAX, group=self.group)
        flags = iter(self.used)
        for bucket in self.buckets:
            assert bucket.work is not None, "every bucket was launched before _finalize"
            bucket.work.wait()
            for i, param in enumerate(bucket.params):
                if next(flags) or not self.find_unused:
                    _write_grad(param, bucket.slot(i))
        self.used[:] = 0
        self.armed = False


def _write_grad(param: Tensor, value: np.ndarray) -> None:
    if param._grad is None:
        param._grad = Tensor._make(value.copy())
    else:
        param._grad._data[...] = value
        param._grad._bump_version()


class DistributedDataParallel(Module):
    """Data parallelism over the ranks of a process group (torch.nn.parallel's DDP).

    `module` may be a Module or a compiled one (`jitgrad.compile(model)`); `.module` is the
    Module. Keyword arguments of torch that concern devices (`device_ids`, `output_device`)
    accept only None or the CPU. Raises ValueError (torch's) before init_process_group.
    """

    def __init__(self, module: Any, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool = True, init_sync: bool = True,
                 process_group: dist.ProcessGroup | None = None, bucket_cap_mb: float | None = None,
                 find_unused_parameters: bool = False) -> None:
        super().__init__()
        if dim != 0:
            raise NotImplementedError("DistributedDataParallel: dim other than 0 is not "
                                      "implemented (jitgrad keeps one replica per process)")
        _check_cpu(device_ids, output_device)
        self.process_group = default_group(process_group)
        self.module = getattr(module, "_orig_mod", module)
        self._compiled = None if module is self.module else module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        named = [(n, p) for n, p in self.module.named_parameters() if p.requires_grad]
        if init_sync:
            self._broadcast_from_rank0([p for _, p in named] + list(self.module.buffers()))
        self.reducer = Reducer([p for _, p in named], {id(p): n for n, p in named},
                               self.process_group, int((bucket_cap_mb or 25) * 1024 * 1024),
                               find_unused_parameters)

    def _broadcast_from_rank0(self, tensors: list[Tensor]) -> None:
        works = [dist.broadcast(t, 0, group=self.process_group, async_op=True)
                 for t in tensors]
        for work in works:
            assert work is not None, "an async_op collective returns its Work"
            work.wait()

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """The wrapped module's forward between the reducer's two steps (in compiled code,
        a graph break each: see the module docstring)."""
        self._pre_forward()
        run = self.module if self._compiled is None else self._compiled
        output = run(*inputs, **kwargs)
        self._post_forward(output)
        return output

    def _pre_forward(self) -> None:
        """Check the last round finished, then give every rank rank 0's buffers."""
        self.reducer.check_finished()
        if self.broadcast_buffers:
            self._broadcast_from_rank0(list(self.module.buffers()))

    def _post_forward(self, output: Any) -> None:
        """Arm the reducer for the backward of `output` (Note [Reducer rounds])."""
        if STATE.enabled and self.require_backward_grad_sync:
            self.reducer.prepare_for_backward(output)
        else:
            self.reducer.disarm()

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backwards of forwards run inside only accumulate `.grad` on each rank; the first
        synchronized backward after it averages the accumulated gradients."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous


def _check_cpu(device_ids: Any, output_device: Any) -> None:
    devices = list(device_ids or []) + ([] if output_device is None else [output_device])
    if any(str(d) not in ("cpu", "-1") for d in devices):
        raise ValueError(f"DistributedDataParallel: device_ids {device_ids!r} / output_device "
                         f"{output_device!r}: jitgrad computes on the CPU; pass neither")
