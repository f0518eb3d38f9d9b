"""Count how many files of public PyTorch programs use each torch API name.

    python tools/torch_api/count_usage.py docs/torch_api/usage.tsv REPO_DIR [REPO_DIR ...]

Each REPO_DIR is a checkout of one public repository of small PyTorch programs (tutorials,
courses, examples). Every `.py` file and the code cells of every `.ipynb` notebook are parsed
with `ast`; a file that does not parse is skipped. How a use is counted:

- imports are resolved: `import torch.nn as nn`, `from torch.nn import functional as F`,
  `from torch.optim import Adam` bind local names to torch paths;
- an attribute chain that resolves to a listed torch name (`torch.cat`, `nn.LSTM`,
  `F.relu`, `nn.utils.rnn.pad_sequence`, a bare `Adam`) counts for that name;
- a method call `x.name(...)` on anything that does not resolve to a torch module counts for
  `torch.Tensor.name` when that is a listed Tensor method, and `x.name` for a listed Tensor
  property (`.shape`, `.grad`); the receiver's type is unknown, so numpy's `.reshape` counts
  too: Tensor rows are an upper bound. Method names that str, list, dict, set or tuple also
  have (`split`, `index`, `copy`, `values`, ...), and `name`, which most objects have, are
  not counted as Tensor uses at all;
- a name counts once per file: the figure is the number of files using it, plus the number
  of repositories, so one long file cannot dominate.

Output lines: `path<TAB>files<TAB>repositories`, most used first; a header line names the
repositories counted.
"""

from __future__ import annotations

import ast
import json
import sys
from collections import Counter
from pathlib import Path

NAMES_FILE = Path(__file__).resolve().parents[2] / "docs" / "torch_api" / "torch_names.tsv"
AMBIGUOUS = frozenset({"name", *(name for builtin in (str, list, dict, set, tuple)
                                 for name in dir(builtin))})


def load_names(path: Path = NAMES_FILE) -> dict[str, str]:
    """torch path -> kind, from the file dump_names.py writes."""
    rows = (line.split("\t") for line in path.read_text().splitlines()
            if line and not line.startswith("#"))
    return {name: kind for name, kind in rows}


def notebook_source(path: Path) -> str:
    """The code cells of a notebook, with IPython magics and shell lines dropped."""
    cells = json.loads(path.read_text(errors="replace")).get("cells", [])
    lines = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else source
        lines += [line for line in text.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> torch path for every import of torch or a torch submodule or name."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch" or a.name.startswith("torch."):
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else "torch"
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "torch" or node.module.startswith("torch."):
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def chain_path(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`F.relu` -> `torch.nn.functional.relu` when the chain starts at a torch alias."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


def names_used(tree: ast.AST, names: dict[str, str]) -> set[str]:
    aliases = import_aliases(tree)
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name | ast.Attribute):
            path = chain_path(node, aliases)
            if path in names:
                used.add(path)
                continue
            if path is None and isinstance(node, ast.Attribute):
                method = f"torch.Tensor.{node.attr}"
                if method in names and node.attr not in AMBIGUOUS:
                    used.add(method)
    return used


def file_trees(repo: Path):
    for path in sorted(repo.rglob("*")):
        if path.suffix not in (".py", ".ipynb") or not path.is_file():
            continue
        try:
            source = notebook_source(path) if path.suffix == ".ipynb" else \
                path.read_text(errors="replace")
            yield ast.parse(source)
        except (SyntaxError, ValueError, json.JSONDecodeError):
            continue


def count(repos: list[Path], names: dict[str, str]) -> tuple[Counter, Counter, int]:
    files, repositories, n_files = Counter(), Counter(), 0
    for repo in repos:
        in_repo = set()
        for tree in file_trees(repo):
            used = names_used(tree, names)
            if used:
                n_files += 1
            files.update(used)
            in_repo |= used
        repositories.update(in_repo)
    return files, repositories, n_files


def main(out_path: str, repo_dirs: list[str]) -> None:
    names = load_names()
    repos = [Path(d) for d in repo_dirs]
    files, repositories, n_files = count(repos, names)
    header = (f"# files using each torch name, of {n_files} files that use torch in "
              f"{len(repos)} repositories: " + ", ".join(r.name for r in repos))
    rows = sorted(files, key=lambda n: (-files[n], -repositories[n], n))
    lines = [header] + [f"{n}\t{files[n]}\t{repositories[n]}" for n in rows]
    Path(out_path).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
