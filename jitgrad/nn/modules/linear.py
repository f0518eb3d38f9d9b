"""`Linear` and `Identity` (torch.nn.Linear, torch.nn.Identity)."""

from __future__ import annotations

import math
from typing import Any, cast

from jitgrad.eager.ops.creation import empty
from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn import init
from jitgrad.nn.modules.module import Module
from jitgrad.nn.parameter import Parameter, UninitializedParameter


class Identity(Module):
    """Returns its input unchanged; accepts and ignores constructor arguments, as PyTorch's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """y = x @ weight.T + bias, for x of shape (*, in_features) -> (*, out_features).

    weight: (out_features, in_features), bias: (out_features,) or None. Both start as
    U(-1/sqrt(in_features), 1/sqrt(in_features)) (PyTorch's kaiming_uniform_(a=sqrt(5))).
    dtype: float32 unless `dtype=` is given.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in_features, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw weight and bias from PyTorch's default distribution."""
        reset_weight_and_bias(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def reset_weight_and_bias(weight: Tensor, bias: Tensor | None) -> None:
    """PyTorch's default init of Linear and ConvNd: weight kaiming-uniform with a=sqrt(5)
    (U(-1/sqrt(fan_in), 1/sqrt(fan_in))), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)); in place."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear under torch's name for MultiheadAttention.out_proj's class, which programs
    name (e.g. in `torch.serialization.safe_globals` to load a pickled transformer)."""


class LazyLinear(Linear):
    """A Linear whose in_features is the last dim of its first input (torch.nn.LazyLinear).

    Until then weight and bias are `UninitializedParameter`s (in_features reads 0); the first
    call materializes them as (out_features, in_features) and (out_features,), draws
    Linear's default init and turns the module into a `Linear`. Loading a state dict
    materializes them with the saved shapes instead (the module stays a LazyLinear, as in
    PyTorch). Optimizers may be built before the first call: the parameters keep their
    identity.
    """

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        Module.__init__(self)
        self.in_features = 0
        self.out_features = out_features
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        else:
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        """Linear's default init, once the parameters have shapes."""
        if self.in_features != 0:
            super().reset_parameters()

    def forward(self, input: Tensor) -> Tensor:
        if isinstance(self.weight, UninitializedParameter):
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if isinstance(self.bias, UninitializedParameter):
                self.bias.materialize((self.out_features,))
            self.reset_parameters()
            cast(Any, self).__class__ = self.cls_to_become  # a class change mypy cannot follow
        return F.linear(input, self.weight, self.bias)


__all__ = ["Identity", "Linear", "LazyLinear", "NonDynamicallyQuantizableLinear"]
