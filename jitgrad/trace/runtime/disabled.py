"""User-facing markers that steer tracing: `disable`, `allow_in_graph`, `graph_break`.

They only set attributes on functions (no import of the compiler), so decorating code
with them costs nothing when it never runs compiled.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_DISABLED = "__jitgrad_disabled__"
_ALLOWED = "__jitgrad_allow_in_graph__"


def disable(fn: F | None = None) -> Any:
    """Run `fn` eagerly even when called from compiled code (a graph break at its call).

    Usable as `@jitgrad.disable` or `jitgrad.disable(fn)`. The function itself is
    unchanged when called outside compiled code.
    """
    if fn is None:
        return disable

    @functools.wraps(fn)
    def eager_only(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    setattr(eager_only, _DISABLED, True)
    return eager_only


def is_disabled(fn: Any) -> bool:
    return getattr(fn, _DISABLED, False) is True


def allow_in_graph(fn: F) -> F:
    """Record calls to `fn` as one graph node instead of tracing into it.

    `fn` must be a pure function of its tensor arguments (it runs with real tensors when
    the graph runs, and once on fake tensors while tracing to learn its output shapes).
    """
    setattr(fn, _ALLOWED, True)
    return fn


def is_allowed_in_graph(fn: Any) -> bool:
    return getattr(fn, _ALLOWED, False) is True


def graph_break() -> None:
    """Force a graph break here when called from compiled code; does nothing in eager mode."""
