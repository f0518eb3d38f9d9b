"""utils.data: datasets, samplers, default_collate (PyTorch 2.13's rules), DataLoader."""

import collections

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)


def _dataset(n=10):
    return TensorDataset(jg.arange(n), jg.arange(n) * 2)


# ----- datasets -------------------------------------------------------------------------------

def test_tensor_dataset_items_and_length():
    ds = _dataset()
    x, y = ds[3]
    assert len(ds) == 10 and x.item() == 3 and y.item() == 6 and x.ndim == 0
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(jg.arange(3), jg.arange(4))


def test_subset_concat_and_base_dataset():
    ds = _dataset()
    sub = Subset(ds, [4, 1])
    assert len(sub) == 2 and sub[0][0].item() == 4 and sub[1][1].item() == 2
    both = ds + sub
    assert isinstance(both, ConcatDataset) and len(both) == 12
    assert both[10][0].item() == 4 and both[-1][0].item() == 1 and both[9][0].item() == 9
    with pytest.raises(NotImplementedError, match="should implement __getitem__"):
        Dataset()[0]


def test_random_split_fractions_counts_and_errors():
    jg.manual_seed(0)
    parts = random_split(range(10), [0.3, 0.7])
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(list(parts[0]) + list(parts[1])) == list(range(10))
    assert [len(p) for p in random_split(range(11), [0.5, 0.5])] == [6, 5]  # torch: [6, 5]
    g1, g2 = jg.Generator().manual_seed(3), jg.Generator().manual_seed(3)
    assert list(random_split(range(8), [4, 4], generator=g1)[0]) == \
        list(random_split(range(8), [4, 4], generator=g2)[0])
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of the "
                                         "input dataset!"):
        random_split(range(10), [3, 3])


# ----- samplers ------------------------------------------------------------------------------

def test_samplers():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    jg.manual_seed(0)
    perm = list(RandomSampler(range(6)))
    assert sorted(perm) == list(range(6))
    jg.manual_seed(0)
    assert list(RandomSampler(range(6))) == perm  # the default generator fixes every epoch
    draws = list(RandomSampler(range(3), replacement=True, num_samples=70))
    assert len(draws) == 70 and set(draws) <= {0, 1, 2}
    counts = np.bincount(list(RandomSampler(range(3), num_samples=7)), minlength=3)
    assert sorted(counts) == [2, 2, 3]  # two whole permutations, then one more index
    assert list(BatchSampler(range(5), 2, drop_last=False)) == [[0, 1], [2, 3], [4]]
    assert len(BatchSampler(range(5), 2, drop_last=True)) == 2
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        BatchSampler(range(5), 0, drop_last=False)


def test_sampler_subclass_names_what_it_yields_as_in_torch():
    # torch's Sampler is Generic; `Sampler[int]` raised "type 'Sampler' is not subscriptable"
    class EvenIndices(Sampler[int]):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(0, self.n, 2))

    loader = DataLoader(_dataset(6), sampler=EvenIndices(6), batch_size=2)
    assert [x.tolist() for x, _ in loader] == [[0, 2], [4]]


# ----- collate --------------------------------------------------------------------------------

def test_default_collate_rules():
    floats = default_collate([1.0, 2.0])
    assert floats.dtype == jg.float64 and floats.tolist() == [1.0, 2.0]
    assert default_collate([1, 2]).dtype == jg.int64
    assert default_collate([True, False]).dtype == jg.bool
    pairs = default_collate([(1, 2.0), (3, 4.0)])
    assert isinstance(pairs, list) and pairs[0].tolist() == [1, 3]
    assert pairs[1].dtype == jg.float64
    batch = default_collate([{"a": jg.ones(2), "b": 1}, {"a": jg.zeros(2), "b": 2}])
    assert batch["a"].tolist() == [[1.0, 1.0], [0.0, 0.0]] and batch["b"].tolist() == [1, 2]
    arrays = default_collate([np.ones(2, np.float32), np.zeros(2, np.float32)])
    assert arrays.dtype == jg.float32 and arrays.shape == (2, 2)
    assert default_collate([np.float64(1), np.float64(2)]).dtype == jg.float64
    assert default_collate(["a", "b"]) == ["a", "b"]
    point = collections.namedtuple("Point", "x y")
    collated = default_collate([point(1, 2.0), point(3, 4.0)])
    assert type(collated) is point and collated.x.tolist() == [1, 3]


def test_default_collate_errors():
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal "
                                           "size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors, numpy "
                                        "arrays, numbers, dicts or lists; found <class 'object'>"):
        default_collate([object(), object()])


