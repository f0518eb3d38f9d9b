"""`jitgrad.utils`: `jitgrad.utils.data` (Dataset, DataLoader, TensorDataset)."""

from jitgrad.utils import data  # noqa: F401
