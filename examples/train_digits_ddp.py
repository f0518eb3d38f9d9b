"""Train the digits MLP of train_digits.py data-parallel: one replica per process, over MPI.

    python -m jitgrad.distributed.run --nproc-per-node 2 examples/train_digits_ddp.py [--epochs 10]

Written as a PyTorch DDP script (`import jitgrad as torch`): each rank joins the process
group, reads its share of every epoch through a DistributedSampler (global batch
`--batch-size`, split evenly over the ranks), wraps the MLP in DistributedDataParallel
(rank 0's initial weights are broadcast; gradients are averaged during backward) and runs
a compiled training step. Rank 0 prints the epoch losses averaged over all ranks, the
held-out accuracy, the step time, and checks that the replicas ended with identical weights.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core per rank (set before numpy)
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

from train_digits import MLP, accuracy, load_splits  # noqa: E402  (the script's directory)

import jitgrad  # noqa: E402
import jitgrad as torch  # noqa: E402
import jitgrad.distributed as dist  # noqa: E402
import jitgrad.nn.functional as F  # noqa: E402, N812
from jitgrad.nn.parallel import DistributedDataParallel as DDP  # noqa: E402, N817
from jitgrad.utils.data import DataLoader  # noqa: E402
from jitgrad.utils.data.distributed import DistributedSampler  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64, help="global, over all ranks")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eager", action="store_true", help="do not compile the step")
    return parser.parse_args(argv)


def replicas_agree(model: torch.nn.Module) -> float:
    """The largest difference between any rank's parameters and rank 0's."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = torch.zeros(dist.get_world_size() * flat.numel())
    dist.all_gather_into_tensor(gathered, flat)
    return (gathered.reshape(dist.get_world_size(), -1) - flat).abs().max().item()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % world:
        raise ValueError(f"--batch-size {args.batch_size} must be a multiple of {world} ranks")
    train_set, held_out = load_splits(args.seed)
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size // world, sampler=sampler)
    torch.manual_seed(args.seed + rank)  # different on each rank: DDP broadcasts rank 0's
    model = DDP(MLP())
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)

    def train_step(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = train_step if args.eager else jitgrad.compile(train_step)
    step_seconds = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2)  # (sum of losses * rows, rows) on this rank
        for images, labels in loader:
            start = time.perf_counter()
            loss = step(images, labels)
            step_seconds.append(time.perf_counter() - start)
            total += torch.tensor([loss.item() * len(labels), len(labels)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch + 1:2d}  loss {(total[0] / total[1]).item():.4f}")
    difference = replicas_agree(model.module)
    if rank == 0:
        correct, count = accuracy(model.module, held_out)
        print(f"{world} ranks, global batch {args.batch_size}: held-out accuracy "
              f"{100 * correct / count:.1f}% ({correct}/{count})")
        print(f"ms per step (median, after the first): "
              f"{1e3 * statistics.median(step_seconds[1:]):.2f}")
        print(f"parameters agree across {world} ranks: max difference {difference:.3g}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
