"""Torch APIs that jitgrad has on purpose but refuses to run, with the reason.

`refused(torch_path, reason)` makes the callable that stands at a torch path jitgrad keeps
(so imports and feature probes work, as scripts expect) but cannot honour on a single CPU
process: calling it raises RuntimeError with the reason. The coverage inventory
(docs/torch_api/coverage.md) reads `REFUSED_ATTRIBUTE` to mark such names "refused", and
its test calls each one to check that it raises exactly the documented message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

REFUSED_ATTRIBUTE = "__jitgrad_refused__"


def refused(torch_path: str, reason: str) -> Callable[..., NoReturn]:
    """A function named after `torch_path` whose every call raises RuntimeError(message)."""
    message = f"{torch_path}: {reason}"

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(message)

    refuse.__name__ = refuse.__qualname__ = torch_path.rsplit(".", 1)[-1]
    refuse.__doc__ = f"Raises RuntimeError: {reason}"
    setattr(refuse, REFUSED_ATTRIBUTE, message)
    return refuse
