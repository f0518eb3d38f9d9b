"""`jitgrad.nn.parallel`: the data-parallel wrappers exist so that imports work.

jitgrad runs one process on the CPU, so wrapping a model for several devices or
processes is refused with an error that says so (see `jitgrad.distributed`).
"""

from __future__ import annotations

from typing import Any

from jitgrad.distributed import SINGLE_PROCESS
from jitgrad.nn.modules.module import Module


class DistributedDataParallel(Module):
    """Raises RuntimeError when constructed: jitgrad has no process group."""

    def __init__(self, module: Module, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"torch.nn.parallel.DistributedDataParallel: {SINGLE_PROCESS}")


class DataParallel(Module):
    """Raises RuntimeError when constructed: jitgrad has one CPU device."""

    def __init__(self, module: Module, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("torch.nn.DataParallel: jitgrad computes on one CPU device; "
                           "use the module directly")


__all__ = ["DistributedDataParallel", "DataParallel"]
