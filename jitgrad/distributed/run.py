"""`python -m jitgrad.distributed.run --nproc-per-node N script.py [args...]`: torchrun's launcher.

It starts the ranks through MPI instead of torchrun's rendezvous: one `mpiexec -n
nnodes*nproc_per_node` running `python -m jitgrad.distributed.worker` per rank, which sets
torchrun's environment variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
GROUP_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID) from MPI's ranks and runs the
script with the import swap of `python -m jitgrad.run`, so a PyTorch script written for
torchrun runs unmodified. As torchrun, it sets OMP_NUM_THREADS=1 for several processes per
node unless it is set. The exit status is mpiexec's: non-zero when a rank fails, after the
failing rank's traceback (Note [Failing ranks] in process_group.py).

Across machines the same command runs under any MPI starter: `--mpiexec` replaces the
starter command (`--mpiexec "mpiexec -f hosts"` for MPICH's hostfile, `--mpiexec srun`
inside a Slurm allocation); the launcher appends `-n <ranks>` and the worker command.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Sequence


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jitgrad.distributed.run",
        description="Start a training script on several ranks through MPI (torchrun's flags).")
    parser.add_argument("--nproc-per-node", "--nproc_per_node", default="1",
                        help="ranks per machine: a number, or 'cpu'/'auto' (one per core)")
    parser.add_argument("--nnodes", type=int, default=1,
                        help="machines; the MPI starter places nproc-per-node ranks on each")
    parser.add_argument("--standalone", action="store_true",
                        help="accepted as torchrun's: MPI is the rendezvous either way")
    parser.add_argument("--master-addr", "--master_addr", default="127.0.0.1",
                        help="exported as MASTER_ADDR (MPI does not need it to connect)")
    parser.add_argument("--master-port", "--master_port", type=int, default=29500,
                        help="exported as MASTER_PORT")
    parser.add_argument("--mpiexec", default=None,
                        help="the MPI starter command (default: the mpiexec beside this "
                             "Python, else on PATH), e.g. 'mpiexec -f hosts' or 'srun'")
    parser.add_argument("-m", "--module", action="store_true",
                        help="run the script argument as a module, as `python -m`")
    parser.add_argument("--no-python", "--no_python", action="store_true",
                        help="run the script argument as a program, not through Python")
    parser.add_argument("training_script")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return parser


def nproc_per_node(value: str) -> int:
    """A count, or 'cpu'/'auto' for one rank per core. Raises ValueError for anything else."""
    if value in ("cpu", "auto"):
        return os.cpu_count() or 1
    count = int(value)
    if count < 1:
        raise ValueError(f"--nproc-per-node must be at least 1, got {count}")
    return count


def default_mpiexec() -> str:
    """mpiexec beside the running Python (where the mpich wheel puts it), else on PATH.

    Raises RuntimeError naming the `distributed` extra when there is none.
    """
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = beside if os.access(beside, os.X_OK) else shutil.which("mpiexec")
    if found is None:
        raise RuntimeError("jitgrad.distributed.run: no mpiexec found; install the extra "
                           "(pip install 'jitgrad[distributed]', which brings the mpich wheel) "
                           "or pass --mpiexec")
    return found


def command(args: argparse.Namespace) -> list[str]:
    """The starter command line: MPI starter, rank count, then the worker per rank."""
    per_node = nproc_per_node(args.nproc_per_node)
    starter = shlex.split(args.mpiexec) if args.mpiexec else [default_mpiexec()]
    placement = ["-ppn", str(per_node)] if args.mpiexec is None and args.nnodes > 1 else []
    mode = ["--module"] if args.module else ["--no-python"] if args.no_python else []
    return [*starter, "-n", str(per_node * args.nnodes), *placement, sys.executable, "-m",
            "jitgrad.distributed.worker", *mode, args.training_script,
            *args.training_script_args]


def environment(args: argparse.Namespace) -> dict[str, str]:
    """What every rank inherits: the rendezvous address and run id, and OMP_NUM_THREADS."""
    env = dict(os.environ, MASTER_ADDR=args.master_addr, MASTER_PORT=str(args.master_port),
               TORCHELASTIC_RUN_ID=os.environ.get("TORCHELASTIC_RUN_ID", uuid.uuid4().hex))
    if nproc_per_node(args.nproc_per_node) > 1 and "OMP_NUM_THREADS" not in os.environ:
        print("jitgrad.distributed.run: setting OMP_NUM_THREADS=1 for each rank (as torchrun "
              "does) so the ranks do not oversubscribe the cores; set it to tune",
              file=sys.stderr)
        env["OMP_NUM_THREADS"] = "1"
    return env


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status of the MPI starter."""
    args = _parser().parse_args(argv)
    try:
        cmd, env = command(args), environment(args)
    except (RuntimeError, ValueError) as err:
        print(err, file=sys.stderr)
        return 2
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
