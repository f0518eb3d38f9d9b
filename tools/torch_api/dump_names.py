"""Write the public torch API names that the coverage inventory is built from.

Run it once per torch release, with torch installed in the interpreter that runs it (never a
jitgrad dependency):

    python tools/torch_api/dump_names.py docs/torch_api/torch_names.tsv

Each line is `path<TAB>kind`: a public name (no leading underscore) of one of NAMESPACES
whose value is a function, class or other callable (`kind` is function, class or callable),
and for `torch.Tensor` also its public properties (`property`). Submodules and constants
(dtypes, `torch.pi`) are not listed: they are not calls a program makes.
"""

from __future__ import annotations

import importlib
import inspect
import sys

NAMESPACES = (
    "torch", "torch.Tensor", "torch.nn", "torch.nn.functional", "torch.nn.init",
    "torch.nn.utils", "torch.nn.utils.rnn", "torch.optim", "torch.optim.lr_scheduler",
    "torch.utils.data", "torch.autograd", "torch.linalg", "torch.distributions",
    "torch.cuda", "torch.distributed", "torch.onnx",
)


def namespace_object(path: str) -> object:
    """The module `path`, or the class `torch.Tensor`."""
    if path == "torch.Tensor":
        return importlib.import_module("torch").Tensor
    return importlib.import_module(path)


def kind_of(owner: object, name: str) -> str | None:
    """function / class / callable / property, or None for what is not listed."""
    if inspect.isclass(owner):
        raw = inspect.getattr_static(owner, name, None)
        if isinstance(raw, property) or type(raw).__name__ == "getset_descriptor":
            return "property"
    value = getattr(owner, name)
    if inspect.ismodule(value):
        return None
    if inspect.isclass(value):
        return "class"
    if inspect.isfunction(value) or inspect.isbuiltin(value) or inspect.ismethoddescriptor(value):
        return "function"
    return "callable" if callable(value) else None


def public_names(path: str) -> list[tuple[str, str]]:
    owner = namespace_object(path)
    rows = []
    for name in sorted(dir(owner)):
        if name.startswith("_"):
            continue
        try:
            kind = kind_of(owner, name)
        except AttributeError:  # a lazy attribute that fails on this build
            continue
        if kind is not None:
            rows.append((f"{path}.{name}", kind))
    return rows


def main(out_path: str) -> None:
    import torch

    lines = [f"# public torch {torch.__version__} names: path<TAB>kind "
             f"(tools/torch_api/dump_names.py)"]
    for path in NAMESPACES:
        lines += [f"{name}\t{kind}" for name, kind in public_names(path)]
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
