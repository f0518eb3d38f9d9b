"""What compilation did, for people: break reasons, frame outcomes, the explain() report.

Every compile of a frame produces events that the active `ExplainRecorder`s (one per
`jitgrad.explain` call in progress) collect; the same events go to the JITGRAD_LOGS
channels. Messages point at the user's file:line with the source line and carets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from jitgrad import config
from jitgrad.trace.breaks.unsupported import BreakKind


@dataclasses.dataclass
class BreakReason:
    """Why tracing stopped at a user instruction (a graph break, or a frame fallback)."""

    kind: BreakKind
    message: str
    hint: str
    filename: str
    lineno: int
    source_line: str
    col: int | None = None
    end_col: int | None = None

    def __str__(self) -> str:
        lines = [f"jitgrad graph break: {self.kind.lower().replace('_', ' ')}",
                 f"  why:  {self.message}"]
        if self.hint:
            lines.append(f"  fix:  {self.hint}")
        lines.append(f"  at {os.path.basename(self.filename)}:{self.lineno}")
        if self.source_line:
            stripped = self.source_line.lstrip()
            lines.append(f"      {stripped}")
            if self.col is not None and self.end_col is not None and self.end_col > self.col:
                indent = len(self.source_line) - len(stripped)
                lines.append("      " + " " * (self.col - indent) + "^" * (self.end_col - self.col))
        return "\n".join(lines)


@dataclasses.dataclass
class FrameOutcome:
    """How one frame (compiled function) ended up running: `compiled` or `eager` + why."""

    function: str
    outcome: str
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.function}: {self.outcome}" + (f" ({self.reason})" if self.reason else "")


DISABLED_MESSAGE = ("Compilation is disabled (JITGRAD_DISABLE=1): the function ran eagerly "
                    "and nothing was captured")


# the compile phases explain() reports, in pipeline order
PHASES = ("trace", "backend", "joint graph", "codegen", "guards", "numba")


@dataclasses.dataclass
class ExplainOutput:
    """What `jitgrad.explain(fn)(*args)` saw while running `fn` once for real.

    graphs: every Graph compiled during the call; fusion_groups: per graph, the backend's
    fusion groups as printable listings (the numba backend's kernels; empty for eager);
    graph_break_count: real breaks (a frame that ran wholly eagerly is a frame outcome, not
    a break); guards: generated guard source per compiled entry; ops_per_graph:
    call_function nodes per graph; compile_times: seconds per phase (`PHASES`: the backend's
    time includes its joint graph and codegen; numba's is the kernels' first launches);
    disabled: JITGRAD_DISABLE=1 was set, so the call ran eagerly and nothing was compiled.
    """

    graphs: list[Any] = dataclasses.field(default_factory=list)
    break_reasons: list[BreakReason] = dataclasses.field(default_factory=list)
    frame_outcomes: list[FrameOutcome] = dataclasses.field(default_factory=list)
    guards: list[str] = dataclasses.field(default_factory=list)
    recompile_reasons: list[str] = dataclasses.field(default_factory=list)
    fusion_groups: list[list[str]] = dataclasses.field(default_factory=list)
    compile_times: dict[str, float] = dataclasses.field(default_factory=dict)
    result: Any = None
    disabled: bool = False

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def graph_break_count(self) -> int:
        return len(self.break_reasons)

    @property
    def ops_per_graph(self) -> list[int]:
        return [sum(1 for n in g.nodes if n.op == "call_function") for g in self.graphs]

    def __str__(self) -> str:
        if self.disabled:
            return DISABLED_MESSAGE
        lines = [f"Graph count: {self.graph_count}",
                 f"Graph break count: {self.graph_break_count}",
                 f"Op count: {sum(self.ops_per_graph)} ({', '.join(map(str, self.ops_per_graph))})"]
        if self.break_reasons:
            lines.append("Break reasons:")
            lines += ["  " + line for r in self.break_reasons for line in str(r).splitlines()]
        if self.frame_outcomes:
            lines.append("Frame outcomes:")
            lines += [f"  {o}" for o in self.frame_outcomes]
        if self.recompile_reasons:
            lines.append("Recompile reasons:")
            lines += [f"  {r}" for r in self.recompile_reasons]
        for i, graph in enumerate(self.graphs):
            lines.append(f"Graph {i}:")
            lines += ["  " + line for line in str(graph).splitlines()]
        for i, groups in enumerate(self.fusion_groups):
            lines.append(f"Fusion groups of graph {i}:")
            lines += ["  " + line for group in groups for line in str(group).splitlines()]
        for i, guard in enumerate(self.guards):
            lines.append(f"Guards of entry {i}:")
            lines += ["  " + line for line in guard.splitlines()]
        if self.compile_times:
            phases = sorted(self.compile_times, key=lambda k: PHASES.index(k)
                            if k in PHASES else len(PHASES))
            times = ", ".join(f"{k} {self.compile_times[k] * 1e3:.1f} ms" for k in phases)
            lines.append(f"Compile time: {times}")
        return "\n".join(lines)


class _Recorders(threading.local):
    active: list[ExplainOutput] | None = None


_RECORDERS = _Recorders()


def recorders() -> list[ExplainOutput]:
    if _RECORDERS.active is None:
        _RECORDERS.active = []
    return _RECORDERS.active


@contextlib.contextmanager
def recording(output: ExplainOutput | None = None) -> Iterator[ExplainOutput]:
    """Record into `output` (a new ExplainOutput by default) what every compile inside
    the block does: graphs, breaks, recompiles, fusion groups, guards, times."""
    output = ExplainOutput() if output is None else output
    active = recorders()
    active.append(output)
    try:
        yield output
    finally:
        active.remove(output)


def record_graph(graph: Any, fusion_groups: Callable[[], list[str]]) -> None:
    """A compiled graph and the listings of the backend's fusion groups of it (empty for
    "eager"), made by `fusion_groups()` only while an explain() records; a graph without
    ops (a break before any tensor op) is not a graph to the user: not recorded."""
    if not any(node.op == "call_function" for node in graph.nodes):
        return
    listings = fusion_groups() if recorders() else []
    for out in recorders():
        out.graphs.append(graph)
        out.fusion_groups.append(listings)
    config.logger("graph_code").info("%s", graph)


def record_break(reason: BreakReason) -> None:
    for out in recorders():
        out.break_reasons.append(reason)
    config.logger("graph_breaks").info("%s", reason)


def record_outcome(outcome: FrameOutcome) -> None:
    """A frame's outcome, for explain(); the graph_breaks channel logs only frames that
    run eagerly (code left out of the graphs), not every compiled frame."""
    for out in recorders():
        out.frame_outcomes.append(outcome)
    if outcome.outcome != "compiled":
        config.logger("graph_breaks").info("frame outcome: %s", outcome)


def record_guards(guards: Any) -> None:
    """A compiled entry's guards, rendered as text only where recorded or logged."""
    outs = recorders()
    if outs:
        text = str(guards)
        for out in outs:
            out.guards.append(text)
    config.logger("guards").info("%s", guards)


def record_recompile(reason: str) -> None:
    for out in recorders():
        out.recompile_reasons.append(reason)
    config.logger("recompiles").info("%s", reason)


def record_time(phase: str, seconds: float) -> None:
    for out in recorders():
        out.compile_times[phase] = out.compile_times.get(phase, 0.0) + seconds
