"""Train an MLP on scikit-learn's handwritten digits with jitgrad, written as a PyTorch program.

The 1797 8x8 digit images (bundled with scikit-learn, no download) are split 80/20 into
training and held-out sets; a 64-128-10 MLP is trained with AdamW and cross-entropy on
mini-batches from a DataLoader. The script prints the training loss of every epoch and
the held-out accuracy (about 97% after the default 30 epochs, in a few seconds on a
laptop CPU), and saves the loss curve as a PNG.

    python examples/train_digits.py [--epochs 30] [--seed 0] [--out examples/out]

Apart from the first import line, this is the code one would write against PyTorch.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # write files only, never open a window

import matplotlib.pyplot as plt  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from tqdm import tqdm  # noqa: E402

import jitgrad as torch  # noqa: E402
import jitgrad.nn as nn  # noqa: E402
import jitgrad.nn.functional as F  # noqa: E402, N812
from jitgrad.utils.data import DataLoader, Subset, TensorDataset, random_split  # noqa: E402


class MLP(nn.Module):
    """64 pixels -> 128 hidden units (ReLU, dropout) -> 10 class logits."""

    def __init__(self, hidden: int = 128, dropout: float = 0.1) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(64, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def load_splits(seed: int) -> tuple[Subset, Subset]:
    """(train, held-out) subsets of the digits: pixels scaled to [0, 1] float32, int64 labels."""
    digits = load_digits()
    images = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    labels = torch.tensor(digits.target, dtype=torch.int64)
    dataset = TensorDataset(images, labels)
    train, held_out = random_split(dataset, [0.8, 0.2],
                                   generator=torch.Generator().manual_seed(seed))
    return train, held_out


def train_one_epoch(model: nn.Module, loader: DataLoader,
                    optimizer: torch.optim.Optimizer) -> float:
    """One pass over the training batches; returns the mean training loss."""
    model.train()
    total, count = 0.0, 0
    for images, labels in loader:
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(labels)
        count += len(labels)
    return total / count


def accuracy(model: nn.Module, dataset: Subset) -> tuple[int, int]:
    """(correct, total) predictions of `model` on `dataset`."""
    model.eval()
    images, labels = next(iter(DataLoader(dataset, batch_size=len(dataset))))
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return int((predictions == labels).sum().item()), len(labels)


def save_loss_curve(losses: list[float], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(range(1, len(losses) + 1), losses, marker="o", markersize=3)
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss (cross-entropy)")
    ax.set_yscale("log")
    ax.set_title("MLP on scikit-learn digits (jitgrad)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> float:
    """Train, print per-epoch losses and the held-out accuracy; returns the accuracy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out",
                        help="directory for the loss-curve PNG")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    train_set, held_out = load_splits(args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    model = MLP()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    print(f"{len(train_set)} training and {len(held_out)} held-out images; model:\n{model}")

    start = time.perf_counter()
    losses = []
    for epoch in tqdm(range(1, args.epochs + 1), desc="training", unit="epoch"):
        losses.append(train_one_epoch(model, loader, optimizer))
        tqdm.write(f"epoch {epoch:3d}  train loss {losses[-1]:.4f}")
    elapsed = time.perf_counter() - start

    correct, total = accuracy(model, held_out)
    print(f"held-out accuracy: {100 * correct / total:.2f}% ({correct}/{total}), "
          f"trained in {elapsed:.1f} s")
    curve = args.out / "train_digits_loss.png"
    save_loss_curve(losses, curve)
    print(f"loss curve saved to {curve}")
    return correct / total


if __name__ == "__main__":
    main()
