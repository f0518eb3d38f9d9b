"""Install the methods whose bodies need a later layer: `METHODS` on `Tensor`, the Node
methods of the engine, and `xp.TENSOR`'s functions.

Each module under `jitgrad.eager.ops` defines its ops as functions whose first argument
is the tensor, and lists the ones that are also Tensor methods in `METHODS`; installing
them here keeps `tensor.py` about state and autograd, and one op one definition. Declared
pointwise ops (`declare.pointwise_op`) list theirs, in-place ones too, in `declare.METHODS`.

Note [Eager layers]: jitgrad/eager is built in layers; a module imports from its own
layer and the ones below, at the top of the module (tests/test_layering.py checks it):
  1. base:      dtypes, devices, layout, grad_mode, symbolic_int, type_info, xp (the numpy
                namespace of backward formulas and the array kernels it shares with op
                forwards), tensor_declarations
  2. node:      the autograd graph (Node, Edge, AccumulateGrad, SavedValues)
  3. tensor:    Tensor's state and autograd fields
  4. registry:  ops/registry.py (OpDef, apply_op, an op's backward Node)
  5. views:     view bookkeeping, built on registry
  6. ops:       the other modules under ops/
  7. above ops: engine, function, gradcheck, printing, legacy_types, xp_tensor
  8. installer: this module, run once by jitgrad/eager/__init__.py
A method of a lower layer's class whose body needs a higher layer is defined in that
layer and attached here, once, before any op runs: `Tensor(data)` and `__reduce_ex__`
(ops/creation.py), `backward` (engine.py), `__repr__` (printing.py), the rebuild of a
stale view's grad_fn (views.py), `Node.__call__` and `AccumulateGrad.apply` (engine.py).
`xp.TENSOR` gets its functions from xp_tensor.py, which is written with the ops. Being
bound at install time, none of them costs more per call than a method defined in place.
"""

from __future__ import annotations

from jitgrad.eager import engine, legacy_types, printing, views, xp, xp_tensor
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
              storage, legacy_types, engine, printing, views)


def install() -> None:
    """Attach the methods and fill `xp.TENSOR`; a name defined by two modules is a bug."""
    seen: dict[str, str] = {}
    for module in OP_MODULES:
        for name, fn in module.METHODS.items():
            assert name not in seen, f"Tensor.{name} defined by {seen[name]} and {module.__name__}"
            seen[name] = module.__name__
            setattr(Tensor, name, fn)
    for cls, name, fn in engine.NODE_METHODS:
        setattr(cls, name, fn)
    for name in xp.NAMES:
        setattr(xp.TENSOR, name, getattr(xp_tensor, name))
