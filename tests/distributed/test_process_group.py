"""The process group in one process (MPI's world of size 1), the refusals, the missing extra,
and the launcher's command line; multi-rank behaviour is in test_two_ranks.py."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jitgrad
import jitgrad.distributed as dist
from jitgrad.distributed import run
from jitgrad.nn.parallel import DistributedDataParallel as DDP  # noqa: N817 - as torch docs
from tests.distributed import training

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def world():
    dist.init_process_group("gloo")
    yield
    dist.destroy_process_group()


def test_before_init_every_call_raises_torchs_value_error():
    assert not dist.is_initialized()
    for call in (dist.get_rank, dist.get_world_size, dist.barrier,
                 lambda: dist.all_reduce(jitgrad.ones(2)), lambda: DDP(jitgrad.nn.Linear(2, 2))):
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            call()


def test_group_of_one_process(world):
    assert dist.is_initialized() and dist.is_available()
    assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "gloo")
    assert dist.group.WORLD.size() == 1
    t = jitgrad.tensor([1.0, 2.0])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])
    assert dist.all_reduce(t, async_op=True).wait() is True
    with pytest.raises(RuntimeError, match="twice"):
        dist.init_process_group("gloo")


def test_collective_argument_errors(world):
    with pytest.raises(ValueError, match="Tensors must be contiguous"):
        dist.all_reduce(jitgrad.ones(3, 4).t())
    with pytest.raises(ValueError, match="ReduceOp.AVG needs a floating-point tensor"):
        dist.all_reduce(jitgrad.ones(3, dtype=jitgrad.int64), op=dist.ReduceOp.AVG)
    with pytest.raises(ValueError, match="rank 1 is not in a group of 1"):
        dist.broadcast(jitgrad.ones(2), src=1)
    with pytest.raises(ValueError, match="world size \\(1\\) times"):
        dist.all_gather_into_tensor(jitgrad.zeros(3), jitgrad.ones(2))


def test_rank_from_the_environment_must_be_mpis(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="world_size 2 \\(from WORLD_SIZE\\) differs from MPI's 1"):
        dist.init_process_group("gloo")
    assert not dist.is_initialized()


@pytest.mark.parametrize(("call", "error", "pattern"), [
    (lambda: dist.init_process_group("nccl"), RuntimeError, "no NCCL"),
    (lambda: dist.init_process_group("gloo", init_method="tcp://10.0.0.1:23456"), ValueError,
     "init_method 'tcp://10.0.0.1:23456' is not supported"),
    (lambda: dist.get_default_backend_for_device("cuda"), RuntimeError, "no NCCL"),
])
def test_what_has_no_mpi_equivalent_is_refused(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()
    assert dist.get_default_backend_for_device("cpu") == "gloo" and not dist.is_nccl_available()


def test_without_the_extra_import_works_and_collectives_name_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    assert not dist.is_available()
    with pytest.raises(RuntimeError, match=r"pip install 'jitgrad\[distributed\]'"):
        dist.init_process_group("gloo")


def test_ddp_in_one_process_trains_as_the_module_and_writes_averaged_grads(world):
    """World size 1: the reducer runs (each .grad written back once per step), and training
    equals the plain module's."""
    reference = training.train(training.make_model(0), training.step)
    model = DDP(training.make_model(0))
    assert model.module[0].weight is next(model.parameters())
    for name, value in training.train(model, training.step).items():
        np.testing.assert_array_equal(value, reference[name])
    assert model.module[0].weight.grad._version == 1


def test_compiled_ddp_breaks_the_graph_at_the_reducer(world):
    model = DDP(training.make_model(0))
    x, _ = training.batches()[0]
    report = jitgrad.explain(model)(x)
    assert report.graph_count == 1 and report.graph_break_count == 2
    assert [b.message for b in report.break_reasons] == [
        "call to jitgrad.nn.parallel.distributed.DistributedDataParallel._pre_forward, "
        "which the tracer does not know",
        "call to jitgrad.nn.parallel.distributed.DistributedDataParallel._post_forward, "
        "which the tracer does not know"]


