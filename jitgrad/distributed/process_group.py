"""The default process group over MPI: `init_process_group`, ranks, reduce ops, teardown.

torch.distributed's names with MPI (through mpi4py) as the one transport: `backend="gloo"`
and `backend="mpi"` both give it, NCCL (GPUs) does not exist here. The processes come from
an MPI starter (`mpiexec`, `srun`, or `python -m jitgrad.distributed.run`, which calls
mpiexec), so MPI itself is the rendezvous: `init_method="env://"` (the default) reads
`RANK` and `WORLD_SIZE` only to check them against MPI's rank and size (a script started by
plain `mpiexec` has neither, and takes MPI's); `MASTER_ADDR`/`MASTER_PORT` are set by the
launcher for scripts that read them and are not needed to connect.

Note [Failing ranks]: a rank that raises while the others wait in a collective would hang
the job, as it does in torch. Two things prevent it: every collective waits on a
non-blocking MPI request with the group's `timeout` (then raises DistBackendError), and
`init_process_group` installs a `sys.excepthook` that prints the rank's traceback and calls
`MPI_Abort`, so the starter ends every rank and exits non-zero with that rank's error.

These are launch inputs, read when the group is made (not jitgrad switches of config.py).
"""

from __future__ import annotations

import datetime
import enum
import os
import sys
import traceback
from types import ModuleType, TracebackType
from typing import Any

NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                   "init_process_group.")
MISSING_EXTRA = ("torch.distributed in jitgrad runs over MPI through mpi4py, which is not "
                 "installed; install the extra: pip install 'jitgrad[distributed]' "
                 "(mpi4py and the mpich wheel)")
NO_NCCL = ("jitgrad computes on the CPU and has no NCCL; use backend='gloo' (or 'mpi'): both "
           "run over MPI")
DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)  # torch's default for CPU backends


class DistError(RuntimeError):
    """torch.distributed.DistError: an error of the distributed package."""


class DistBackendError(DistError):
    """torch.distributed.DistBackendError: the transport failed (here: a collective timed out)."""


class ReduceOp(enum.Enum):
    """How a collective combines the ranks' values (torch.distributed.ReduceOp)."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7

    def __repr__(self) -> str:
        return f"<RedOpType.{self.name}: {self.value}>"


class Backend(str):
    """torch.distributed.Backend: a backend name, lower-cased; GLOO and MPI run over MPI."""

    GLOO = "gloo"
    MPI = "mpi"
    NCCL = "nccl"

    def __new__(cls, name: str) -> Backend:
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, got {name!r}")
        value = name.lower()
        if value == Backend.NCCL:
            raise RuntimeError(f"torch.distributed.init_process_group: {NO_NCCL}")
        if value not in (Backend.GLOO, Backend.MPI):
            raise ValueError(f"Invalid backend: '{name}'; jitgrad has 'gloo' and 'mpi' (both MPI)")
        return str.__new__(cls, value)


def mpi() -> ModuleType:
    """mpi4py's MPI module (importing it initializes MPI). Raises RuntimeError naming the extra."""
    try:
        from mpi4py import MPI
    except ImportError as err:
        raise RuntimeError(MISSING_EXTRA) from err
    return MPI


class ProcessGroup:
    """A group of ranks with one MPI communicator (`comm`) and its collective timeout."""

    def __init__(self, comm: Any, backend: Backend, timeout: datetime.timedelta) -> None:
        self.comm = comm
        self.backend = backend
        self.timeout = timeout

    def rank(self) -> int:
        return int(self.comm.Get_rank())

    def size(self) -> int:
        return int(self.comm.Get_size())

    def __repr__(self) -> str:
        return f"ProcessGroup(backend={self.backend!r}, rank={self.rank()}, size={self.size()})"


class _World:
    """`torch.distributed.group.WORLD`: the default group once it exists, else None."""

    @property
    def WORLD(self) -> ProcessGroup | None:
        return _STATE["default"]


group = _World()
_STATE: dict[str, Any] = {"default": None, "excepthook": None}


