"""What tracing cannot capture: `Unsupported` and its typed `BreakKind`.

A trace stops with `Unsupported` where it meets something it cannot capture; the tracer
turns it into a graph break (a resume function continues after the instruction), a frame
that runs eagerly, or, under `fullgraph=True`, the user's error. Its kind says which:
`USER_ERROR`, `TRACER_ERROR` and `RAISE` are decided by running the frame eagerly
(`DECIDED_BY_EAGER`); every other kind is a graph break reported with its message and hint.
Kinds are a `StrEnum`, so reports and `explain()` read them as the words they are.
"""

from __future__ import annotations

import dis
import enum
from typing import Any


class BreakKind(enum.StrEnum):
    """Why a trace stopped (a graph break's category in reports)."""

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last_values: list) -> str:
        return name  # the member's value is its name, as the reports print it

    # calls and values the tracer has no rule for
    UNSUPPORTED_CALL = enum.auto()
    UNSUPPORTED_VALUE = enum.auto()
    UNSUPPORTED_ATTRIBUTE = enum.auto()
    UNSUPPORTED_OPERATOR = enum.auto()
    UNSUPPORTED_OPCODE = enum.auto()
    UNSUPPORTED_OP = enum.auto()
    UNSUPPORTED_TENSOR = enum.auto()
    UNSUPPORTED_INDEX = enum.auto()
    UNSUPPORTED_ITERATION = enum.auto()
    UNSUPPORTED_CONTEXT_MANAGER = enum.auto()
    DISABLED_CALLEE = enum.auto()
    AUTOGRAD_CALL = enum.auto()
    JOINT_GRAPH = enum.auto()
    RANDOM_OP = enum.auto()
    UNINITIALIZED_PARAMETER = enum.auto()
    # values of traced tensors needed as Python values
    TENSOR_TO_PYTHON = enum.auto()
    DATA_DEPENDENT_BRANCH = enum.auto()
    DATA_DEPENDENT_OP = enum.auto()
    DYNAMIC_NUMBER = enum.auto()
    # effects the graph cannot hold
    SIDE_EFFECT = enum.auto()
    INPLACE_ON_VIEW = enum.auto()
    INPLACE_ON_TENSOR = enum.auto()
    INPLACE_ON_CONSTANT = enum.auto()
    INPLACE_ON_ALIASED_INPUT = enum.auto()
    INPLACE_NEEDS_AUTOGRAD = enum.auto()
    INPLACE_SHAPE_CHANGE = enum.auto()
    # limits of the translator
    INLINE_TOO_DEEP = enum.auto()
    LOOP_TOO_LONG = enum.auto()
    BREAK_IN_TRY = enum.auto()
    UNBOUND_LOCAL = enum.auto()
    EXPLICIT_BREAK = enum.auto()
    # decided by running the frame eagerly
    USER_ERROR = enum.auto()
    TRACER_ERROR = enum.auto()
    RAISE = enum.auto()


DECIDED_BY_EAGER = frozenset({BreakKind.USER_ERROR, BreakKind.TRACER_ERROR, BreakKind.RAISE})


class Unsupported(Exception):  # noqa: N818 - Dynamo's name for "cannot trace this"
    """Tracing met something it cannot capture; becomes a graph break or a frame outcome.

    kind: why (`BreakKind`); message: what, in the user's terms; hint: what the user can do.
    location: the user's line being traced when it was raised, once known;
    root_instruction: the instruction of the traced frame the break belongs to (a break
    inside an inlined callee belongs to the caller's call instruction).
    """

    def __init__(self, kind: BreakKind, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.hint = hint
        self.location: Any = None
        self.root_instruction: dis.Instruction | None = None


class DataDependentError(Unsupported):
    """A traced tensor's values were needed as a Python value (item(), bool(), ...)."""

    def __init__(self, what: str) -> None:
        super().__init__(BreakKind.TENSOR_TO_PYTHON, f"`{what}` needs a concrete tensor value "
                         "while tracing", "compute it outside the compiled function, or keep it "
                         "a tensor (e.g. torch.where instead of an if)")
