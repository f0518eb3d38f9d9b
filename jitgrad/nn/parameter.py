"""`Parameter`: a Tensor that a Module registers as a learnable weight (torch.nn.Parameter),
and `UninitializedParameter`, the placeholder of lazy modules until their first call.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

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


ERR_UNINITIALIZED = (
    "Can't access the shape of an uninitialized parameter or buffer. This error usually "
    "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
    "initialized one. Call `forward` to initialize the parameters before accessing their "
    "attributes.")


class UninitializedParameter(Parameter):
    """A parameter without a shape yet (torch.nn.parameter.UninitializedParameter).

    `materialize(shape)` gives it uninitialized memory of that shape and makes it a plain
    Parameter, the same object, so optimizers and state dicts holding it see the change.
    Reading its shape before raises RuntimeError, as PyTorch.
    """

    cls_to_become = Parameter
    _jitgrad_uninitialized = True  # the tracer breaks the graph at it (it has no shape)

    def __new__(cls, requires_grad: bool = True, device: Any = None,
                dtype: Any = None) -> UninitializedParameter:
        param = super().__new__(cls, empty(0, dtype=dtype), requires_grad)
        assert isinstance(param, UninitializedParameter), "made by Parameter.__new__(cls)"
        return param

    @property
    def shape(self) -> Any:
        raise RuntimeError(ERR_UNINITIALIZED)

    def size(self, dim: int | None = None) -> Any:
        raise RuntimeError(ERR_UNINITIALIZED)

    def materialize(self, shape: tuple[int, ...], device: Any = None, dtype: Any = None) -> None:
        """Become a Parameter of `shape` (and `dtype`, default: the placeholder's)."""
        np_dtype = self._data.dtype if dtype is None \
            else dtypes.numpy_dtype(dtypes.to_dtype(dtype), "materialize")
        self._data = np.empty(tuple(shape), np_dtype)
        self._bump_version()
        cast(Any, self).__class__ = self.cls_to_become  # a class change mypy cannot follow

    def __repr__(self) -> str:
        return "<UninitializedParameter>"
