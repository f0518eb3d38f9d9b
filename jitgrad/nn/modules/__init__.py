"""The layer classes of `jitgrad.nn`, one concept per file (as torch/nn/modules)."""

from jitgrad.nn.modules.activation import *  # noqa: F403 - ReLU, ELU, GELU, ...
from jitgrad.nn.modules.activation import __all__ as _activation_all
from jitgrad.nn.modules.batchnorm import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)
from jitgrad.nn.modules.container import ModuleDict, ModuleList, ParameterDict, Sequential
from jitgrad.nn.modules.conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from jitgrad.nn.modules.dropout import Dropout
from jitgrad.nn.modules.flatten import Flatten, Unflatten
from jitgrad.nn.modules.linear import Identity, LazyLinear, Linear
from jitgrad.nn.modules.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from jitgrad.nn.modules.module import Module
from jitgrad.nn.modules.normalization import LayerNorm
from jitgrad.nn.modules.pooling import AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
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
from jitgrad.nn.modules.sampling import *  # noqa: F403
from jitgrad.nn.modules.sampling import __all__ as _sampling_all
from jitgrad.nn.modules.sparse import Embedding, EmbeddingBag
from jitgrad.nn.modules.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = ["Module", "Linear", "Identity", "Embedding", "LayerNorm", "Dropout", "Flatten",
           "Unflatten", "Sequential", "ModuleList", "ModuleDict", "MSELoss", "L1Loss", "NLLLoss",
           "CrossEntropyLoss", "BCEWithLogitsLoss", "BCELoss", "SmoothL1Loss", "HuberLoss",
           "KLDivLoss", "Conv2d", "MaxPool2d", "AvgPool2d",
           "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "GroupNorm", "Conv1d", "ConvTranspose1d", "ConvTranspose2d",
           "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer", *_sampling_all,
           "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
           "ParameterDict", "MaxPool1d", "AvgPool1d", "EmbeddingBag", "LazyLinear",
           *_activation_all]
del _activation_all  # only for __all__
