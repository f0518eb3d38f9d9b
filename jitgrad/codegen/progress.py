"""What compiling kernels costs while a compiled function first runs: the "numba" phase of
`explain()` and a status line for long compiles.

Note [Compile status]: numba compiles a kernel at its first launch, so a graph's kernels
compile while its first call runs (one after another, each ~0.5 s cold; a disk-cache hit
costs milliseconds). `first_call(graph)` brackets that call and `kernel_launched(kernel,
seconds)` reports each kernel's first launch. Their times go to `explain()` as the
"numba" phase. When a first call has spent more than STATUS_AFTER seconds, one status
line says how far it is: on a terminal (stderr a tty) it is rewritten in place after
each kernel (`jitgrad: compiling forward_3 (train.py:12): kernel 7 of 18, 4.2 s`) and
ends with the total when the call returns; otherwise the same line goes once, at the end,
to the `compile_progress` log channel. A short compile prints nothing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jitgrad import config
from jitgrad.trace.runtime import report

STATUS_AFTER = 1.0  # seconds of compiling before the status line appears

_LOG = config.logger("compile_progress")


class _FirstCall:
    """The first call of one compiled graph: its kernels launched so far."""

    def __init__(self, name: str, total: int) -> None:
        self.name = name
        self.total = total
        self.launched = 0
        self.start = time.perf_counter()
        self.shown = False

    def status(self) -> str:
        elapsed = time.perf_counter() - self.start
        return f"jitgrad: compiling {self.name}: kernel {self.launched} of {self.total}, " \
               f"{elapsed:.1f} s"


_CURRENT: list[_FirstCall] = []  # nested first calls (a graph calling back into another)


@contextmanager
def first_call(name: str, total: int) -> Iterator[None]:
    """Bracket the first call of a compiled graph named `name` with `total` kernels."""
    call = _FirstCall(name, total)
    _CURRENT.append(call)
    try:
        yield
    finally:
        _CURRENT.pop()
        _finish(call)


def kernel_launched(seconds: float) -> None:
    """A kernel's first launch took `seconds` (numba's compile or cache load included)."""
    report.record_time("numba", seconds)
    if not _CURRENT:
        return
    call = _CURRENT[-1]
    call.launched += 1
    if time.perf_counter() - call.start > STATUS_AFTER and _on_terminal():
        sys.stderr.write("\r" + call.status())
        sys.stderr.flush()
        call.shown = True


def _finish(call: _FirstCall) -> None:
    if call.shown:
        sys.stderr.write("\r" + call.status() + " (done)\n")
        sys.stderr.flush()
    elif time.perf_counter() - call.start > STATUS_AFTER and call.launched:
        _LOG.info("%s (done)", call.status())


def _on_terminal() -> bool:
    stream: Any = sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())
