"""`jitgrad.accelerator`: jitgrad has no accelerator, as PyTorch on a CPU-only machine.

pytorch/examples (mnist, vae) pick their device with `torch.accelerator.is_available()`
and `current_accelerator()`; these answer as torch >= 2.6 does without CUDA/MPS/XPU.
"""

from __future__ import annotations


def is_available() -> bool:
    """False: no accelerator."""
    return False


def current_accelerator(check_available: bool = False) -> None:
    """None: no accelerator (torch returns None when none is present)."""
    return None


def device_count() -> int:
    """0: no accelerator devices."""
    return 0


__all__ = ["is_available", "current_accelerator", "device_count"]
