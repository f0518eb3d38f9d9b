"""The examples run end to end at a small size (skipped without their extra dependencies)."""

import importlib.util
import re
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("tqdm")
pytest.importorskip("matplotlib")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_train_digits_learns_in_three_epochs(tmp_path, capsys):
    train_digits = _load("train_digits")
    accuracy = train_digits.main(["--epochs", "3", "--seed", "0", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    epochs = re.findall(r"epoch +(\d+) +train loss ([0-9.]+)", printed)
    assert [int(e) for e, _ in epochs] == [1, 2, 3]
    losses = [float(loss) for _, loss in epochs]
    assert losses[0] > losses[1] > losses[2]
    reported = float(re.search(r"held-out accuracy: ([0-9.]+)% \((\d+)/359\)", printed).group(1))
    assert reported == pytest.approx(100 * accuracy, abs=0.01)
    assert accuracy > 0.85  # 93% with seed 0; 10% would be chance
    assert (tmp_path / "train_digits_loss.png").stat().st_size > 1000
