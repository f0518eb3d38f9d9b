"""`jitgrad.nn.parallel`: data parallelism across processes (`DistributedDataParallel`).

`DistributedDataParallel` (in `distributed.py`) keeps one replica per MPI rank and averages
gradients over `jitgrad.distributed`. `DataParallel` (one process driving several devices)
is refused: jitgrad has one CPU device per process.
"""

from __future__ import annotations

from typing import Any

from jitgrad.nn.modules.module import Module
from jitgrad.nn.parallel.distributed import DistributedDataParallel


class DataParallel(Module):
    """Raises RuntimeError when constructed: jitgrad has one CPU device."""

    def __init__(self, module: Module, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("torch.nn.DataParallel: jitgrad computes on one CPU device; "
                           "use the module directly, or DistributedDataParallel across processes")


__all__ = ["DistributedDataParallel", "DataParallel"]
