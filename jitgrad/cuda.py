"""`jitgrad.cuda`: jitgrad computes on the CPU only, so no CUDA device is ever available.

Programs written for PyTorch check `torch.cuda.is_available()` and seed CUDA
generators; these answer as PyTorch does on a machine without CUDA.
"""

from __future__ import annotations

from jitgrad import amp  # torch.cuda.amp.GradScaler (disabled without CUDA)
from jitgrad.eager.legacy_types import CUDA_TYPES
from jitgrad.refusal import refused


def is_available() -> bool:
    """False: jitgrad has no CUDA backend."""
    return False


def device_count() -> int:
    """0: no CUDA devices."""
    return 0


def manual_seed(seed: int) -> None:
    """Does nothing, as in PyTorch without CUDA (CUDA generators do not exist)."""


def manual_seed_all(seed: int) -> None:
    """Does nothing, as in PyTorch without CUDA (CUDA generators do not exist)."""


def is_bf16_supported() -> bool:
    """False: no CUDA device, so no CUDA bfloat16."""
    return False


synchronize = refused("torch.cuda.synchronize", "jitgrad runs on the CPU only: it needs a "
                      "CUDA device (jitgrad.cuda.is_available() is False)")


globals().update(CUDA_TYPES)  # torch.cuda.FloatTensor, ...: constructing one raises TypeError

__all__ = [*CUDA_TYPES, "is_available", "device_count", "manual_seed", "manual_seed_all",
           "is_bf16_supported", "synchronize", "amp"]
