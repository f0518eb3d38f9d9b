"""Two MPI ranks on this machine: collectives against numpy, DDP against one process.

One launch of two_ranks.py (through `python -m jitgrad.distributed.run`) runs every check
and saves each rank's results; the tests below read them. Two more launches check that a
failing rank ends the job with its error instead of hanging.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jitgrad
from jitgrad.distributed.run import default_mpiexec
from tests.distributed import training
from tests.distributed.two_ranks import TwoHeads, rank_input

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                              os.environ.get("PYTHONPATH")])))
TIMEOUT_S = 240


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict[str, np.ndarray]]:
    out = tmp_path_factory.mktemp("two_ranks")
    done = subprocess.run([sys.executable, "-m", "jitgrad.distributed.run", "--nproc-per-node",
                           "2", str(HERE / "two_ranks.py"), str(out)], env=ENV,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return [dict(np.load(out / f"rank{r}.npz")) for r in range(2)]


def test_launcher_gives_torchruns_environment_and_the_import_swap(ranks):
    for rank, result in enumerate(ranks):
        assert result["torch_view"].tolist() == [rank, 2]
        assert result["environment"].tolist() == [rank, rank, 2, 2, 0]


def inputs(dtype) -> list[np.ndarray]:
    return [rank_input(r, dtype).numpy() for r in range(2)]


REDUCTIONS = {"SUM": lambda a: a.sum(0), "AVG": lambda a: a.mean(0), "MAX": lambda a: a.max(0),
              "MIN": lambda a: a.min(0), "PRODUCT": lambda a: a.prod(0)}


@pytest.mark.parametrize("op", REDUCTIONS)
def test_all_reduce_matches_numpy(ranks, op):
    expected = REDUCTIONS[op](np.stack(inputs(np.float64)))
    for result in ranks:
        np.testing.assert_array_equal(result[f"all_reduce_{op}"], expected)


def test_other_collectives_match_numpy(ranks):
    x32, x64 = inputs(np.float32), inputs(np.int64)
    expected = {
        "all_reduce_MAX_int64": np.maximum(*x64),
        "all_reduce_SUM_bool": (x64[0] > 0) | (x64[1] > 0),
        "all_reduce_MIN_bool": (x64[0] > 0) & (x64[1] > 0),
        "all_reduce_async": x32[0] + x32[1],
        "all_reduce_async_MAX": np.maximum(*x32) * 2,
        "broadcast_from_1": x32[1],
        "all_gather": np.stack(x32),
        "all_gather_into_tensor": np.concatenate(x32),
    }
    for rank, result in enumerate(ranks):
        for name, value in expected.items():
            np.testing.assert_array_equal(result[name], value, err_msg=name)
            assert result[name].dtype == value.dtype, name
        np.testing.assert_array_equal(result["reduce_scatter"], (x32[0] + x32[1]) * (rank + 1))
        assert result["sampler"].tolist() == [[0, 2, 4], [1, 3, 0]][rank]  # torch's order
        np.testing.assert_array_equal(result["reduce_scatter_tensor_MAX"],
                                      np.maximum(*x32).reshape(2, 1, 3)[rank])


@pytest.mark.parametrize("form", ["eager", "compiled_step", "compiled_model", "compiled_ddp"])
def test_ddp_on_shards_equals_one_process_on_the_batch(ranks, form):
    """5 SGD steps, each rank on half of each batch, from different initial weights on
    each rank: DDP broadcasts rank 0's and averages the gradients, so the result is one
    process's training on whole batches, and the ranks agree."""
    reference = training.train(training.make_model(0), training.step)
    for name, value in reference.items():
        for result in ranks:
            np.testing.assert_allclose(result[f"{form}/{name}"], value, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(ranks[0][f"{form}/{name}"], ranks[1][f"{form}/{name}"])


def test_no_sync_accumulates_locally_then_averages_the_sum(ranks):
    model = training.make_model(0)
    x, y = training.batches()[0]
    for micro in range(4):  # the 2-row micro-batches of both ranks
        rows = slice(2 * micro, 2 * micro + 2)
        (jitgrad.nn.functional.cross_entropy(model(x[rows]), y[rows]) / 2).backward()
    for name, p in model.named_parameters():
        for result in ranks:
            np.testing.assert_allclose(result[f"no_sync/{name}"], p.grad.numpy(), atol=1e-6)
    local = [result["no_sync/local"] for result in ranks]
    assert np.abs(local[0] - local[1]).max() > 1e-3  # inside no_sync nothing was averaged


def test_find_unused_parameters_averages_what_some_rank_used(ranks):
    grads = {}
    for rank in range(2):
        jitgrad.manual_seed(0)
        model = TwoHeads()
        model(rank_input(rank, np.float32), use_b=rank == 1).sum().backward()
        grads[rank] = {n: None if p.grad is None else p.grad.numpy()
                       for n, p in model.named_parameters()}
    for result in ranks:
        for head in "ab":
            for kind in ("weight", "bias"):
                name = f"{head}.{kind}"
                local = [grads[r][name] if grads[r][name] is not None else 0 for r in range(2)]
                np.testing.assert_allclose(result[f"unused/{name}"], (local[0] + local[1]) / 2)
        assert np.isnan(result["unused/c.weight"]).all()  # used by no rank: .grad stays None
        # b was used only inside no_sync, on rank 1: still averaged at the next sync
        np.testing.assert_allclose(result["unused/no_sync_b.weight"], grads[1]["b.weight"] / 2)
        assert "Expected to have finished reduction in the prior iteration" in str(
            result["unused/strict_error"])
        assert "b.weight" in str(result["unused/strict_error"])


@pytest.mark.parametrize(("mode", "launch", "message"), [
    ("raise", "launcher", "ValueError: rank 1 cannot load its shard"),
    ("timeout", "mpiexec", "DistBackendError: all_reduce on rank 0 timed out after 0:00:01"),
])
def test_a_failing_rank_ends_the_job_with_its_error(mode, launch, message):
    script = [str(HERE / "failing_rank.py"), mode]
    command = ([sys.executable, "-m", "jitgrad.distributed.run", "--nproc-per-node", "2", *script]
               if launch == "launcher" else [default_mpiexec(), "-n", "2", sys.executable, *script])
    done = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode != 0
    assert message in done.stderr
