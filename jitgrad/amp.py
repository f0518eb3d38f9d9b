"""`jitgrad.amp`: mixed precision, which jitgrad does not do (it computes in float32/64).

What PyTorch does on a machine without CUDA is kept: `autocast("cuda")` and an enabled
CUDA `GradScaler` warn and disable themselves, so nanoGPT's CPU path (which builds an
enabled `torch.cuda.amp.GradScaler`) runs with plain float32 steps. Asking for CPU
autocast, or an enabled CPU GradScaler, raises instead of silently computing in float32.
"""

from __future__ import annotations

import warnings
from typing import Any

from jitgrad.eager.tensor import Tensor

ERR_NO_MIXED_PRECISION = ("{name}: jitgrad computes in float32 or float64 only and has no "
                          "mixed precision; drop the autocast context (contextlib.nullcontext()) "
                          "or pass enabled=False")


class autocast:  # noqa: N801 - PyTorch's name
    """Context manager `torch.amp.autocast(device_type, dtype=None, enabled=True)`.

    device_type "cuda" (unavailable): warns and does nothing, as PyTorch without CUDA.
    Raises RuntimeError on entering when enabled for "cpu" (jitgrad cannot compute in
    bfloat16/float16, and running float32 instead would change the program's numbers).
    """

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        self.device_type = device_type
        self.enabled = enabled
        if enabled and device_type == "cuda":
            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. "
                          "Disabling", stacklevel=2)
            self.enabled = False

    def __enter__(self) -> autocast:
        if self.enabled:
            raise RuntimeError(ERR_NO_MIXED_PRECISION.format(
                name=f"autocast(device_type={self.device_type!r})"))
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class GradScaler:
    """`torch.amp.GradScaler` / `torch.cuda.amp.GradScaler`, disabled on jitgrad.

    device "cuda" with enabled=True warns and disables itself, as PyTorch without CUDA.
    A disabled scaler passes values through: `scale(loss)` is `loss`, `step(opt)` calls
    `opt.step()`. Raises RuntimeError for an enabled "cpu" scaler (no float16 training).
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        if enabled and device == "cuda":
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", stacklevel=2)
        elif enabled:
            raise RuntimeError(ERR_NO_MIXED_PRECISION.format(name=f"GradScaler({device!r})"))
        self._enabled = False

    def is_enabled(self) -> bool:
        return self._enabled

    def scale(self, outputs: Tensor) -> Tensor:
        """`outputs` unchanged (a disabled scaler does not scale)."""
        return outputs

    def unscale_(self, optimizer: Any) -> None:
        """Nothing to unscale."""

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """`optimizer.step(*args, **kwargs)`."""
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: float | None = None) -> None:
        """Nothing to update."""

    def get_scale(self) -> float:
        return 1.0

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Nothing to restore: a disabled scaler has no state."""


__all__ = ["autocast", "GradScaler"]
