"""`jitgrad.optim`: SGD, Adam, AdamW, RMSprop, Adadelta, LBFGS, lr schedulers (as torch.optim)."""

from jitgrad.optim import lr_scheduler
from jitgrad.optim.adadelta import Adadelta
from jitgrad.optim.adam import Adam, AdamW
from jitgrad.optim.lbfgs import LBFGS
from jitgrad.optim.optimizer import Optimizer
from jitgrad.optim.rmsprop import RMSprop
from jitgrad.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adadelta", "LBFGS", "lr_scheduler"]
