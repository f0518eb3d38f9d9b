"""`jitgrad.autograd`: gradients on demand, custom Functions, gradcheck (as torch.autograd)."""

from jitgrad.autograd import function
from jitgrad.eager.engine import backward, grad
from jitgrad.eager.function import Function, FunctionCtx, once_differentiable
from jitgrad.eager.grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled
from jitgrad.eager.gradcheck import GradcheckError, gradcheck
from jitgrad.eager.legacy_types import Variable

__all__ = ["backward", "grad", "gradcheck", "GradcheckError", "no_grad", "enable_grad",
           "set_grad_enabled", "inference_mode", "Function", "FunctionCtx",
           "once_differentiable", "function", "Variable"]
