"""Every environment switch of jitgrad, read once at import.

JITGRAD_DISABLE=1      every `jitgrad.compile` runs the original function eagerly.
JITGRAD_LOGS=a,b,...   log channels through the `logging` module (silent by default):
                       graph_breaks, recompiles, guards, graph_code, bytecode, output_code,
                       fusion, perf_hints; "all" enables every channel.
JITGRAD_CACHE_DIR      where compiled kernels are cached (used by jitgrad.codegen);
                       default $XDG_CACHE_HOME/jitgrad or ~/.cache/jitgrad.
JITGRAD_CHECK=1|raise  check mode: every compiled graph also runs with eager ops and the first
                       differing node raises CheckError (jitgrad/codegen/check.py);
JITGRAD_CHECK=warn     the same, but warns and continues with eager's values.
JITGRAD_SMALL_GROUPS_AS_NUMPY=0  every fusion group gets a kernel, however small (default 1:
                       Note [Groups too small for a kernel] in jitgrad/codegen/launch_cost.py).
"""

from __future__ import annotations

import logging
import os
import warnings

LOG_CHANNELS = ("graph_breaks", "recompiles", "guards", "graph_code", "bytecode",
                "output_code", "fusion", "perf_hints", "compile_progress")

DISABLE = os.environ.get("JITGRAD_DISABLE", "") not in ("", "0")
LOGS = tuple(c.strip() for c in os.environ.get("JITGRAD_LOGS", "").split(",") if c.strip())
CHECK_ACTIONS = {"1": "raise", "raise": "raise", "warn": "warn"}


def check_action(value: str) -> str | None:
    """The check mode a JITGRAD_CHECK value asks for: "raise", "warn", or None (off);
    an unknown value warns and means "raise"."""
    if value in ("", "0"):
        return None
    action = CHECK_ACTIONS.get(value.strip().lower())
    if action is None:
        warnings.warn(f"JITGRAD_CHECK={value!r}: expected 1, raise or warn; checking with "
                      "raise", UserWarning, stacklevel=2)
        return "raise"
    return action


# None (off), "raise" or "warn"; backend="check" raises unless this is "warn"
CHECK = check_action(os.environ.get("JITGRAD_CHECK", ""))
# default: the user's cache directory (XDG_CACHE_HOME, else ~/.cache), as pip's and numba's
CACHE_DIR = os.environ.get("JITGRAD_CACHE_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "jitgrad")

# what `jitgrad.compile` and `jitgrad.explain` use when no backend is given; "eager" runs
# captured graphs with eager ops (the oracle), e.g. while debugging a compiled function
DEFAULT_BACKEND = "numba"

# Note [Groups too small for a kernel] (jitgrad/codegen/launch_cost.py): a fusion group
# whose numpy ops cost less than a kernel launch runs as those ops; False gives every group
# a kernel (tests/codegen sets it, to test the kernels on small inputs)
SMALL_GROUPS_AS_NUMPY = os.environ.get("JITGRAD_SMALL_GROUPS_AS_NUMPY", "1") != "0"

RECOMPILE_LIMIT = 8  # per code object, as torch.compile
TOTAL_RECOMPILE_LIMIT = 256
# compiled frames running inside one another (recursion through graph breaks: a frame per
# level costs a few Python frames where eager costs one): deeper calls run eagerly, so a
# recursion goes as deep as eager's
MAX_NESTED_FRAMES = 16


def enabled_channels(requested: tuple[str, ...] = LOGS) -> set[str]:
    """The log channels switched on ("all" means every channel). Raises ValueError on typos."""
    channels = set(LOG_CHANNELS) if "all" in requested else set(requested)
    unknown = channels - set(LOG_CHANNELS)
    if unknown:
        raise ValueError(f"JITGRAD_LOGS: unknown channel(s) {sorted(unknown)}; "
                         f"known: {', '.join(LOG_CHANNELS)}, all")
    return channels


def logger(channel: str) -> logging.Logger:
    """The logger of a channel (`jitgrad.<channel>`), at INFO when the channel is on."""
    assert channel in LOG_CHANNELS, f"unknown log channel {channel}"
    return logging.getLogger(f"jitgrad.{channel}")


def configure_logging() -> None:
    """Attach a stderr handler to every channel named in JITGRAD_LOGS (a typo warns)."""
    try:
        channels = enabled_channels()
    except ValueError as err:
        warnings.warn(str(err), UserWarning, stacklevel=2)
        channels = enabled_channels(tuple(c for c in LOGS if c in LOG_CHANNELS or c == "all"))
    for channel in channels:
        log = logger(channel)
        if not log.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter(f"[jitgrad {channel}] %(message)s"))
            log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
