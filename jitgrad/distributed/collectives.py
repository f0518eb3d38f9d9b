"""Collectives on jitgrad tensors over MPI: all_reduce, broadcast, all_gather, reduce_scatter.

Each works in place on the tensors' own numpy buffers (MPI reads and writes them directly:
no staging copy), bumps the version of each tensor it writes, and with `async_op=True`
returns a `Work` whose `wait()` finishes it. Every call starts a non-blocking MPI operation
and waits on it with the group's timeout (Note [Failing ranks] in process_group.py), so
the blocking forms are `Work.wait()` too. Two calls copy, where the torch API hands over
separate tensors: `all_gather` into its list, and `reduce_scatter` out of its list.

Tensors must be contiguous, as torch's CPU backend requires. ReduceOp.AVG (torch's CPU
backend has none) is a SUM and an in-place division by the world size, for floating
tensors; bool tensors reduce with logical or (SUM, MAX) and and (MIN, PRODUCT).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jitgrad.distributed.process_group import (
    DistBackendError,
    ProcessGroup,
    ReduceOp,
    default_group,
    mpi,
)
from jitgrad.eager.tensor import Tensor

# Waiting (Work.wait): poll MPI's request in a loop (MPI makes progress only inside its
# calls); after _SPIN_TESTS polls yield the core between polls (a peer rank sharing it runs
# at once, an idle machine loses nothing), and after _YIELD_S of waiting (the peer is
# computing, not communicating) sleep between polls instead of burning the core.
_SPIN_TESTS = 100
_YIELD_S = 0.02
_SLEEP_S = 1e-3


class Work:
    """A collective in flight (torch's Work): `wait()` finishes it, `is_completed()` polls."""

    def __init__(self, request: Any, group: ProcessGroup, what: str,
                 finish: Callable[[], None], buffers: tuple[np.ndarray, ...]) -> None:
        self._request = request
        self._buffers: tuple[np.ndarray, ...] | None = buffers  # alive while MPI uses them
        self._group = group
        self._what = what
        self._finish: Callable[[], None] | None = finish

    def is_completed(self) -> bool:
        return self._finish is None or bool(self._request.Test())

    def wait(self, timeout: Any = None) -> bool:
        """Block until done (raises DistBackendError after the group's timeout); True."""
        if self._finish is None:
            return True
        limit = timeout or self._group.timeout
        start = time.monotonic()
        polls = 0
        while not self._request.Test():
            polls += 1
            if polls < _SPIN_TESTS:
                continue
            waited_s = time.monotonic() - start
            if waited_s > limit.total_seconds():
                raise DistBackendError(
                    f"{self._what} on rank {self._group.rank()} timed out after {limit}: "
                    "a peer rank did not join it (it may have failed or run another "
                    "collective)")
            if waited_s < _YIELD_S:
                os.sched_yield()
            else:
                time.sleep(_SLEEP_S)
        finish, self._finish = self._finish, None
        self._buffers = None
        finish()
        return True


def _buffer(tensor: Any, what: str) -> np.ndarray:
    """The tensor's own array, for MPI to read and write. Raises on a non-contiguous one."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{what}: expected a Tensor, got {type(tensor).__name__}")
    data = tensor._data
    if not data.flags.c_contiguous:
        raise ValueError(f"{what}: Tensors must be contiguous")
    return data


def _bumped(tensors: Sequence[Tensor], then: Callable[[], None] | None = None
            ) -> Callable[[], None]:
    def finish() -> None:
        if then is not None:
            then()
        for tensor in tensors:
            tensor._bump_version()
    return finish


def _run(request: Any, group: ProcessGroup, what: str, finish: Callable[[], None],
         async_op: bool, *buffers: np.ndarray) -> Work | None:
    work = Work(request, group, what, finish, buffers)
    if async_op:
        return work
    work.wait()
    return None


def mpi_op(op: ReduceOp, dtype: np.dtype) -> Any:
    """The MPI operation computing `op` on arrays of `dtype` (AVG: the SUM before dividing)."""
    MPI = mpi()
    if dtype == np.bool_:
        return MPI.LOR if op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.BOR) else \
            MPI.LXOR if op is ReduceOp.BXOR else MPI.LAND
    if op is ReduceOp.AVG and dtype.kind != "f":
        raise ValueError(f"ReduceOp.AVG needs a floating-point tensor, got {dtype}")
    return {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
            ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND,
            ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}[op]


def _averaged(data: np.ndarray, op: ReduceOp, size: int) -> Callable[[], None] | None:
    if op is not ReduceOp.AVG:
        return None
    return lambda: np.divide(data, size, out=data)


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """Replace `tensor` on every rank by the reduction of all ranks' tensors."""
    pg = default_group(group)
    data = _buffer(tensor, "all_reduce")
    request = pg.comm.Iallreduce(mpi().IN_PLACE, data, op=mpi_op(op, data.dtype))
    return _run(request, pg, "all_reduce", _bumped([tensor], _averaged(data, op, pg.size())),
                async_op, data)


def broadcast(tensor: Tensor, src: int, group: ProcessGroup | None = None,
              async_op: bool = False) -> Work | None:
    """Copy rank `src`'s tensor into every other rank's `tensor`."""
    pg = default_group(group)
    _check_rank(src, pg, "broadcast")
    data = _buffer(tensor, "broadcast")
    request = pg.comm.Ibcast(data, root=src)
    return _run(request, pg, "broadcast", _bumped([tensor] if pg.rank() != src else []),
                async_op, data)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor,
                           group: ProcessGroup | None = None,
                           async_op: bool = False) -> Work | None:
    """Fill `output_tensor` (world size times `input_tensor`'s numel, ranks in order along
    dim 0) with every rank's `input_tensor`."""
    pg = default_group(group)
    out = _buffer(output_tensor, "all_gather_into_tensor")
    data = _buffer(input_tensor, "all_gather_into_tensor")
    _check_sizes(out, data, pg.size(), "all_gather_into_tensor")
    request = pg.comm.Iallgather(data, out)
    return _run(request, pg, "all_gather_into_tensor", _bumped([output_tensor]), async_op,
                out, data)


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """Fill `tensor_list[r]` with rank r's `tensor` (one gather buffer, then one copy each)."""
    pg = default_group(group)
    data = _buffer(tensor, "all_gather")
    if len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors for a world "
                         f"size of {pg.size()}")
    outs = [_buffer(t, "all_gather") for t in tensor_list]
    if any(out.shape != data.shape or out.dtype != data.dtype for out in outs):
        raise ValueError("all_gather: every tensor of tensor_list needs the input's shape "
                         f"{tuple(data.shape)} and dtype {data.dtype}")
    gathered = np.empty((pg.size(), *data.shape), data.dtype)

    def scatter_into_list() -> None:
        for out, part in zip(outs, gathered, strict=True):
            out[...] = part

    request = pg.comm.Iallgather(data, gathered)
    return _run(request, pg, "all_gather", _bumped(tensor_list, scatter_into_list), async_op,
                data, gathered)


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM,
                          group: ProcessGroup | None = None,
                          async_op: bool = False) -> Work | None:
    """Reduce `input` (world size times `output`'s numel) over the ranks; rank r keeps the
    r-th block in `output`."""
    pg = default_group(group)
    out = _buffer(output, "reduce_scatter_tensor")
    data = _buffer(input, "reduce_scatter_tensor")
    _check_sizes(data, out, pg.size(), "reduce_scatter_tensor")
    request = pg.comm.Ireduce_scatter_block(data, out, op=mpi_op(op, data.dtype))
    return _run(request, pg, "reduce_scatter_tensor",
                _bumped([output], _averaged(out, op, pg.size())), async_op, data, out)


