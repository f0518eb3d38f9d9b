"""`DistributedSampler` (torch.utils.data.distributed): each rank's share of a dataset.

torch's index order: the indices 0..n-1 (or, with `shuffle`, a permutation drawn from a
generator seeded with `seed + epoch`, so every rank draws the same one and `set_epoch`
changes it) are padded by repeating from the start to a multiple of the number of ranks
(or cut to one with `drop_last`), and rank r takes every num_replicas-th index from r.
Without shuffle the indices equal torch's; shuffled, they are a permutation of the same
form from jitgrad's generator (the permutations themselves differ from torch's).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sized

from jitgrad.distributed import get_rank, get_world_size
from jitgrad.eager.ops.random import Generator, randperm
from jitgrad.utils.data.sampler import Sampler


class DistributedSampler(Sampler[int]):
    """Indices of `dataset` for rank `rank` of `num_replicas` (default: the process group's).

    Raises ValueError for a rank outside [0, num_replicas - 1], and (torch's) ValueError
    when the defaults are needed before init_process_group.
    """

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        num_replicas = get_world_size() if num_replicas is None else num_replicas
        rank = get_rank() if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if drop_last and len(dataset) % num_replicas != 0:
            self.num_samples = math.ceil((len(dataset) - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            generator = Generator()
            generator.manual_seed(self.seed + self.epoch)
            indices = randperm(len(self.dataset), generator=generator).tolist()
        else:
            indices = list(range(len(self.dataset)))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            padding = self.total_size - len(indices)
            indices += (indices * math.ceil(padding / len(indices)))[:padding]
        assert len(indices) == self.total_size, "padded or cut to a multiple of the ranks"
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Reseed the shuffle for `epoch`: call it before each epoch's DataLoader pass."""
        self.epoch = epoch