def _args(*argv: str) -> argparse.Namespace:
    return run._parser().parse_args(list(argv))


def test_launcher_command_line():
    mpiexec = run.default_mpiexec()
    assert run.command(_args("--nproc-per-node", "2", "train.py", "--lr", "0.1")) == [
        mpiexec, "-n", "2", sys.executable, "-m", "jitgrad.distributed.worker", "train.py",
        "--lr", "0.1"]
    assert run.command(_args("--nproc_per_node=4", "--nnodes", "2", "-m", "pkg.train")) == [
        mpiexec, "-n", "8", "-ppn", "4", sys.executable, "-m", "jitgrad.distributed.worker",
        "--module", "pkg.train"]
    assert run.command(_args("--mpiexec", "srun --mpi=pmi2", "--nnodes", "2", "--standalone",
                             "t.py"))[:4] == ["srun", "--mpi=pmi2", "-n", "2"]


def test_launcher_environment(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = run.environment(_args("--nproc-per-node", "2", "--master-port", "1234", "t.py"))
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["OMP_NUM_THREADS"]) == (
        "127.0.0.1", "1234", "1")
    with pytest.raises(ValueError, match="at least 1"):
        run.nproc_per_node("0")


def test_a_collective_in_compiled_code_is_a_graph_break_and_runs(world):
    def scaled_sum(x):
        y = x * 3
        dist.all_reduce(y, op=dist.ReduceOp.MAX)
        return y + 1

    x = jitgrad.tensor([1.0, -2.0])
    np.testing.assert_array_equal(jitgrad.compile(scaled_sum)(x).numpy(), [4.0, -5.0])
    report = jitgrad.explain(scaled_sum)(x)
    assert report.graph_break_count == 1
    assert report.break_reasons[0].message == (
        "call to jitgrad.distributed.collectives.all_reduce, which the tracer does not know")


@pytest.mark.parametrize(("mode", "target", "printed"), [
    ("--module", "probe", "__main__ ['probe.py', 'x'] 0 torch\n"),
    ("--no-python", "sh", "0 0 1\n"),
])
def test_worker_modes_run_modules_and_programs_with_the_rank_environment(tmp_path, mode, target,
                                                                        printed):
    """One rank, no starter (MPI's world of one): `-m` and `--no-python` of the launcher."""
    (tmp_path / "probe.py").write_text(
        "import os, sys, torch\n"
        "print(__name__, [os.path.basename(sys.argv[0]), *sys.argv[1:]], os.environ['RANK'], "
        "torch.__name__)\n")
    args = ["x"] if mode == "--module" else ["-c", "echo $RANK $LOCAL_RANK $WORLD_SIZE"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "jitgrad.distributed.worker", mode, target,
                           *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stdout) == (0, printed), done.stderr


def test_buckets_are_launched_during_backward(world):
    """Two 1 MiB buckets (torch's first-bucket size): the last layer's is all-reduced
    while backward has yet to reach the first layer."""
    jitgrad.manual_seed(0)
    model = DDP(jitgrad.nn.Sequential(jitgrad.nn.Linear(512, 512), jitgrad.nn.Tanh(),
                                      jitgrad.nn.Linear(512, 512)))
    reducer = model.reducer
    assert [[p.shape for p in b.params] for b in reducer.buckets] == [
        [(512,), (512, 512)], [(512,), (512, 512)]]
    seen = []

    def record(grad):
        seen.append((reducer.next_bucket, reducer.buckets[0].work is not None))

    def hook_output(module, args, out) -> None:
        out.register_hook(record)

    model.module[0].register_forward_hook(hook_output)
    model(jitgrad.ones(2, 512)).sum().backward()
    assert seen == [(1, True)]  # the first layer's gradient is still to come
    assert reducer.next_bucket == 2 and not reducer.armed
