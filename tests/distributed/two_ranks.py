"""Run on 2 ranks by test_two_ranks.py: every collective and DDP variant, results to files.

`python -m jitgrad.distributed.run --nproc-per-node 2 two_ranks.py OUT_DIR`: each rank
writes OUT_DIR/rank{r}.npz; the test compares them with numpy and a 1-process run.
One launch covers all checks, because each MPI start costs seconds.
"""

from __future__ import annotations

import os
import sys

import numpy as np

import jitgrad
import jitgrad.distributed as dist
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use
from jitgrad import nn
from jitgrad.nn.parallel import DistributedDataParallel as DDP  # noqa: N817 - as torch docs
from jitgrad.utils.data.distributed import DistributedSampler
from tests.distributed import training


def rank_input(rank: int, dtype) -> jitgrad.Tensor:
    """What rank r contributes: the test rebuilds it for numpy references."""
    return jitgrad.tensor((np.arange(6).reshape(2, 3) * (rank + 1) + rank - 2).astype(dtype))


def collectives(rank: int, out: dict) -> None:
    for op in ("SUM", "AVG", "MAX", "MIN", "PRODUCT"):
        t = rank_input(rank, np.float64)
        buffer = t._data
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        assert t._data is buffer and t._version == 1, "in place, version bumped"
        out[f"all_reduce_{op}"] = t.numpy()
    t = rank_input(rank, np.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    out["all_reduce_MAX_int64"] = t.numpy()
    for op in ("SUM", "MIN"):  # logical or, and
        t = rank_input(rank, np.int64) > 0
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        out[f"all_reduce_{op}_bool"] = t.numpy()
    first, second = rank_input(rank, np.float32), rank_input(rank, np.float32) * 2
    works = [dist.all_reduce(first, async_op=True),
             dist.all_reduce(second, op=dist.ReduceOp.MAX, async_op=True)]
    assert works[1].wait() and works[0].wait(), "two in flight, waited out of order"
    out["all_reduce_async"], out["all_reduce_async_MAX"] = first.numpy(), second.numpy()
    out["sampler"] = np.array(list(DistributedSampler(range(5), shuffle=False)))
    t = rank_input(rank, np.float32)
    dist.broadcast(t, src=1)
    out["broadcast_from_1"] = t.numpy()
    gathered = [jitgrad.zeros(2, 3) for _ in range(2)]
    dist.all_gather(gathered, rank_input(rank, np.float32))
    out["all_gather"] = np.stack([g.numpy() for g in gathered])
    into = jitgrad.zeros(4, 3)
    dist.all_gather_into_tensor(into, rank_input(rank, np.float32))
    out["all_gather_into_tensor"] = into.numpy()
    scattered = jitgrad.zeros(2, 3)
    dist.reduce_scatter(scattered, [rank_input(rank, np.float32) * (i + 1) for i in range(2)])
    out["reduce_scatter"] = scattered.numpy()
    block = jitgrad.zeros(1, 3)
    dist.reduce_scatter_tensor(block, rank_input(rank, np.float32), op=dist.ReduceOp.MAX)
    out["reduce_scatter_tensor_MAX"] = block.numpy()
    dist.barrier()


def ddp_variants(rank: int, out: dict) -> None:
    """5 steps of each DDP form, from rank-dependent initial weights (DDP broadcasts rank 0's)."""
    world = dist.get_world_size()
    forms = {
        "eager": (lambda: DDP(training.make_model(rank)), training.step),
        "compiled_step": (lambda: DDP(training.make_model(rank)), training.compiled_step),
        "compiled_model": (lambda: DDP(jitgrad.compile(training.make_model(rank))),
                           training.step),
        "compiled_ddp": (lambda: jitgrad.compile(DDP(training.make_model(rank))),
                         training.step),
    }
    for form, (make, step) in forms.items():
        for name, value in training.train(make(), step, rank, world).items():
            out[f"{form}/{name}"] = value


def no_sync(rank: int, out: dict) -> None:
    model = DDP(training.make_model(0))
    x, y = training.batches()[0]
    micro = [(x[rank * 4 + 2 * i:rank * 4 + 2 * i + 2], y[rank * 4 + 2 * i:rank * 4 + 2 * i + 2])
             for i in range(2)]
    with model.no_sync():
        F.cross_entropy(model(micro[0][0]), micro[0][1]).backward()
    out["no_sync/local"] = model.module[0].weight.grad.numpy().copy()
    F.cross_entropy(model(micro[1][0]), micro[1][1]).backward()
    for name, p in model.module.named_parameters():
        out[f"no_sync/{name}"] = p.grad.numpy().copy()


class TwoHeads(nn.Module):
    """Rank 0 uses head `a`, rank 1 `a` and `b`; nobody uses `c`."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(3, 2), nn.Linear(3, 2), nn.Linear(3, 2)

    def forward(self, x, use_b: bool):
        return self.a(x) + self.b(x) if use_b else self.a(x)


def unused_parameters(rank: int, out: dict) -> None:
    jitgrad.manual_seed(0)
    model = DDP(TwoHeads(), find_unused_parameters=True)
    model(rank_input(rank, np.float32), use_b=rank == 1).sum().backward()
    for name, p in model.module.named_parameters():
        out[f"unused/{name}"] = np.full(1, np.nan) if p.grad is None else p.grad.numpy().copy()
    accumulated = DDP(TwoHeads(), find_unused_parameters=True)
    with accumulated.no_sync():  # only rank 1 uses b, and only here
        accumulated(rank_input(rank, np.float32), use_b=rank == 1).sum().backward()
    accumulated(rank_input(rank, np.float32), use_b=False).sum().backward()
    out["unused/no_sync_b.weight"] = accumulated.module.b.weight.grad.numpy().copy()
    strict = DDP(TwoHeads())
    strict(rank_input(rank, np.float32), use_b=False).sum().backward()
    try:
        strict(rank_input(rank, np.float32), use_b=False)
    except RuntimeError as err:
        out["unused/strict_error"] = np.array(str(err))


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    import torch.distributed  # the launcher runs the script with jitgrad.run's import swap

    out: dict = {"torch_view": np.array([torch.distributed.get_rank(),
                                         torch.distributed.get_world_size()]),
                 "environment": np.array([int(os.environ[name]) for name in (
                     "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")])}
    collectives(rank, out)
    ddp_variants(rank, out)
    no_sync(rank, out)
    unused_parameters(rank, out)
    np.savez(f"{sys.argv[1]}/rank{rank}.npz", **out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
