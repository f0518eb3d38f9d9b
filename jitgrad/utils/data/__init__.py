"""`jitgrad.utils.data`: datasets, samplers, collation and DataLoader (as torch.utils.data)."""

from jitgrad.utils.data.collate import default_collate, default_convert
from jitgrad.utils.data.dataloader import DataLoader
from jitgrad.utils.data.dataset import (
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from jitgrad.utils.data.distributed import DistributedSampler
from jitgrad.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
)

__all__ = ["DataLoader", "Dataset", "IterableDataset", "TensorDataset", "Subset",
           "ConcatDataset", "random_split", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "BatchSampler", "DistributedSampler", "default_collate",
           "default_convert"]
