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

Note [Cache repair]: a bad cache costs a warning and a recompile, never a crash or an eager
graph. Each case warns once per process, naming the path and what was wrong:
- a kernel file that does not end with its code (truncated, edited) is rewritten;
- numba's index (`*.nbi`) or data (`*.nbc`) file that fails to load (numba expects only
  OSError there; a truncated pickle raises UnpicklingError or EOFError) is dropped: the
  index is flushed to empty, the kernel compiles and numba saves it afresh; when numba
  cannot write its cache, that kernel is compiled in memory only;
- a cache directory that cannot be created or written (a file in its place, a read-only
  file system, writable by other users) is bypassed: kernels are written to a private
  temporary directory for the rest of the process (removed at exit), and still compile.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from numba.core.caching import Cache as NumbaCache
from numba.core.dispatcher import Dispatcher

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
    another file (the file keeps the header it was first written with). A file that does
    not end with `body` is rewritten, and a directory that cannot be used is replaced by a
    temporary one, each with one warning (Note [Cache repair]).
    """
    directory = directory or cache_dir()
    fallback = _FALLBACK_DIRS.get(directory)
    if fallback is not None:
        return _write_kernel(header, body, fallback)
    try:
        return _write_kernel(header, body, ensure_dir(directory))
    except OSError as err:
        return _write_kernel(header, body, _fallback_dir(directory, err))


def _write_kernel(header: str, body: str, directory: Path) -> Path:
    path = directory / f"{kernel_key(body)}.py"
    if path.exists():
        if _ends_with(path, body):
            return path
        _warn_once(f"jitgrad kernel cache: {path} is corrupt (it is not a header comment and "
                   "the kernel's code: truncated or edited); it is rewritten")
    fd, temp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as file:
            file.write(header + body)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise
    return path


def _ends_with(path: Path, body: str) -> bool:
    """Whether the file is comment lines (its header) followed by `body`."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return False
    header = text[:len(text) - len(body)]
    return text.endswith(body) and all(line.startswith("#") for line in header.splitlines())


# an unusable cache directory -> the temporary directory used instead (Note [Cache repair])
_FALLBACK_DIRS: dict[Path, Path] = {}
_WARNED: set[str] = set()


def _fallback_dir(directory: Path, err: OSError) -> Path:
    fallback = Path(tempfile.mkdtemp(prefix="jitgrad-kernels-"))
    atexit.register(shutil.rmtree, fallback, True)
    _FALLBACK_DIRS[directory] = fallback
    _warn_once(f"jitgrad kernel cache: {directory} cannot be used ({type(err).__name__}: "
               f"{err}); kernels are written to {fallback} for this process instead (point "
               "JITGRAD_CACHE_DIR at a writable directory)")
    return fallback


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def load_kernel_module(path: Path) -> ModuleType:
    """Import the kernel file at `path` as module `jitgrad_kernels.<stem>` (once per process);
    its numba functions repair a corrupt numba cache (Note [Cache repair])."""
    name = f"jitgrad_kernels.{path.stem}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"{path} is not importable"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    for value in vars(module).values():
        cache = getattr(value, "_cache", None) if isinstance(value, Dispatcher) else None
        if isinstance(cache, NumbaCache):  # numba's private slot for a dispatcher's cache
            _repair_on_failure(cache)
    return module


def _repair_on_failure(numba_cache: NumbaCache) -> None:
    """Make `numba_cache` drop an index or data file that fails to load, and compile in
    memory when it cannot save (see Note [Cache repair])."""
    load: Callable[..., Any] = numba_cache.load_overload
    save: Callable[..., Any] = numba_cache.save_overload
    index = numba_cache._cache_file._index_path

    def load_overload(sig: Any, target_context: Any) -> Any:
        try:
            return load(sig, target_context)
        except Exception as err:  # numba only expects OSError from its cache files
            _warn_once(f"jitgrad kernel cache: numba's cache {_failing_file(numba_cache)} "
                       f"cannot be loaded ({type(err).__name__}: {err}); it is rebuilt")
            try:
                numba_cache.flush()  # an empty index: compile, then save afresh
            except OSError:
                numba_cache.disable()
            return None

    def save_overload(sig: Any, data: Any) -> None:
        try:
            save(sig, data)
        except OSError as err:
            _warn_once(f"jitgrad kernel cache: numba's cache {index} cannot be written "
                       f"({type(err).__name__}: {err}); the kernel is compiled in memory")
            numba_cache.disable()

    numba_cache.load_overload = load_overload  # type: ignore[method-assign]
    numba_cache.save_overload = save_overload  # type: ignore[method-assign]


def _failing_file(numba_cache: NumbaCache) -> str:
    """The index file if it does not load, else the data files it lists."""
    cache_file = numba_cache._cache_file
    try:
        overloads = cache_file._load_index()
    except Exception:  # what numba's own load raised: any unpickling error
        return cache_file._index_path
    return ", ".join(cache_file._data_path(n) for n in overloads.values()) or \
        cache_file._index_path
