"""`jitgrad.nn.utils`: gradient clipping (as torch.nn.utils)."""

from jitgrad.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm"]
