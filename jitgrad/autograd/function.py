"""`jitgrad.autograd.function`: custom autograd Functions (as `torch.autograd.function`)."""

from jitgrad.eager.function import BackwardCFunction, Function, FunctionCtx, once_differentiable

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable"]
