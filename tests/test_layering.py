"""Imports point one way (DESIGN.md): codegen -> trace -> eager; nn, optim, utils -> eager;
distributed -> eager, and nn (DDP), utils (DistributedSampler) -> distributed.

Parses every module's imports (including ones inside functions) and fails on an edge
that goes backwards, and on numba imported outside jitgrad/codegen.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "jitgrad"

# package -> jitgrad packages it must not import
FORBIDDEN = {
    "eager": {"trace", "codegen", "nn", "optim", "utils", "compile"},
    "trace": {"codegen", "nn", "optim", "utils"},
    "nn": {"trace", "codegen", "optim"},
    "optim": {"trace", "codegen", "nn"},
    "utils": {"trace", "codegen", "nn", "optim"},
    "distributed": {"trace", "codegen", "nn", "optim", "utils", "compile"},
    "distributions": {"trace", "codegen", "nn", "optim", "utils", "compile"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            if node.module == "jitgrad":
                found += [(node.lineno, f"jitgrad.{alias.name}") for alias in node.names]
    return found


def test_imports_point_one_way():
    violations = []
    for path in ROOT.rglob("*.py"):
        package = path.relative_to(ROOT).parts[0].removesuffix(".py")
        for lineno, module in _imports(path):
            parts = module.split(".")
            if parts[0] == "numba" and package != "codegen":
                violations.append(f"{path.relative_to(ROOT)}:{lineno} imports numba")
            if parts[0] == "jitgrad" and len(parts) > 1 and parts[1] in FORBIDDEN.get(package, ()):
                violations.append(f"{path.relative_to(ROOT)}:{lineno} imports {module}")
    assert not violations, "\n".join(violations)
