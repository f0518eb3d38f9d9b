"""`jitgrad.autograd`: gradients on demand, custom Functions, gradcheck (as torch.autograd)."""

from jitgrad.eager.engine import backward, grad
from jitgrad.eager.gradcheck import GradcheckError, gradcheck
from jitgrad.eager.grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled

__all__ = ["backward", "grad", "gradcheck", "GradcheckError", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode"]
