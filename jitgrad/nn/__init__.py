"""`jitgrad.nn` (being written)."""

from jitgrad.nn import functional  # noqa: F401
