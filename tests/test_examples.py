"""The examples run end to end at a small size in a subprocess, and print figures that hold.

Skipped without the `examples` extra (scikit-learn, tqdm, matplotlib, names).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("tqdm")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parent.parent


def run_example(name: str, *args: str) -> str:
    """stdout of `python examples/<name>.py *args`, run from the repository root."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, str(ROOT / "examples" / f"{name}.py"), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_train_digits_eager_and_compiled_agree(tmp_path):
    printed = run_example("train_digits", "--epochs", "3", "--seed", "0", "--out", str(tmp_path))
    accuracy = {mode: (float(pct), int(correct)) for mode, pct, correct in re.findall(
        r"(eager|compiled) held-out accuracy: ([0-9.]+)% \((\d+)/359\)", printed)}
    assert set(accuracy) == {"eager", "compiled"}
    for pct, correct in accuracy.values():
        assert pct == pytest.approx(100 * correct / 359, abs=0.01)
        assert pct > 85  # 92.2% with seed 0 after 3 epochs; 10% would be chance
    assert abs(accuracy["eager"][0] - accuracy["compiled"][0]) <= 1.0
    steps = re.findall(r"^ +(\d+) +([0-9.]+) +([0-9.]+) +[0-9.e+-]+$", printed, re.MULTILINE)
    assert [int(s) for s, _, _ in steps] == list(range(1, 21))
    eager_losses = [float(e) for _, e, _ in steps]
    assert eager_losses[0] == pytest.approx(2.33, abs=0.05)  # about log(10) at the start
    assert eager_losses[-1] < 0.8 * eager_losses[0]
    for _, eager, compiled in steps:
        assert float(compiled) == pytest.approx(float(eager), rel=1e-4)
    max_diff = float(re.search(r"max relative difference over the first 20 steps: (\S+)",
                               printed).group(1))
    assert max_diff < 1e-4
    assert re.search(r"graphs: [1-9]\d*, graph breaks: \d+", printed)
    assert re.search(r"ms per step \(median\) +\d+\.\d+ +\d+\.\d+", printed)
    assert (tmp_path / "train_digits_loss.png").stat().st_size > 1000


def test_train_digits_compiled_only(tmp_path):
    printed = run_example("train_digits", "--epochs", "1", "--compile", "--out", str(tmp_path))
    assert "compiled held-out accuracy" in printed
    assert "eager held-out accuracy" not in printed
    assert "What jitgrad.compile captured" in printed
