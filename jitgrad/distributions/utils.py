"""Conversions between probabilities and logits (torch.distributions.utils)."""

from __future__ import annotations

from jitgrad.eager.tensor import Tensor
from jitgrad.eager.type_info import finfo


def clamp_probs(probs: Tensor) -> Tensor:
    """probs clamped into [eps, 1 - eps], eps the dtype's machine epsilon."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """log of the clamped probabilities (log-odds when `is_binary`)."""
    clamped = clamp_probs(probs)
    return (clamped.log() - (-clamped).log1p()) if is_binary else clamped.log()


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """softmax over the last dim (sigmoid when `is_binary`)."""
    return logits.sigmoid() if is_binary else logits.softmax(-1)


__all__ = ["clamp_probs", "probs_to_logits", "logits_to_probs"]
