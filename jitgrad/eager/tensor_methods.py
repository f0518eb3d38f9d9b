"""Install every op module's `METHODS` on `Tensor` (methods and operators).

Each module under `jitgrad.eager.ops` defines its ops as functions whose first argument
is the tensor, and lists the ones that are also Tensor methods in `METHODS`; installing
them here keeps `tensor.py` about state and autograd, and one op one definition. Declared
pointwise ops (`declare.pointwise_op`) list theirs, in-place ones too, in `declare.METHODS`.
"""

from __future__ import annotations

from jitgrad.eager import legacy_types
from jitgrad.eager.ops import (
    activation,
    comparison,
    counting,
    creation,
    declare,
    indexing,
    inplace,
    linalg,
    matrix,
    nn_ops,
    pointwise,
    pointwise_math,
    random,
    reduction,
    shape,
    storage,
)
from jitgrad.eager.tensor import Tensor

OP_MODULES = (creation, random, pointwise, pointwise_math, comparison, activation, reduction,
              shape, indexing, inplace, linalg, matrix, nn_ops, counting, declare,
              storage, legacy_types)


def install() -> None:
    """Attach the methods; a name defined by two modules is a bug."""
    seen: dict[str, str] = {}
    for module in OP_MODULES:
        for name, fn in module.METHODS.items():
            assert name not in seen, f"Tensor.{name} defined by {seen[name]} and {module.__name__}"
            seen[name] = module.__name__
            setattr(Tensor, name, fn)