def is_initialized() -> bool:
    """Whether `init_process_group` has run (and `destroy_process_group` has not)."""
    return _STATE["default"] is not None


def default_group(group: ProcessGroup | None = None) -> ProcessGroup:
    """`group`, or the default group. Raises ValueError (torch's) before init_process_group."""
    if group is not None:
        return group
    current = _STATE["default"]
    if current is None:
        raise ValueError(NOT_INITIALIZED)
    return current


def _launch_value(name: str, argument: int, mpi_value: int) -> int:
    """`rank`/`world_size`: the argument, else the environment variable, else MPI's; the
    first two must agree with MPI's (Raises ValueError saying how to start the ranks)."""
    variable = {"rank": "RANK", "world_size": "WORLD_SIZE"}[name]
    given = argument if argument >= 0 else int(os.environ.get(variable, mpi_value))
    origin = "the argument" if argument >= 0 else variable
    if given != mpi_value:
        raise ValueError(
            f"init_process_group: {name} {given} (from {origin}) "
            f"differs from MPI's {mpi_value}: jitgrad's ranks are MPI processes; start them with "
            "`python -m jitgrad.distributed.run --nproc-per-node N script.py` or mpiexec")
    return given


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: datetime.timedelta | None = None, world_size: int = -1,
                       rank: int = -1, group_name: str = "") -> None:
    """Join the default process group of all MPI ranks (torch.distributed.init_process_group).

    Raises RuntimeError for NCCL, for a second call, or without mpi4py (naming the extra);
    ValueError for an init_method other than env:// or a rank/world size MPI disagrees with.
    """
    chosen = Backend(backend or Backend.GLOO)
    if init_method not in (None, "env://"):
        raise ValueError(f"init_process_group: init_method {init_method!r} is not supported: "
                         "jitgrad's ranks meet through MPI; use init_method='env://' (default)")
    if is_initialized():
        raise RuntimeError("trying to initialize the default process group twice!")
    comm = mpi().COMM_WORLD
    _launch_value("rank", rank, comm.Get_rank())
    _launch_value("world_size", world_size, comm.Get_size())
    _STATE["default"] = ProcessGroup(comm.Dup(), chosen, timeout or DEFAULT_TIMEOUT)
    _STATE["excepthook"] = sys.excepthook
    sys.excepthook = _abort_on_exception


def abort_job(error: BaseException) -> None:
    """Print this rank's error with its traceback, then end every rank of the MPI job
    (Note [Failing ranks]); the starter exits non-zero."""
    comm = mpi().COMM_WORLD
    sys.stderr.write(f"[rank {comm.Get_rank()}] " + "".join(
        traceback.format_exception(type(error), error, error.__traceback__)))
    sys.stderr.flush()
    comm.Abort(1)


def _abort_on_exception(kind: type[BaseException], error: BaseException,
                        tb: TracebackType | None) -> None:
    """sys.excepthook while a group exists: an uncaught error ends the job."""
    abort_job(error.with_traceback(tb))


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Leave the default group (torch.distributed.destroy_process_group); MPI stays up, so a
    later init_process_group works. Raises ValueError before init_process_group."""
    current = default_group(group)
    assert current is _STATE["default"], "jitgrad has only the default group"
    current.comm.Free()
    _STATE["default"] = None
    sys.excepthook = _STATE["excepthook"]


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in the group (0 .. world size - 1)."""
    return default_group(group).rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """The number of ranks in the group."""
    return default_group(group).size()


def get_backend(group: ProcessGroup | None = None) -> Backend:
    """The backend name the group was made with ('gloo' or 'mpi')."""
    return default_group(group).backend


def get_default_backend_for_device(device: Any) -> str:
    """'gloo' for the CPU; jitgrad has no other device."""
    name = device if isinstance(device, str) else getattr(device, "type", str(device))
    if name.split(":")[0] != "cpu":
        raise RuntimeError(f"torch.distributed.get_default_backend_for_device: {NO_NCCL}")
    return Backend.GLOO
