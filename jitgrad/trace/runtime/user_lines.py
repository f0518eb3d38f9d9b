"""Errors raised inside generated code, re-raised at the user's line ("from user code").

Note [Errors at the user's line]: a graph's forward (`<jitgrad graph forward_3>`), the
numba backend's wrapper (a GraphModule too), an entry's runner (`<jitgrad runner step>`)
and a compiled backward run after the user's frame is gone, so an error raised in them
(an index out of range in an extern, an in-place write into a leaf that requires grad, a
second backward) would point at generated lines. Each generated file registers the
user's `SourceLocation` of each of its lines: the node a graph line computes (a backward
node carries the location of the forward op it differentiates), the instruction a runner
line replays (a write-back, the native instruction at a graph break). When an exception
leaves a runner or a compiled backward, `add_user_location` walks its traceback to the
innermost frame that is generated or user code. If that frame is generated, the same
exception object (so the class eager raises) gets a section

    from user code:
      File "train.py", line 12, in step
        y = x[idx]
            ~^^^^^

appended to its message (to `args[0]` of a builtin exception whose message is that
string, else as a PEP 678 note), once: an outer runner re-raising it keeps the innermost
location. If it is user code (a function called at a graph break and run eagerly), the
traceback already ends at the user's line and nothing is added.
"""

from __future__ import annotations

import sysconfig
import types
import weakref
from collections.abc import Sequence
from pathlib import Path

from jitgrad import config
from jitgrad.trace.ir.graph import SourceLocation

LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib",
                                                           "platlib")})
JITGRAD_DIR = str(Path(__file__).resolve().parents[2])  # jitgrad/trace/runtime/ -> jitgrad/
_HEADER = "\n\nfrom user code:\n"

# generated file name -> the user's location of each line (index lineno - 1)
_LOCATIONS: dict[str, tuple[SourceLocation | None, ...]] = {}


def is_user_file(filename: str) -> bool:
    """A real source file outside the stdlib, site-packages, jitgrad and its kernel cache."""
    return not filename.startswith(("<", *LIBRARY_DIRS, JITGRAD_DIR, config.CACHE_DIR))


def register(filename: str, locations: Sequence[SourceLocation | None], owner: object) -> None:
    """Record the user's location of each line of generated file `filename` while the
    function `owner` made from it lives."""
    _LOCATIONS[filename] = tuple(locations)
    weakref.finalize(owner, _LOCATIONS.pop, filename, None)


def add_user_location(err: BaseException) -> None:
    """Append the user's line of the innermost generated frame to `err` (see the Note)."""
    if "_jitgrad_user_location" in vars(err):
        return
    location = innermost_location(err.__traceback__)
    err._jitgrad_user_location = location  # type: ignore[attr-defined]
    if location is None:
        return
    section = _HEADER + format_location(location)
    if _message_is_args0(err):
        err.args = (err.args[0] + section,)
    else:
        err.add_note(section.lstrip("\n"))


def _message_is_args0(err: BaseException) -> bool:
    """Whether the message can be extended in `args[0]`: a builtin exception whose `str()` is
    its one string argument (not KeyError's repr, not StopIteration's value, not a user's
    exception class, whose args the user's code may read)."""
    kind = type(err)
    return kind.__module__ == "builtins" and kind.__str__ is BaseException.__str__ and \
        not issubclass(kind, (StopIteration, StopAsyncIteration)) and \
        len(err.args) == 1 and isinstance(err.args[0], str)


def innermost_location(tb: types.TracebackType | None) -> SourceLocation | None:
    """The location of the innermost generated frame of `tb`, unless user code is deeper."""
    location = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        lines = _LOCATIONS.get(filename)
        if lines is not None:
            index = tb.tb_lineno - 1
            location = lines[index] if 0 <= index < len(lines) else None
        elif is_user_file(filename):
            location = None
        tb = tb.tb_next
    return location


def format_location(location: SourceLocation) -> str:
    """`  File "...", line N, in f` and the line's text with carets, as Python prints."""
    head = f'  File "{location.filename}", line {location.lineno}'
    lines = [head + (f", in {location.function}" if location.function else "")]
    stripped = location.text.lstrip()
    if stripped:
        lines.append(f"    {stripped}")
        col, end = location.col, location.end_col
        if col is not None and end is not None and end > col:
            indent = len(location.text) - len(stripped)
            lines.append("    " + " " * (col - indent) + "^" * (end - col))
    return "\n".join(lines)
