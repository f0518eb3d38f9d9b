"""`python -m benchmarks` knows every benchmark module and compares the right rows.

Nothing is timed here: the registry is checked against the files, and the summary against
a hand-made table.
"""

import importlib
import os
from pathlib import Path

import pytest

BENCHMARK_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMBA_NUM_THREADS")


@pytest.fixture(scope="module")
def bench():
    """benchmarks.__main__, imported without leaving harness's one-thread settings in the
    environment of the other tests."""
    saved = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    module = importlib.import_module("benchmarks.__main__")
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return module


def test_every_benchmark_module_is_registered(bench):
    modules = {p.stem for p in BENCHMARK_DIR.glob("*.py")} - {"__init__", "__main__", "harness"}
    registered = {name for name, _ in bench.BENCHMARKS}
    assert modules <= registered, f"add {sorted(modules - registered)} to benchmarks.__main__"
    required = {name for name, required in bench.BENCHMARKS if required}
    assert required <= modules


def test_references_match_the_variant_qualifier(bench):
    reference_for = bench.reference_for
    times = {"numpy": 1.0, "torch eager (recording)": 2.0, "torch eager (no grad)": 3.0,
             "torch.compile (eager backend)": 4.0, "torch.compile (inductor)": 5.0}
    assert reference_for("jitgrad eager (recording)", times, "torch eager") == \
        "torch eager (recording)"
    assert reference_for("jitgrad compiled (eager backend)", times, "torch.compile") == \
        "torch.compile (eager backend)"
    assert reference_for("jitgrad compiled (numba)", times, "torch.compile") == \
        "torch.compile (inductor)"
    assert reference_for("jitgrad eager", {"numpy": 1.0}, "torch eager") is None


def test_summary_prints_ratios_of_jitgrad_rows(bench, capsys):
    rows = [("numpy", 10.0), ("jitgrad eager", 25.0), ("jitgrad compiled (numba)", 4.0),
            ("torch eager", 20.0), ("torch.compile (inductor)", 8.0)]
    bench.print_summary([("gelu, 2^18 float32", rows, "us/call")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[-3] == "gelu, 2^18 float32"
    assert lines[-2].split() == ["jitgrad", "eager", "25.00", "us/call", "2.50x", "1.25x",
                                 "3.12x"]
    assert lines[-1].split() == ["jitgrad", "compiled", "(numba)", "4.00", "us/call", "0.40x",
                                 "0.20x", "0.50x"]


def test_a_failing_module_is_reported_and_the_run_fails(bench, monkeypatch, capsys):
    # benchmarks.harness has no main(): the AttributeError stands for any crash
    monkeypatch.setattr(bench, "BENCHMARKS", (("harness", True),))
    assert bench.main(["harness"]) == 1
    printed = capsys.readouterr()
    assert "AttributeError: module 'benchmarks.harness' has no attribute 'main'" in printed.err
    assert "FAILED: benchmarks.harness" in printed.out
