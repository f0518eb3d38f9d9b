"""`python -m jitgrad.run script.py [args...]`: run an unmodified PyTorch script on jitgrad.

The script runs as `python script.py args...` would run it (`__name__ == "__main__"`,
`sys.argv == ["script.py", *args]`, the script's directory first on `sys.path`), with
the import swap of `jitgrad.patch_torch()` installed first, so its `import torch`,
`import torch.nn as nn`, `from torch.utils.data import DataLoader`, ... get jitgrad.
A torch API jitgrad lacks raises an error naming it and the script's line that used it
(see Note [Missing torch APIs] in jitgrad/_patch.py).
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence
from typing import Any

from jitgrad._patch import is_patched, patch_torch, unpatch_torch

USAGE = "usage: python -m jitgrad.run script.py [args...]"


def run_script(path: str, args: Sequence[str] = ()) -> dict[str, Any]:
    """Run the file at `path` as `__main__` with the import swap; return its globals.

    sys.argv, sys.path and the swap are restored afterwards (the swap stays if it was
    already installed), so a test can run several scripts in one process.
    Raises whatever the script raises (SystemExit included).
    """
    saved_argv, saved_path = sys.argv, list(sys.path)
    was_patched = is_patched()
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    patch_torch()
    try:
        return runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
        if not was_patched:
            unpatch_torch()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m jitgrad.run`; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    path, *args = argv
    if not os.path.isfile(path):
        print(f"jitgrad.run: can't open file {path!r}: no such file\n{USAGE}", file=sys.stderr)
        return 2
    sys.argv = [path, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(path))  # `python -m` put the cwd there
    patch_torch()
    runpy.run_path(path, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
