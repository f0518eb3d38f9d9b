"""`jitgrad.distributed`: torch.distributed's process group and collectives, over MPI.

Ranks are MPI processes, started by `python -m jitgrad.distributed.run --nproc-per-node N
script.py` (torchrun's flags; it calls mpiexec), or by mpiexec / srun directly. The
transport is mpi4py, an optional extra (`pip install 'jitgrad[distributed]'`): without it
this package still imports, `is_available()` is False, and a collective or
`init_process_group` raises RuntimeError naming the extra.

What exists: `init_process_group` (backends 'gloo' and 'mpi', both MPI; env://),
`destroy_process_group`, `is_initialized`, `get_rank`, `get_world_size`, `get_backend`,
`barrier`, `all_reduce` (ReduceOp SUM/AVG/PRODUCT/MIN/MAX/BAND/BOR/BXOR), `broadcast`,
`all_gather`, `all_gather_into_tensor`, `reduce_scatter`, `reduce_scatter_tensor`,
`async_op=True` handles; `jitgrad.nn.parallel.DistributedDataParallel` and
`jitgrad.utils.data.distributed.DistributedSampler` build on them. What does not: NCCL
(no GPUs), subgroups (`new_group`), point-to-point send/recv, FSDP, RPC.
"""

from __future__ import annotations

import importlib.util
import os

from jitgrad.distributed.collectives import (
    Work,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    barrier,
    broadcast,
    reduce_scatter,
    reduce_scatter_tensor,
)
from jitgrad.distributed.process_group import (
    Backend,
    DistBackendError,
    DistError,
    ProcessGroup,
    ReduceOp,
    destroy_process_group,
    get_backend,
    get_default_backend_for_device,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_initialized,
)


def is_available() -> bool:
    """True when the MPI transport (mpi4py, the `distributed` extra) is installed."""
    return importlib.util.find_spec("mpi4py") is not None


def is_mpi_available() -> bool:
    """The 'mpi' backend: MPI through mpi4py."""
    return is_available()


def is_gloo_available() -> bool:
    """The 'gloo' backend name, which runs over MPI too."""
    return is_available()


def is_nccl_available() -> bool:
    """False: jitgrad computes on the CPU."""
    return False


def is_torchelastic_launched() -> bool:
    """Whether the ranks were started by `python -m jitgrad.distributed.run` (torchrun's)."""
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


__all__ = [
    "Backend", "DistBackendError", "DistError", "ProcessGroup", "ReduceOp", "Work",
    "all_gather", "all_gather_into_tensor", "all_reduce", "barrier", "broadcast",
    "destroy_process_group", "get_backend", "get_default_backend_for_device", "get_rank",
    "get_world_size", "group", "init_process_group", "is_available", "is_gloo_available",
    "is_initialized", "is_mpi_available", "is_nccl_available", "is_torchelastic_launched",
    "reduce_scatter", "reduce_scatter_tensor",
]
