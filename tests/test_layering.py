"""Imports point one way (DESIGN.md): codegen -> trace -> eager; nn, optim, utils -> eager;
distributed -> eager, and nn (DDP), utils (DistributedSampler) -> distributed.

Parses every module's imports (including ones inside functions) and fails on an edge
that goes backwards, and on numba imported outside jitgrad/codegen.

Inside jitgrad/eager the modules form layers (Note [Eager layers] in
jitgrad/eager/tensor_methods.py): a module imports from its own layer and the ones below,
at the top of the module; imports under `if TYPE_CHECKING:` are for annotations only and
are not checked.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "jitgrad"
EAGER = ROOT / "eager"

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

# jitgrad/eager's layers, lowest first (Note [Eager layers]): module paths relative to
# jitgrad/eager; "ops" stands for every module under ops/ not named in a layer of its own
EAGER_LAYERS = [
    ("base", {"dtypes", "devices", "layout", "grad_mode", "symbolic_int", "type_info", "xp",
              "tensor_declarations"}),
    ("node", {"node"}),
    ("tensor", {"tensor"}),
    ("registry", {"ops.registry"}),
    ("views", {"views"}),
    ("ops", {"ops"}),
    ("above ops", {"engine", "function", "gradcheck", "printing", "legacy_types",
                   "xp_tensor"}),
    ("installer", {"tensor_methods", "__init__"}),
]


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


def _eager_name(path: Path) -> str:
    """`ops/registry.py` -> "ops.registry", `__init__.py` -> "__init__"."""
    return ".".join(path.relative_to(EAGER).with_suffix("").parts)


EAGER_MODULES = {_eager_name(path) for path in EAGER.rglob("*.py")}


def _layer(name: str) -> int | None:
    """The index in EAGER_LAYERS of the layer of eager module `name`."""
    for index, (_, modules) in enumerate(EAGER_LAYERS):
        if name in modules:
            return index
    group = name.split(".")[0]
    return next((i for i, (_, modules) in enumerate(EAGER_LAYERS) if group in modules), None)


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING", "typing.TYPE_CHECKING")


def _runtime_imports(statements, in_function: bool = False):
    """(import, whether it runs inside a function) for each import among `statements` and
    the statements they contain, except in the body of an `if TYPE_CHECKING:`."""
    for node in statements:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function
        elif _is_type_checking(node):
            yield from _runtime_imports(node.orelse, in_function)
        else:
            inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            yield from _runtime_imports(ast.iter_child_nodes(node), inside)


def _imports_jitgrad(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "jitgrad" for alias in node.names)
    return node.level > 0 or (node.module or "").split(".")[0] == "jitgrad"


def _eager_targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The eager modules an import names ("__init__" for the package itself);
    `from jitgrad.eager import xp` names xp, not the package."""
    prefix = "jitgrad.eager."
    if isinstance(node, ast.Import):
        modules = [alias.name for alias in node.names]
    elif node.module is None or node.level != 0:
        return []
    else:
        submodules = [f"{node.module}.{alias.name}" for alias in node.names]
        modules = [m for m in submodules if m.removeprefix(prefix) in EAGER_MODULES]
        if len(modules) < len(submodules):
            modules.append(node.module)
    names = ["__init__" if m == "jitgrad.eager" else m.removeprefix(prefix) for m in modules]
    return [name for name in names if name in EAGER_MODULES]


def test_every_eager_module_has_a_layer():
    unplaced = sorted(name for name in EAGER_MODULES if _layer(name) is None)
    assert not unplaced, f"add {unplaced} to a layer of EAGER_LAYERS"


def test_eager_imports_point_down_its_layers():
    """No import (at module level or in a function) from a lower layer of jitgrad/eager to a
    higher one, and no jitgrad import inside a function: one that hides a cycle makes the
    real order invisible, and costs a lookup per call."""
    violations = []
    for path in sorted(EAGER.rglob("*.py")):
        name = _eager_name(path)
        layer = _layer(name)
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, in_function in _runtime_imports(tree.body):
            where = f"jitgrad/eager/{path.relative_to(EAGER)}:{node.lineno}"
            if in_function and _imports_jitgrad(node):
                violations.append(f"{where} imports jitgrad inside a function")
            for target in _eager_targets(node):
                target_layer = _layer(target)
                if layer is not None and target_layer is not None and target_layer > layer:
                    violations.append(
                        f"{where}: {name} (layer {EAGER_LAYERS[layer][0]}) imports {target} "
                        f"(layer {EAGER_LAYERS[target_layer][0]}, higher)")
    assert not violations, "\n".join(violations)
