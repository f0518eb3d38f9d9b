"""One rank of `python -m jitgrad.distributed.run`: torchrun's environment, then the script.

`python -m jitgrad.distributed.worker [--module | --no-python] script [args...]`, started
once per rank by an MPI starter (the launcher's mpiexec, or srun/mpiexec by hand). It
reads the rank from MPI, exports RANK, LOCAL_RANK (the rank among the processes of this
machine), WORLD_SIZE, LOCAL_WORLD_SIZE and GROUP_RANK (this machine's index) as torchrun
does, and runs the script as `python -m jitgrad.run` would (the import swap installed). A
rank whose script raises prints its traceback and aborts the MPI job, so no rank waits
forever for it (Note [Failing ranks] in process_group.py).
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence

from jitgrad._patch import patch_torch
from jitgrad.distributed.process_group import abort_job, mpi


def rank_environment() -> dict[str, str]:
    """torchrun's per-rank variables, from MPI_COMM_WORLD and its per-machine split."""
    MPI = mpi()
    world = MPI.COMM_WORLD
    local = world.Split_type(MPI.COMM_TYPE_SHARED)
    leaders = world.Split(0 if local.Get_rank() == 0 else MPI.UNDEFINED)
    node_rank = leaders.Get_rank() if leaders != MPI.COMM_NULL else 0
    node_rank = local.bcast(node_rank, root=0)
    env = {"RANK": world.Get_rank(), "WORLD_SIZE": world.Get_size(),
           "LOCAL_RANK": local.Get_rank(), "LOCAL_WORLD_SIZE": local.Get_size(),
           "GROUP_RANK": node_rank, "ROLE_RANK": world.Get_rank(),
           "ROLE_WORLD_SIZE": world.Get_size()}
    local.Free()
    if leaders != MPI.COMM_NULL:
        leaders.Free()
    return {name: str(value) for name, value in env.items()}


def run(argv: Sequence[str]) -> None:
    """Run `argv` (a script path and its arguments, after an optional mode flag)."""
    mode = argv[0] if argv and argv[0] in ("--module", "--no-python") else None
    target, *args = argv[1:] if mode else argv
    if mode == "--no-python":
        os.execvp(target, [target, *args])
    sys.argv = [target, *args]
    patch_torch()
    if mode == "--module":
        sys.path.insert(0, os.getcwd())
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.path[0] = os.path.dirname(os.path.abspath(target))
        runpy.run_path(target, run_name="__main__")


def main(argv: Sequence[str] | None = None) -> None:
    os.environ.update(rank_environment())
    try:
        run(list(sys.argv[1:] if argv is None else argv))
    except Exception as error:  # any failure of the user's script: end the whole job
        abort_job(error)


if __name__ == "__main__":
    main()
