"""Graph breaks carry a typed kind: every `Unsupported` the tracer raises names a BreakKind."""

import ast
import pathlib

import jitgrad
from jitgrad.trace.breaks.unsupported import DECIDED_BY_EAGER, BreakKind, Unsupported

ROOT = pathlib.Path(jitgrad.__file__).parent


def _kind_expressions():
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Unsupported":
                yield path.relative_to(ROOT), node.lineno, node.args[0]


def _names_a_kind(expr) -> bool:
    if isinstance(expr, ast.IfExp):
        return _names_a_kind(expr.body) and _names_a_kind(expr.orelse)
    if isinstance(expr, ast.Attribute) and getattr(expr.value, "id", None) == "BreakKind":
        return expr.attr in BreakKind.__members__
    return isinstance(expr, ast.Attribute) and expr.attr == "kind"  # an error's own kind


def test_every_unsupported_names_a_break_kind():
    found = list(_kind_expressions())
    assert len(found) > 100  # the scan sees the tracer's raises
    loose = [f"{path}:{line}" for path, line, expr in found if not _names_a_kind(expr)]
    assert loose == []


def test_a_kind_reads_as_its_name_in_reports():
    assert BreakKind.EXPLICIT_BREAK == "EXPLICIT_BREAK"
    assert all(kind.value == name for name, kind in BreakKind.__members__.items())
    err = Unsupported(BreakKind.DATA_DEPENDENT_BRANCH, "if on a traced tensor", "use torch.where")
    assert (err.kind, err.location, err.root_instruction) == (
        BreakKind.DATA_DEPENDENT_BRANCH, None, None)
    assert DECIDED_BY_EAGER == {BreakKind.USER_ERROR, BreakKind.TRACER_ERROR, BreakKind.RAISE}


def test_a_graph_break_reports_its_kind():
    def f(x):
        y = x + 1
        jitgrad.graph_break()
        return y * 2

    report = jitgrad.explain(f)(jitgrad.ones(2))
    assert [r.kind for r in report.break_reasons] == [BreakKind.EXPLICIT_BREAK]
    assert str(report.break_reasons[0]).startswith("jitgrad graph break: explicit break\n")
