"""`jitgrad.distributed`: jitgrad runs in a single process, so there is no process group.

nanoGPT imports `init_process_group` and `destroy_process_group` at module level and
calls them only when launched with torchrun; importing works, calling raises.
"""

from __future__ import annotations

from jitgrad.refusal import refused

SINGLE_PROCESS = ("jitgrad runs in a single process on the CPU and has no torch.distributed "
                  "backend; launch the script with plain `python` (not torchrun) so it takes "
                  "its single-process path")


def is_available() -> bool:
    """False, as in a PyTorch build without distributed support."""
    return False


def is_initialized() -> bool:
    """False: no process group ever exists."""
    return False


init_process_group = refused("torch.distributed.init_process_group", SINGLE_PROCESS)
destroy_process_group = refused("torch.distributed.destroy_process_group", SINGLE_PROCESS)


__all__ = ["is_available", "is_initialized", "init_process_group", "destroy_process_group"]
