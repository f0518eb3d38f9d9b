"""`jitgrad.cuda`: jitgrad computes on the CPU only, so no CUDA device is ever available.

Programs written for PyTorch check `torch.cuda.is_available()` and seed CUDA
generators; these answer as PyTorch does on a machine without CUDA (torch 2.13's CPU
build): memory counters are 0, a negative device index is accepted and ignored, and using a
device raises the exception class torch raises there (with jitgrad's message).
"""

from __future__ import annotations

from typing import Any

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


_NO_CUDA = "jitgrad runs on the CPU only (jitgrad.cuda.is_available() is False)"


def _index(device: Any) -> int:
    """The device index of an int, "cuda:1" or a jitgrad.device (-1 when it has none)."""
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        return int(device.split(":")[1]) if ":" in device else -1
    index = getattr(device, "index", None)
    return -1 if index is None else index


def set_device(device: Any) -> None:
    """Nothing for a negative index (as PyTorch); raises AttributeError otherwise, as
    PyTorch's CPU build does."""
    if _index(device) >= 0:
        raise AttributeError(f"torch.cuda.set_device: {_NO_CUDA}")


def current_device() -> int:
    """Raises AssertionError ("Torch not compiled with CUDA enabled"), as PyTorch without CUDA."""
    raise AssertionError(f"Torch not compiled with CUDA enabled: {_NO_CUDA}")


def memory_allocated(device: Any = None) -> int:
    """0 bytes: no CUDA memory is ever allocated."""
    return 0


def memory_reserved(device: Any = None) -> int:
    """0 bytes: no CUDA memory is ever reserved."""
    return 0


class device:  # noqa: N801 - PyTorch's name
    """`with torch.cuda.device(i):` raises RuntimeError on entry for i >= 0, as PyTorch's CPU
    build; a negative index (or None) makes it do nothing."""

    def __init__(self, device: Any) -> None:
        self.idx = -1 if device is None else _index(device)

    def __enter__(self) -> None:
        if self.idx >= 0:
            raise RuntimeError(f"PyTorch was compiled without CUDA support: {_NO_CUDA}")

    def __exit__(self, *exc_info: Any) -> None:
        return None


synchronize = refused("torch.cuda.synchronize", "jitgrad runs on the CPU only: it needs a "
                      "CUDA device (jitgrad.cuda.is_available() is False)")


globals().update(CUDA_TYPES)  # torch.cuda.FloatTensor, ...: constructing one raises TypeError

__all__ = [*CUDA_TYPES, "is_available", "device_count", "manual_seed", "manual_seed_all",
           "is_bf16_supported", "synchronize", "amp", "set_device", "current_device",
           "memory_allocated", "memory_reserved", "device"]
