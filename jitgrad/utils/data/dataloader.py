"""`DataLoader` (torch.utils.data.DataLoader): batches of samples, in order or shuffled.

Samples are loaded in the calling process: jitgrad has no worker processes, so
`num_workers` and the worker options (`timeout`, `worker_init_fn`,
`multiprocessing_context`, `prefetch_factor`, `persistent_workers`) are only checked as
PyTorch checks them, and `pin_memory` has nothing to do on the CPU. They are accepted so
that PyTorch programs which pass them run unchanged; `worker_init_fn` is never called, as
in PyTorch with num_workers=0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jitgrad.eager.ops.random import Generator
from jitgrad.utils.data.collate import default_collate, default_convert
from jitgrad.utils.data.dataset import Dataset, IterableDataset
from jitgrad.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler


class DataLoader:
    """Iterate over `dataset` in batches of `batch_size` samples, collated by `collate_fn`.

    shuffle=True visits a new random permutation each epoch (drawn from `generator`, or
    from the default generator seeded by `jitgrad.manual_seed`); drop_last drops a short
    final batch; `sampler` / `batch_sampler` replace the index order; `batch_size=None`
    yields single converted samples. `len(loader)` is the number of batches.
    Raises ValueError for conflicting options (shuffle with a sampler, batch_sampler with
    batch_size/shuffle/sampler/drop_last, samplers or shuffle with an IterableDataset) or
    invalid worker options (see _check_worker_options).
    """

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | Iterable[int] | None = None,
                 batch_sampler: Iterable[list[int]] | None = None, num_workers: int = 0,
                 collate_fn: Callable[[list[Any]], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Generator | None = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False) -> None:
        _check_worker_options(num_workers, timeout, multiprocessing_context, prefetch_factor,
                              persistent_workers)
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            _check_iterable_options(shuffle, sampler, batch_sampler)
        elif batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif shuffle and sampler is not None:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if sampler is None and not self._iterable:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle  # type: ignore[arg-type]
                       else SequentialSampler(dataset))  # type: ignore[arg-type]
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)  # type: ignore[arg-type]
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        auto_batching = batch_size is not None or batch_sampler is not None
        if collate_fn is None:
            collate_fn = default_collate if auto_batching else default_convert
        self.collate_fn = collate_fn

    def __iter__(self) -> Iterator[Any]:
        if self._iterable:
            return self._iter_stream()
        dataset, collate = self.dataset, self.collate_fn
        if self.batch_sampler is not None:
            return (collate([dataset[i] for i in indices]) for indices in self.batch_sampler)
        return (collate(dataset[i]) for i in self.sampler)  # type: ignore[union-attr]

    def _iter_stream(self) -> Iterator[Any]:
        """Batches read from an IterableDataset in its own order."""
        if self.batch_size is None:
            yield from (self.collate_fn(sample) for sample in self.dataset)  # type: ignore[attr-defined]
            return
        batch: list[Any] = []
        for sample in self.dataset:  # type: ignore[attr-defined]
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)  # type: ignore[arg-type]
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)  # type: ignore[arg-type]
        return len(self.sampler)  # type: ignore[arg-type]


def _check_worker_options(num_workers: int, timeout: float, multiprocessing_context: Any,
                          prefetch_factor: int | None, persistent_workers: bool) -> None:
    """PyTorch's checks of the worker options, with its messages (torch 2.13)."""
    if num_workers < 0:
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                         "disable multiprocessing.")
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if num_workers == 0 and multiprocessing_context is not None:
        raise ValueError("multiprocessing_context can only be used with multi-process loading "
                         "(num_workers > 0), but got num_workers=0")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                         "let num_workers > 0 to enable multiprocessing, otherwise set "
                         "prefetch_factor to None.")
    if prefetch_factor is not None and prefetch_factor < 0:
        raise ValueError("prefetch_factor option should be non-negative")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")


def _check_iterable_options(shuffle: bool | None, sampler: Any, batch_sampler: Any) -> None:
    if shuffle not in (None, False):
        raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                         f"option, but got shuffle={shuffle}")
    if sampler is not None:
        raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                         f"option, but got sampler={sampler}")
    if batch_sampler is not None:
        raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler "
                         f"option, but got batch_sampler={batch_sampler}")


__all__ = ["DataLoader"]
