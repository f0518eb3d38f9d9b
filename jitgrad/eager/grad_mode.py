"""Grad mode: whether ops record history. Thread-local, as in PyTorch.

`no_grad`, `enable_grad`, `set_grad_enabled` and `inference_mode` work as context
managers and as decorators; `set_grad_enabled(False)` also works as a plain call. A new
thread starts with grad enabled (research/eager_autograd.md §1 row 6). `inference_mode`
is an alias of `no_grad` in jitgrad: tensors made under it are ordinary tensors.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class _GradState(threading.local):
    """Per-thread eager state: grad mode, and the op recorder a compiler installs while
    it traces (see Note [Recording ops while tracing] in jitgrad/eager/ops/registry.py)."""

    enabled = True
    # called as recorder(op, inputs, arrays, params) by apply_op while set
    recorder: Callable[..., Any] | None = None


STATE = _GradState()


def is_grad_enabled() -> bool:
    """True when ops record autograd history in this thread."""
    return STATE.enabled


def set_grad_mode(enabled: bool) -> None:
    """Switch grad mode without a context manager (compiled graphs mark regions with it)."""
    STATE.enabled = enabled


class _GradModeContext:
    """Base of the grad-mode context managers: sets a mode on enter, restores on exit."""

    mode = True

    def __enter__(self) -> None:
        self._previous = STATE.enabled
        STATE.enabled = self.mode

    def __exit__(self, *exc: object) -> None:
        STATE.enabled = self._previous

    def __call__(self, fn: F) -> F:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            previous = STATE.enabled
            STATE.enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                STATE.enabled = previous

        return wrapper  # type: ignore[return-value]


class no_grad(_GradModeContext):  # noqa: N801 - PyTorch's name
    """Disable history recording: results are leaves with requires_grad=False."""

    mode = False


class enable_grad(_GradModeContext):  # noqa: N801
    """Enable history recording, e.g. inside a `no_grad` region."""

    mode = True


class inference_mode(_GradModeContext):  # noqa: N801
    """Alias of `no_grad` (jitgrad has no separate inference tensors)."""

    def __init__(self, mode: bool = True) -> None:
        self.mode = not mode


class set_grad_enabled(_GradModeContext):  # noqa: N801
    """Set grad mode; takes effect immediately, and restores on exit when used with `with`."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._previous = STATE.enabled
        STATE.enabled = self.mode

    def __enter__(self) -> None:
        pass
