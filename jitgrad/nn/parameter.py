"""`Parameter`: a Tensor that a Module registers as a learnable weight (torch.nn.Parameter)."""

from __future__ import annotations

from jitgrad.eager import dtypes
from jitgrad.eager.ops.creation import ERR_INT_REQUIRES_GRAD, empty
from jitgrad.eager.printing import tensor_repr
from jitgrad.eager.tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor that `Module.__setattr__` registers in `_parameters`.

    `Parameter(data, requires_grad=True)` shares `data`'s storage and version counter
    (as `data.detach()` does) and is a leaf; ops on it return plain Tensors.
    `Parameter()` holds an empty float32 tensor.
    Raises RuntimeError when `requires_grad` is True and `data` is not floating point.
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter expects a Tensor as data, got {type(data).__name__}; "
                            "wrap it first, e.g. Parameter(jitgrad.tensor(data))")
        if requires_grad and data._data.dtype.kind != "f":
            raise RuntimeError(ERR_INT_REQUIRES_GRAD.format(
                dtype=dtypes.from_numpy_dtype(data._data.dtype)))
        param = cls._make(data._data, bool(requires_grad))
        param._vc = data._version_counter()
        return param

    def __repr__(self) -> str:
        return "Parameter containing:\n" + tensor_repr(self)
