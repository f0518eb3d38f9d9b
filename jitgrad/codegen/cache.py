"""The disk cache of kernel sources: real files named by content hash, imported with importlib.

Note [Kernel cache]: numba's `cache=True` cannot cache functions made by `exec`; it needs
a real file, and keys its own cache (`__pycache__/*.nbi`, `*.nbc` next to the file) by
that file's path and modification time. So each kernel source is written once to
`<cache dir>/kernels/k_<hash>.py`, where the hash covers the code (not its header
comment), the numba and jitgrad versions, the CPU (name and features) and the source of
jitgrad/codegen/mathlib.py (kernels call its functions, and numba's cache does not notice
a change in a called function): a change to any of them is a new file, never a stale
compile. Files are written to a temporary
name and `os.replace`d into place (atomic on POSIX), and never rewritten when present
(rewriting would change the mtime and invalidate numba's cache), so two processes
compiling the same kernel at once both succeed: both write identical bytes, the last
rename wins, and each imports a complete file. The directory is created user-only
(0o700): code imported from it runs with the user's rights.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from jitgrad import config

KERNEL_SUBDIR = "kernels"


def cache_dir() -> Path:
    """The kernel directory under JITGRAD_CACHE_DIR (default: the user's cache directory)."""
    return Path(config.CACHE_DIR) / KERNEL_SUBDIR


@functools.cache
def environment_key() -> str:
    """What else a compiled kernel depends on: the numba and jitgrad versions, the CPU and
    the math library the kernels call (mathlib.py's source hash)."""
    import llvmlite.binding as llvm  # a dependency of numba; only loaded to name the CPU

    mathlib_source = Path(__file__).with_name("mathlib.py").read_bytes()
    parts = [
        "numba " + importlib.metadata.version("numba"),
        "jitgrad " + _jitgrad_version(),
        "cpu " + llvm.get_host_cpu_name() + " " + llvm.get_host_cpu_features().flatten(),
        "mathlib " + hashlib.sha256(mathlib_source).hexdigest(),
    ]
    return "\n".join(parts)


def _jitgrad_version() -> str:
    try:
        return importlib.metadata.version("jitgrad")
    except importlib.metadata.PackageNotFoundError:  # a source checkout, not installed
        return "source"


def kernel_key(source: str) -> str:
    """The file stem of a kernel source: `k_` and 32 hex digits of its hash with the environment."""
    digest = hashlib.sha256((environment_key() + "\n" + source).encode()).hexdigest()
    return f"k_{digest[:32]}"


def ensure_dir(path: Path) -> Path:
    """Create `path` (and parents) user-only if missing; returns it.

    Raises: PermissionError if it exists and other users may write to it (importing code
    from such a directory would run whatever they put there).
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = path.stat().st_mode
    if mode & 0o022:
        raise PermissionError(
            f"jitgrad kernel cache {path} is writable by other users (mode {oct(mode & 0o777)}); "
            "run `chmod 700` on it or point JITGRAD_CACHE_DIR elsewhere")
    return path


def write_kernel(header: str, body: str, directory: Path | None = None) -> Path:
    """The file holding kernel code `body`, written atomically (after `header`) if missing.

    The file name is `kernel_key(body)`: a header naming other user lines does not make
    another file (the file keeps the header it was first written with).
    """
    directory = ensure_dir(directory or cache_dir())
    path = directory / f"{kernel_key(body)}.py"
    if path.exists():
        return path
    fd, temp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as file:
            file.write(header + body)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise
    return path


def load_kernel_module(path: Path) -> ModuleType:
    """Import the kernel file at `path` as module `jitgrad_kernels.<stem>` (once per process)."""
    name = f"jitgrad_kernels.{path.stem}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"{path} is not importable"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
