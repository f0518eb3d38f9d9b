"""The kernel disk cache: content-hashed names, atomic user-only writes, concurrent compiles."""

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from jitgrad.codegen import cache

ROOT = Path(__file__).resolve().parents[2]


def test_key_changes_with_the_code_and_not_with_the_header(tmp_path):
    first = cache.write_kernel("# from a.py:1\n", "X = 1\n", tmp_path)
    again = cache.write_kernel("# from b.py:7\n", "X = 1\n", tmp_path)
    other = cache.write_kernel("# from a.py:1\n", "X = 2\n", tmp_path)
    assert first == again != other
    assert first.read_text() == "# from a.py:1\nX = 1\n"
    assert cache.load_kernel_module(other).X == 2


def test_key_covers_the_math_library_kernels_call(monkeypatch):
    # numba's cache=True does not see a change in mathlib's functions: the file name must
    mathlib_source = (ROOT / "jitgrad" / "codegen" / "mathlib.py").read_bytes()
    assert hashlib.sha256(mathlib_source).hexdigest() in cache.environment_key()
    before = cache.kernel_key("X = 1\n")
    cache.environment_key.cache_clear()
    real_read_bytes = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: real_read_bytes(self) + b"# edited\n"
                        if self.name == "mathlib.py" else real_read_bytes(self))
    try:
        assert cache.kernel_key("X = 1\n") != before
    finally:
        monkeypatch.undo()
        cache.environment_key.cache_clear()
    assert cache.kernel_key("X = 1\n") == before


def test_directory_is_user_only_and_no_temporary_files_remain(tmp_path):
    directory = tmp_path / "deep" / "kernels"
    cache.write_kernel("", "Y = 3\n", directory)
    assert directory.stat().st_mode & 0o777 == 0o700
    assert [p.suffix for p in directory.iterdir()] == [".py"]


def test_a_directory_others_can_write_is_refused(tmp_path):
    os.chmod(tmp_path, 0o777)
    try:
        cache.ensure_dir(tmp_path)
    except PermissionError as err:
        assert "writable by other users" in str(err)
    else:
        raise AssertionError("a world-writable cache directory was accepted")


COMPILE_ONE = textwrap.dedent("""
    import numpy as np, jitgrad as jg
    f = jg.compile(lambda x: (x * 3.0).exp(), backend="numba")
    print(float(f(jg.tensor(np.zeros(4, dtype=np.float32))).sum()))
""")


def test_two_processes_compiling_the_same_kernel_both_succeed(tmp_path):
    env = dict(os.environ, JITGRAD_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", COMPILE_ONE], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert [out.strip() for out, _ in outputs] == ["4.0", "4.0"]
    assert len(list((tmp_path / "kernels").glob("k_*.py"))) == 1
