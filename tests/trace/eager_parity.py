"""Compiled equals eager, observably: one program run compiled and eagerly on equal fresh
inputs must agree in its outputs (values, dtypes, requires_grad, is_leaf, grad_fn
None-ness), in its inputs afterwards (values, versions, requires_grad, is_leaf), in the
gradients a backward call leaves (values and None-ness of every input's `.grad`), and in
the error class and message words of whatever raised (the call or the backward).

Used by tests/trace (backend "eager": capture) and tests/codegen (backend "numba").
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import numpy as np

import jitgrad as jg

TOLERANCE = {np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float64): (1e-10, 1e-12)}


@dataclasses.dataclass
class Outcome:
    """What one run of a program showed (see the module docstring)."""

    error: tuple[type, str] | None = None
    grad_mode_after: bool | None = None  # jitgrad.is_grad_enabled() right after the call
    backward_error: tuple[type, str] | None = None
    outputs: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    inputs: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def weighted_sum(outputs: list[jg.Tensor]) -> jg.Tensor | None:
    """A loss reading every output that requires grad, each element with its own weight
    (so a gradient routed to the wrong element or output shows)."""
    terms = []
    for k, out in enumerate(outputs):
        if out.requires_grad:
            weights = np.arange(1, out.numel() + 1, dtype=np.float64).reshape(out.shape)
            terms.append((out * jg.tensor((weights + k) / 7.0, dtype=out.dtype)).sum())
    if not terms:
        return None
    return sum(terms[1:], terms[0])


def _tensors(value: Any) -> list[jg.Tensor]:
    if isinstance(value, jg.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def _state(t: jg.Tensor, version: bool) -> dict[str, Any]:
    state = {"value": t.detach().numpy().copy(), "dtype": t.dtype,
             "requires_grad": t.requires_grad, "is_leaf": t.is_leaf,
             "has_grad_fn": t.grad_fn is not None}
    if version:
        state["version"] = t._version
    return state


def run(program: Callable[..., Any], make_inputs: Callable[[], list[Any]],
        loss: Callable[[list[jg.Tensor]], jg.Tensor | None] = weighted_sum,
        after: Callable[[list[jg.Tensor], list[Any]], None] | None = None,
        outer: Callable[[], Any] = jg.enable_grad) -> Outcome:
    """One run: call under the grad mode `outer()`, then `after(outputs, inputs)` (e.g. an
    in-place write), then backward of `loss(outputs)`, recording what each step showed."""
    inputs = make_inputs()
    outcome = Outcome()
    with outer():
        try:
            outputs = _tensors(program(*inputs))
        except Exception as err:  # noqa: BLE001 - the class is what is compared
            outcome.error = (type(err), str(err))
            return outcome
        outcome.grad_mode_after = jg.is_grad_enabled()
    if after is not None:
        after(outputs, inputs)
    outcome.outputs = [_state(t, version=False) for t in outputs]
    total = loss(outputs)
    if total is not None:
        try:
            total.backward()
        except RuntimeError as err:
            outcome.backward_error = (type(err), str(err))
    for x in _tensors(inputs):
        state = _state(x, version=True)
        if outcome.backward_error is None:  # a failed backward leaves partial gradients
            # (eager's nodes that ran before the error; one compiled node runs as a whole)
            state["grad"] = None if x.grad is None else x.grad.numpy().copy()
        outcome.inputs.append(state)
    return outcome


def assert_matches_eager(program: Callable[..., Any], make_inputs: Callable[[], list[Any]],
                         backend: str, words: str | None = None, same_names: bool = False,
                         **kwargs: Any) -> Outcome:
    """Run `program` compiled with `backend` and eagerly; assert the outcomes agree.

    words: text every error (if any) must contain, e.g. "modified by an inplace operation";
    same_names: the saved tensor such an error names must be eager's too.
    Returns the eager outcome (for tests that also check it against a known value).
    """
    jg.reset()
    compiled = run(jg.compile(program, backend=backend), make_inputs, **kwargs)
    eager = run(program, make_inputs, **kwargs)
    for what in ("error", "backward_error"):
        got, want = getattr(compiled, what), getattr(eager, what)
        assert (got is None) == (want is None), f"{what}: compiled {got}, eager {want}"
        if want is not None:
            assert got[0] is want[0], f"{what}: compiled {got}, eager {want}"
            if words is not None:
                assert words in got[1] and words in want[1], (got, want)
                # the tensor the error names, as eager names it ("a leaf Tensor", "output
                # 0 of Mul"), not a graph's internal op
                assert not same_names or _named(got[1]) == _named(want[1]), (got, want)
    assert compiled.grad_mode_after == eager.grad_mode_after
    assert len(compiled.outputs) == len(eager.outputs)
    for kind in ("outputs", "inputs"):
        for k, (got, want) in enumerate(zip(getattr(compiled, kind), getattr(eager, kind),
                                            strict=True)):
            _assert_same_state(got, want, f"{kind}[{k}]")
    return eager


def _named(message: str) -> str | None:
    """What a "modified by an inplace operation" error says the saved tensor is."""
    found = re.search(r"\], which is (.*?), is at version", message)
    return found.group(1) if found else None


def _assert_same_state(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    for key, expected in want.items():
        actual = got[key]
        if key in ("value", "grad"):
            assert (actual is None) == (expected is None), f"{where}.{key}: {actual} vs " \
                f"{expected}"
            if expected is not None:
                rtol, atol = TOLERANCE.get(expected.dtype, (0, 0))
                np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol,
                                           err_msg=f"{where}.{key}")
        else:
            assert actual == expected, f"{where}.{key}: compiled {actual}, eager {expected}"
