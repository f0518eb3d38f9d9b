"""`gradcheck`: compare autograd's Jacobian with central finite differences.

Method (as torch.autograd.gradcheck): for every input that requires grad, perturb each
element by ±eps and form the numerical Jacobian column (f(x+eps) - f(x-eps)) / (2 eps);
build the analytical Jacobian one output element at a time with `autograd.grad` and a
one-hot `grad_outputs`; they must agree within `atol + rtol * |numerical|`. Use float64
inputs: float32 rounding swamps the differences.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jitgrad.eager.engine import grad as autograd_grad
from jitgrad.eager.grad_mode import no_grad
from jitgrad.eager.tensor import Tensor


class GradcheckError(RuntimeError):
    """Raised by gradcheck when the analytical and numerical Jacobians differ."""


def _outputs(fn: Callable, inputs: Sequence[Any]) -> list[Tensor]:
    out = fn(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o for o in outs if isinstance(o, Tensor) and o._data.dtype.kind == "f"]


def _numerical_jacobians(fn: Callable, inputs: Sequence[Any], eps: float) -> list[list[np.ndarray]]:
    """jac[i][o] has shape (inputs[i].numel(), outputs[o].numel())."""
    with no_grad():
        reference = _outputs(fn, inputs)
        jacobians: list[list[np.ndarray]] = []
        for x in inputs:
            if not (isinstance(x, Tensor) and x._requires_grad):
                jacobians.append([])
                continue
            data = x._data  # perturbed in place (any layout), as torch does
            cols = [np.zeros((data.size, o._data.size)) for o in reference]
            for j, index in enumerate(np.ndindex(data.shape)):
                original = data[index]
                data[index] = original + eps
                plus = [o._data.astype(np.float64).reshape(-1) for o in _outputs(fn, inputs)]
                data[index] = original - eps
                minus = [o._data.astype(np.float64).reshape(-1) for o in _outputs(fn, inputs)]
                data[index] = original
                for o, (p, m) in enumerate(zip(plus, minus, strict=True)):
                    cols[o][j] = (p - m) / (2 * eps)
            jacobians.append(cols)
    return jacobians


def _analytical_jacobians(fn: Callable, inputs: Sequence[Any]) -> list[list[np.ndarray]]:
    outputs = _outputs(fn, inputs)
    diff_inputs = [x for x in inputs if isinstance(x, Tensor) and x._requires_grad]
    jacobians = [[np.zeros((x._data.size, o._data.size)) for o in outputs] for x in diff_inputs]
    for o, out in enumerate(outputs):
        if not out._requires_grad:
            continue
        for k in range(out._data.size):
            onehot = np.zeros(out._data.size, dtype=out._data.dtype)
            onehot[k] = 1
            seed = Tensor._make(onehot.reshape(out._data.shape))
            grads = autograd_grad([out], diff_inputs, [seed],
                                  retain_graph=True, allow_unused=True)
            for i, g in enumerate(grads):
                if g is not None:
                    jacobians[i][o][:, k] = g._data.reshape(-1)
    by_input, it = [], iter(jacobians)
    for x in inputs:
        by_input.append(next(it) if isinstance(x, Tensor) and x._requires_grad else [])
    return by_input


def gradcheck(fn: Callable[..., Any], inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True) -> bool:
    """Check `fn`'s gradients against finite differences (torch.autograd.gradcheck).

    inputs: a Tensor or tuple of Tensors/values; those with requires_grad are checked.
    Returns True on success; on mismatch raises GradcheckError (or returns False when
    raise_exception=False). Warns when a checked input is not float64.
    """
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x._requires_grad and x._data.dtype != np.float64:
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          "point. This check will likely fail if all the inputs are not of double "
                          "precision floating point.", UserWarning, stacklevel=2)
    numerical = _numerical_jacobians(fn, inputs, eps)
    analytical = _analytical_jacobians(fn, inputs)
    for i, (num_i, ana_i) in enumerate(zip(numerical, analytical, strict=True)):
        for o, (num, ana) in enumerate(zip(num_i, ana_i, strict=True)):
            if not np.allclose(ana, num, rtol=rtol, atol=atol, equal_nan=True):
                if not raise_exception:
                    return False
                raise GradcheckError(f"Jacobian mismatch for output {o} with respect to input "
                                     f"{i},\nnumerical:{num}\nanalytical:{ana}\n")
    return True
