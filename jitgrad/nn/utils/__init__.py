"""`jitgrad.nn.utils`: gradient clipping, parameter/vector conversion, `rnn` (torch.nn.utils)."""

from jitgrad.nn.utils import rnn
from jitgrad.nn.utils.clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    get_total_norm,
)
from jitgrad.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters", "rnn"]