def reduce_scatter(output: Tensor, input_list: list[Tensor], op: ReduceOp = ReduceOp.SUM,
                   group: ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """Reduce `input_list[r]` over the ranks into rank r's `output` (the list is packed into
    one send buffer first)."""
    pg = default_group(group)
    out = _buffer(output, "reduce_scatter")
    parts = [_buffer(t, "reduce_scatter") for t in input_list]
    if len(parts) != pg.size() or any(p.shape != out.shape or p.dtype != out.dtype
                                      for p in parts):
        raise ValueError(f"reduce_scatter: input_list needs {pg.size()} tensors (the world size) "
                         f"of the output's shape {tuple(out.shape)} and dtype {out.dtype}")
    packed = np.stack(parts)
    request = pg.comm.Ireduce_scatter_block(packed, out, op=mpi_op(op, out.dtype))
    return _run(request, pg, "reduce_scatter", _bumped([output], _averaged(out, op, pg.size())),
                async_op, packed)


def barrier(group: ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """Return once every rank of the group has called barrier."""
    pg = default_group(group)
    return _run(pg.comm.Ibarrier(), pg, "barrier", lambda: None, async_op)


def _check_rank(rank: int, group: ProcessGroup, what: str) -> None:
    if not 0 <= rank < group.size():
        raise ValueError(f"{what}: rank {rank} is not in a group of {group.size()} ranks")


def _check_sizes(big: np.ndarray, small: np.ndarray, size: int, what: str) -> None:
    if big.size != small.size * size or big.dtype != small.dtype:
        raise ValueError(f"{what}: the large tensor needs world size ({size}) times the other's "
                         f"{small.size} elements and its dtype {small.dtype}, got {big.size} "
                         f"of {big.dtype}")
