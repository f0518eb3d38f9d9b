"""The kernel cache repairs itself (Note [Cache repair] in jitgrad/codegen/cache.py).

Each case runs a small compiled program in a fresh process with its own JITGRAD_CACHE_DIR:
once to fill the cache, then with the cache damaged. The damaged run must print exactly
one warning naming the damaged path, compute the right values with a numba-compiled
kernel (not eager ops), and leave a cache that the next run uses without a warning.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent("""
    import warnings
    import numpy as np
    import jitgrad as jg
    from jitgrad.codegen.backend import numba_backend

    warnings.simplefilter("always")
    produced = []

    def backend(gm, example_inputs):
        produced.append(numba_backend(gm, example_inputs))
        return produced[-1]

    f = jg.compile(lambda x: (x * 3.0).exp(), backend=backend)
    data = np.linspace(0.0, 1.0, 5, dtype=np.float32)
    np.testing.assert_allclose(f(jg.tensor(data)).numpy(), np.exp(data * np.float32(3.0)),
                               rtol=1e-6)
    graph = produced[0]
    kernel = graph.kernels[0]
    assert graph.forward is graph.wrapper.forward, "the graph fell back to eager ops"
    assert len(graph.kernels) == 1 and kernel._flat.signatures, "no compiled kernel"
    print("kernel", kernel.path)
    print("cache hits", sum(kernel._flat.stats.cache_hits.values()))
""")

# simulates a read-only file system under the cache directory for the process's own
# writes (os.open with a write flag, os.mkdir), as EROFS would; root ignores chmod
READ_ONLY = textwrap.dedent("""
    import errno, os
    _root = os.environ["JITGRAD_CACHE_DIR"]
    _open, _mkdir = os.open, os.mkdir

    def _under_root(path):
        return os.path.abspath(os.fspath(path)).startswith(_root)

    def read_only_open(path, flags, *args, **kwargs):
        if _under_root(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(path))
        return _open(path, flags, *args, **kwargs)

    def read_only_mkdir(path, *args, **kwargs):
        if _under_root(path):
            if os.path.exists(path):
                raise FileExistsError(errno.EEXIST, "File exists", os.fspath(path))
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(path))
        return _mkdir(path, *args, **kwargs)

    os.open, os.mkdir = read_only_open, read_only_mkdir
""")


def run(cache_dir, prelude=""):
    env = dict(os.environ, JITGRAD_CACHE_DIR=str(cache_dir), PYTHONPATH=str(ROOT))
    env.pop("JITGRAD_DISABLE", None)
    done = subprocess.run([sys.executable, "-c", prelude + PROGRAM], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "jitgrad kernel cache:" in line]
    kernel = Path(done.stdout.split("kernel ", 1)[1].split("\n", 1)[0])
    hits = int(done.stdout.split("cache hits ", 1)[1].split()[0])
    return warned, kernel, hits


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def damaged(cache_dir, pattern):
    paths = sorted((cache_dir / "kernels").glob(pattern))
    assert len(paths) == 1, paths
    return paths[0]


@pytest.mark.parametrize("pattern", ["__pycache__/*.nbi", "__pycache__/*.nbc", "k_*.py"],
                         ids=["index", "data", "source"])
def test_a_truncated_cache_file_is_rebuilt_with_one_warning(tmp_path, pattern):
    assert run(tmp_path)[0] == []
    path = damaged(tmp_path, pattern)
    truncate(path)
    warned, kernel, hits = run(tmp_path)
    assert len(warned) == 1 and str(path) in warned[0], warned
    assert kernel.parent == tmp_path / "kernels"
    assert hits == 0 or pattern == "k_*.py"  # a rewritten source is byte-identical
    assert run(tmp_path)[0:3:2] == ([], 1)  # repaired: the next run loads numba's cache


def test_garbage_in_the_index_is_rebuilt_with_one_warning(tmp_path):
    run(tmp_path)
    path = damaged(tmp_path, "__pycache__/*.nbi")
    path.write_bytes(b"\x80\x04not a pickle at all")
    warned, _, hits = run(tmp_path)
    assert len(warned) == 1 and str(path) in warned[0] and hits == 0, warned
    assert run(tmp_path)[0:3:2] == ([], 1)


def test_a_file_in_place_of_the_cache_directory_is_bypassed_with_one_warning(tmp_path):
    not_a_directory = tmp_path / "cache"
    not_a_directory.write_text("a file, not a directory\n")
    warned, kernel, _ = run(not_a_directory)
    assert len(warned) == 1 and f"{not_a_directory}/kernels cannot be used" in warned[0], warned
    assert "NotADirectoryError" in warned[0] or "FileExistsError" in warned[0]
    assert not kernel.is_relative_to(not_a_directory) and not kernel.exists()  # removed at exit
    assert not_a_directory.read_text() == "a file, not a directory\n"


def test_a_read_only_cache_directory_is_bypassed_with_one_warning(tmp_path):
    (tmp_path / "kernels").mkdir(mode=0o700)
    warned, kernel, _ = run(tmp_path, READ_ONLY)
    assert len(warned) == 1 and f"{tmp_path}/kernels cannot be used" in warned[0], warned
    assert "Read-only file system" in warned[0]
    assert not kernel.is_relative_to(tmp_path)
    assert list((tmp_path / "kernels").iterdir()) == []
