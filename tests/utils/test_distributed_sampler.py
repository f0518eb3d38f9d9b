"""DistributedSampler: torch's index order without shuffle (values printed by torch 2.13),
and the same structure with jitgrad's shuffle."""

from __future__ import annotations

import pytest

import jitgrad
from jitgrad.utils.data import DataLoader, DistributedSampler, TensorDataset
from jitgrad.utils.data.distributed import DistributedSampler as FromItsModule

TORCH_ORDER = [  # (dataset length, replicas, drop_last) -> torch's indices of every rank
    (10, 3, False, [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]),
    (10, 3, True, [[0, 3, 6], [1, 4, 7], [2, 5, 8]]),
    (2, 5, False, [[0], [1], [0], [1], [0]]),
    (7, 2, True, [[0, 2, 4], [1, 3, 5]]),
]


@pytest.mark.parametrize(("n", "replicas", "drop_last", "expected"), TORCH_ORDER)
def test_unshuffled_order_is_torchs(n, replicas, drop_last, expected):
    samplers = [DistributedSampler(range(n), num_replicas=replicas, rank=r, shuffle=False,
                                   drop_last=drop_last) for r in range(replicas)]
    assert [list(s) for s in samplers] == expected
    assert [len(s) for s in samplers] == [len(e) for e in expected]


@pytest.mark.parametrize("drop_last", [False, True])
def test_shuffle_partitions_one_permutation_per_epoch(drop_last):
    def epoch(e: int, seed: int = 0) -> list[list[int]]:
        samplers = [DistributedSampler(range(11), num_replicas=2, rank=r, seed=seed,
                                       drop_last=drop_last) for r in range(2)]
        for s in samplers:
            s.set_epoch(e)
        return [list(s) for s in samplers]

    first = epoch(0)
    assert epoch(0) == first  # every rank draws the same permutation from seed + epoch
    shares = first[0] + first[1]
    if drop_last:
        assert len(shares) == 10 and len(set(shares)) == 10
    else:  # padded with the permutation's first index
        assert len(shares) == 12 and set(shares) == set(range(11))
    assert epoch(1) != first and epoch(0, seed=1) != first


def test_rank_out_of_range_and_its_module_path():
    assert FromItsModule is DistributedSampler
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(range(4), num_replicas=2, rank=2)


def test_data_loader_takes_the_ranks_share():
    data = TensorDataset(jitgrad.arange(6.0))
    loader = DataLoader(data, batch_size=2, sampler=DistributedSampler(
        data, num_replicas=2, rank=1, shuffle=False))
    assert [b[0].tolist() for b in loader] == [[1.0, 3.0], [5.0]]
