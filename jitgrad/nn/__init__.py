"""`jitgrad.nn`: Module, Parameter, layers, losses, `init`, `utils`, `functional` (torch.nn)."""

from jitgrad.nn import functional, init, utils  # noqa: F401
from jitgrad.nn.modules import *  # noqa: F403
from jitgrad.nn.modules import __all__ as _modules_all
from jitgrad.nn.parameter import Parameter

__all__ = ["Parameter", "functional", "init", "utils", *_modules_all]
