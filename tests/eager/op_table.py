"""The op table: one OpCase per op behaviour, reused by every layer's tests.

Each case names a jitgrad callable and a numpy reference over the same inputs. Eager
tests check forward values and dtypes against the reference (float32 and float64) and
gradients with float64 `gradcheck`; the compiler's tests (later issues) run the same
cases compiled and compare with eager.

Cases live per op family in `tests/eager/cases_*.py`; this module defines `OpCase` and
`Arg` and concatenates the families into `OP_CASES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import jitgrad as jg


@dataclass(frozen=True)
class Arg:
    """How to generate one tensor input.

    kind: "float" (uniform in [low, high)), "int" (integers in [low, high), int64, no
    grad), "bool" (random mask), or "index" (same as int, documents intent).
    layout: "contiguous", "transposed" (the array is the transpose of a contiguous one,
    shape given is the final shape) or "strided" (every other element of a larger array).
    """

    shape: tuple[int, ...]
    low: float = -2.0
    high: float = 2.0
    kind: str = "float"
    layout: str = "contiguous"
    requires_grad: bool = True

    def make(self, rng: np.random.Generator, np_dtype: Any) -> np.ndarray:
        if self.kind in ("int", "index"):
            return rng.integers(int(self.low), int(self.high), size=self.shape).astype(np.int64)
        if self.kind == "bool":
            return rng.random(self.shape) < 0.5
        if self.layout == "transposed" and len(self.shape) >= 2:
            base = rng.uniform(self.low, self.high, size=self.shape[::-1]).astype(np_dtype)
            return base.T
        if self.layout == "strided" and self.shape:
            big = rng.uniform(self.low, self.high,
                              size=self.shape[:-1] + (2 * self.shape[-1],)).astype(np_dtype)
            return big[..., ::2]
        return np.asarray(rng.uniform(self.low, self.high, size=self.shape)).astype(np_dtype)


@dataclass(frozen=True)
class OpCase:
    """One op behaviour: `fn(*tensors)` in jitgrad must equal `ref(*arrays)` in numpy.

    differentiable: run gradcheck on the float inputs that have requires_grad.
    dtypes: float dtypes to test the forward in (each input of kind float uses it).
    rtol/atol: forward tolerances for float32 (float64 uses rtol 1e-10 unless
    `rtol64` says otherwise, e.g. for references computed differently).
    """

    name: str
    fn: Callable[..., Any]
    ref: Callable[..., Any]
    args: tuple[Arg, ...]
    differentiable: bool = True
    dtypes: tuple[Any, ...] = (np.float32, np.float64)
    rtol: float = 1e-5
    atol: float = 1e-6
    rtol64: float = 1e-10
    gradcheck_atol: float = 1e-5
    tags: tuple[str, ...] = field(default_factory=tuple)

    def arrays(self, np_dtype: Any, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [a.make(rng, np_dtype) for a in self.args]

    def tensors(self, arrays: list[np.ndarray], requires_grad: bool) -> list[jg.Tensor]:
        out = []
        for spec, array in zip(self.args, arrays, strict=True):
            t = jg.from_numpy(array)
            if requires_grad and spec.kind == "float" and spec.requires_grad:
                t.requires_grad_()
            out.append(t)
        return out


def _families() -> list[OpCase]:
    from tests.eager import (
        cases_core,
        cases_creation,
        cases_indexing,
        cases_linalg,
        cases_nn_functional,
        cases_pointwise,
        cases_real,
        cases_reduction,
        cases_shape,
    )

    cases: list[OpCase] = []
    for module in (cases_core, cases_pointwise, cases_reduction, cases_linalg, cases_shape,
                   cases_indexing, cases_nn_functional, cases_creation, cases_real):
        cases.extend(module.CASES)
    names = [c.name for c in cases]
    duplicates = {n for n in names if names.count(n) > 1}
    assert not duplicates, f"duplicate op case names: {sorted(duplicates)}"
    return cases


OP_CASES: list[OpCase] = _families()
