"""The layer classes of `jitgrad.nn`, one concept per file (as torch/nn/modules)."""

from jitgrad.nn.modules.activation import (
    ELU,
    GELU,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from jitgrad.nn.modules.container import ModuleDict, ModuleList, Sequential
from jitgrad.nn.modules.conv import Conv2d
from jitgrad.nn.modules.dropout import Dropout
from jitgrad.nn.modules.flatten import Flatten, Unflatten
from jitgrad.nn.modules.linear import Identity, Linear
from jitgrad.nn.modules.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
)
from jitgrad.nn.modules.module import Module
from jitgrad.nn.modules.normalization import LayerNorm
from jitgrad.nn.modules.pooling import AvgPool2d, MaxPool2d
from jitgrad.nn.modules.rnn import (
    GRU,
    LSTM,
    RNN,
    GRUCell,
    LSTMCell,
    RNNBase,
    RNNCell,
    RNNCellBase,
)
from jitgrad.nn.modules.sparse import Embedding

__all__ = ["Module", "Linear", "Identity", "Embedding", "LayerNorm", "Dropout", "ReLU",
           "LeakyReLU", "GELU", "SiLU", "ELU", "Hardtanh", "ReLU6", "Softplus", "LogSigmoid",
           "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Flatten",
           "Unflatten", "Sequential", "ModuleList", "ModuleDict", "MSELoss", "L1Loss", "NLLLoss",
           "CrossEntropyLoss", "BCEWithLogitsLoss", "BCELoss", "Conv2d", "MaxPool2d", "AvgPool2d",
           "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