def test_collate_keeps_autograd_history_of_samples():
    a = jg.tensor([1.0, 2.0], requires_grad=True)
    batch = default_collate([a, a * 3])
    batch.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [4.0, 4.0])


# ----- DataLoader -------------------------------------------------------------------------------

def test_dataloader_batches_in_order_with_short_last_batch():
    loader = DataLoader(_dataset(), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    assert [b[0].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[2][1].tolist() == [16, 18] and batches[0][0].dtype == jg.int64
    dropped = DataLoader(_dataset(), batch_size=4, drop_last=True)
    assert len(dropped) == 2 and [len(b[0]) for b in dropped] == [4, 4]


def test_dataloader_shuffle_is_a_new_permutation_each_epoch_and_seeded():
    loader = DataLoader(_dataset(), batch_size=5, shuffle=True)
    jg.manual_seed(0)
    epoch1 = [x for batch in loader for x in batch[0].tolist()]
    epoch2 = [x for batch in loader for x in batch[0].tolist()]
    assert sorted(epoch1) == list(range(10)) and sorted(epoch2) == list(range(10))
    assert epoch1 != epoch2
    jg.manual_seed(0)
    assert [x for batch in loader for x in batch[0].tolist()] == epoch1
    gen_loader = DataLoader(_dataset(), batch_size=10, shuffle=True,
                            generator=jg.Generator().manual_seed(5))
    again = DataLoader(_dataset(), batch_size=10, shuffle=True,
                       generator=jg.Generator().manual_seed(5))
    assert next(iter(gen_loader))[0].tolist() == next(iter(again))[0].tolist()


def test_dataloader_sampler_batch_sampler_collate_fn_and_no_batching():
    ds = _dataset()
    loader = DataLoader(ds, batch_size=2, sampler=[9, 0, 5])
    assert [b[0].tolist() for b in loader] == [[9, 0], [5]]
    loader = DataLoader(ds, batch_sampler=[[1, 2], [3]])
    assert [b[0].tolist() for b in loader] == [[1, 2], [3]] and len(loader) == 2
    loader = DataLoader(ds, batch_size=3, collate_fn=lambda samples: len(samples))
    assert list(loader) == [3, 3, 3, 1]
    single = next(iter(DataLoader(ds, batch_size=None)))
    assert single[0].item() == 0 and single[0].ndim == 0
    assert DataLoader(ds, num_workers=4, pin_memory=True).batch_size == 1


def test_dataloader_over_an_iterable_dataset():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7

    loader = DataLoader(Stream(), batch_size=3)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]] and len(loader) == 3
    with pytest.raises(ValueError, match="expected unspecified shuffle option, but got "
                                         "shuffle=True"):
        DataLoader(Stream(), shuffle=True)


@pytest.mark.parametrize("kwargs, message", [
    (dict(shuffle=True, sampler=[1, 2]), "sampler option is mutually exclusive with shuffle"),
    (dict(batch_size=2, batch_sampler=[[0]]), "batch_sampler option is mutually exclusive with "
                                              "batch_size, shuffle, sampler, and drop_last"),
    (dict(num_workers=-1), "num_workers option should be non-negative"),
])
def test_dataloader_option_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataLoader(_dataset(), **kwargs)


def test_dataloader_accepts_pytorchs_worker_options():
    # common in training scripts: DataLoader(ds, num_workers=4, persistent_workers=True, ...)
    seen = []
    loader = DataLoader(_dataset(), batch_size=4, num_workers=2, persistent_workers=True,
                        prefetch_factor=4, worker_init_fn=seen.append, timeout=10,
                        multiprocessing_context="spawn")
    assert [b[0].tolist() for b in loader][0] == [0, 1, 2, 3]
    assert loader.persistent_workers and loader.prefetch_factor == 4 and loader.timeout == 10
    assert seen == []  # no worker processes, so no worker to initialise


@pytest.mark.parametrize("kwargs, message", [
    (dict(persistent_workers=True), "^persistent_workers option needs num_workers > 0$"),
    (dict(prefetch_factor=2), r"^prefetch_factor option could only be specified in "
                              r"multiprocessing\.let num_workers > 0"),
    (dict(num_workers=2, prefetch_factor=-1), "^prefetch_factor option should be non-negative$"),
    (dict(timeout=-1), "^timeout option should be non-negative$"),
    (dict(multiprocessing_context="spawn"), "^multiprocessing_context can only be used with "
                                            r"multi-process loading \(num_workers > 0\)"),
])
def test_dataloader_worker_option_errors_match_torch(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataLoader(_dataset(), **kwargs)
