"""Train an MLP on scikit-learn's handwritten digits with jitgrad, eagerly and compiled.

The 1797 8x8 digit images (bundled with scikit-learn, no download) are split 80/20 into
training and held-out sets; a 64-128-10 MLP is trained with AdamW and cross-entropy on
shuffled mini-batches. By default the same training runs twice from the same initial
weights over the same batches: once eagerly and once with the training step (forward,
cross-entropy, zero_grad, backward, AdamW step) under `@jitgrad.compile(backend="numba")`.
The script prints both held-out accuracies (about 99% after the default 30 epochs), the
per-step times, the first 20 losses side by side, what the compiler captured in one step
(graphs, graph breaks with their reasons, fusion groups), and saves the loss curves as a PNG.

    python examples/train_digits.py [--epochs 30] [--eager | --compile] [--show-graphs] ...

Apart from the first import lines, the model and training step are what one would write
against PyTorch (`jitgrad.compile` playing `torch.compile`).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import statistics
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

# The tensors here are small: one BLAS thread and one Numba thread are faster than two,
# and far faster when another process competes for the cores, where a parallel kernel
# waits for a descheduled worker (set before numpy and numba load).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # write files only, never open a window

import matplotlib.pyplot as plt  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from tqdm import tqdm  # noqa: E402

import jitgrad  # noqa: E402
import jitgrad as torch  # noqa: E402
import jitgrad.nn as nn  # noqa: E402
import jitgrad.nn.functional as F  # noqa: E402, N812
from jitgrad.trace.ir.graph import target_name  # noqa: E402
from jitgrad.utils.data import DataLoader, Subset, TensorDataset, random_split  # noqa: E402

COMPARED_STEPS = 20  # the first steps whose losses are printed side by side


class MLP(nn.Module):
    """64 pixels -> 128 hidden units (ReLU) -> 10 class logits."""

    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def make_train_step(model: nn.Module, optimizer: torch.optim.Optimizer
                    ) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The training step, a plain function of one batch: returns the batch's loss."""

    def train_step(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return train_step


@dataclasses.dataclass
class Run:
    """What one training run measured: per-step losses and seconds, held-out accuracy."""

    mode: str
    losses: list[float] = dataclasses.field(default_factory=list)
    step_seconds: list[float] = dataclasses.field(default_factory=list)
    epoch_losses: list[float] = dataclasses.field(default_factory=list)
    correct: int = 0
    total: int = 0
    report: jitgrad.ExplainOutput | None = None

    @property
    def accuracy(self) -> float:
        return self.correct / self.total


def load_splits(seed: int) -> tuple[Subset, Subset]:
    """(train, held-out) subsets of the digits: pixels scaled to [0, 1] float32, int64 labels."""
    digits = load_digits()
    images = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    labels = torch.tensor(digits.target, dtype=torch.int64)
    dataset = TensorDataset(images, labels)
    train, held_out = random_split(dataset, [0.8, 0.2],
                                   generator=torch.Generator().manual_seed(seed))
    return train, held_out


def train(mode: str, initial_state: dict, train_set: Subset, held_out: Subset,
          args: argparse.Namespace) -> Run:
    """Train a fresh MLP from `initial_state` for args.epochs epochs, eagerly or compiled,
    then count its correct predictions on `held_out`.

    The batch order depends on args.seed only, so both modes see the same batches. The
    compiled run's first step goes through `jitgrad.explain`, which compiles and runs it
    once for real and records what was captured.
    """
    model = MLP()
    model.load_state_dict(initial_state)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    step = make_train_step(model, optimizer)
    if mode == "compiled":
        step = jitgrad.compile(step, backend="numba")
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(args.seed))
    run = Run(mode)
    model.train()
    progress = tqdm(range(1, args.epochs + 1), desc=f"{mode:>8}", unit="epoch")
    for _ in progress:
        epoch_total, epoch_count = 0.0, 0
        for images, labels in loader:
            start = time.perf_counter()
            if mode == "compiled" and run.report is None:
                run.report = jitgrad.explain(step)(images, labels)
                loss = run.report.result
            else:
                loss = step(images, labels)
            run.step_seconds.append(time.perf_counter() - start)
            run.losses.append(loss.item())
            epoch_total += run.losses[-1] * len(labels)
            epoch_count += len(labels)
        run.epoch_losses.append(epoch_total / epoch_count)
        progress.set_postfix(loss=f"{run.epoch_losses[-1]:.4f}")
    run.correct, run.total = accuracy(model, held_out)
    return run


def accuracy(model: nn.Module, dataset: Subset) -> tuple[int, int]:
    """(correct, total) predictions of `model` on `dataset`."""
    model.eval()
    images, labels = next(iter(DataLoader(dataset, batch_size=len(dataset))))
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return int((predictions == labels).sum().item()), len(labels)


def op_counts(graph: jitgrad.trace.ir.graph.Graph) -> str:
    """`linear x2, relu, log_softmax, nll_loss`: the graph's ops in first-use order."""
    counts = collections.Counter(target_name(node.target) for node in graph.nodes
                                 if node.op == "call_function")
    return ", ".join(name if n == 1 else f"{name} x{n}" for name, n in counts.items())


def print_capture(report: jitgrad.ExplainOutput, full: bool) -> None:
    """The graphs, graph breaks (with reasons) and fusion groups of one compiled step:
    per graph its ops and one line per fusion group, or the full listings if `full`."""
    print("\nWhat jitgrad.compile captured in one training step (jitgrad.explain):")
    print(f"  graphs: {report.graph_count}, graph breaks: {report.graph_break_count}")
    for i, reason in enumerate(report.break_reasons, 1):
        print(f"  break {i}: " + str(reason).replace("\n", "\n  "))
    for i, graph in enumerate(report.graphs):
        groups = report.fusion_groups[i] if i < len(report.fusion_groups) else []
        ops = sum(node.op == "call_function" for node in graph.nodes)
        print(f"  graph {i}: {ops} ops, {len(groups)} fusion groups")
        if full:
            print("    " + str(graph).replace("\n", "\n    "))
        else:
            print(textwrap.fill(op_counts(graph), width=96, initial_indent="    ops: ",
                                subsequent_indent="         "))
        for group in groups:
            text = str(group) if full else str(group).splitlines()[0]
            print("    " + text.replace("\n", "\n    "))


def print_side_by_side(runs: dict[str, Run]) -> None:
    """Per-step time, accuracy and final loss per mode; the first losses side by side."""
    names = list(runs)
    print("\n" + " " * 30 + "".join(f"{name:>12}" for name in names))
    rows = {
        "ms per step (median)": [1e3 * statistics.median(r.step_seconds) for r in runs.values()],
        "first step ms (compiles)": [1e3 * r.step_seconds[0] for r in runs.values()],
        "all steps s": [sum(r.step_seconds) for r in runs.values()],
        "final epoch train loss": [r.epoch_losses[-1] for r in runs.values()],
        "held-out accuracy %": [100 * r.accuracy for r in runs.values()],
    }
    for label, values in rows.items():
        print(f"{label:<30}" + "".join(f"{v:>12.4f}" for v in values))
    for name, run in runs.items():
        print(f"{name} held-out accuracy: {100 * run.accuracy:.2f}% ({run.correct}/{run.total})")
    if len(runs) == 2:
        eager, compiled = runs["eager"], runs["compiled"]
        steps = min(COMPARED_STEPS, len(eager.losses))
        print(f"\nFirst {steps} training steps (same initial weights, same batches):")
        print(f"  {'step':>4}  {'eager loss':>12}  {'compiled loss':>14}  {'rel. diff':>10}")
        diffs = []
        for i in range(steps):
            a, b = eager.losses[i], compiled.losses[i]
            diffs.append(abs(a - b) / abs(a))
            print(f"  {i + 1:>4}  {a:>12.7f}  {b:>14.7f}  {diffs[-1]:>10.2e}")
        print(f"max relative difference over the first {steps} steps: {max(diffs):.2e}")
        speedup = statistics.median(eager.step_seconds) / statistics.median(compiled.step_seconds)
        print(f"compiled step speed-up over eager (median step time): {speedup:.2f}x")


def save_loss_curves(runs: dict[str, Run], steps_per_epoch: int, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    styles = {"eager": ("tab:blue", "-", "o"), "compiled": ("tab:orange", "--", "x")}
    for name, run in runs.items():
        color, line, marker = styles[name]
        ax.plot(range(1, len(run.losses) + 1), run.losses, color=color, linestyle=line,
                alpha=0.35, linewidth=0.8)
        epochs_end = [steps_per_epoch * (e + 1) for e in range(len(run.epoch_losses))]
        ax.plot(epochs_end, run.epoch_losses, color=color, linestyle=line, marker=marker,
                markersize=4, label=f"{name}: per step, epoch mean")
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss (cross-entropy)")
    ax.set_yscale("log")
    ax.set_title("MLP on scikit-learn digits (jitgrad)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out",
                        help="directory for the loss-curve PNG")
    parser.add_argument("--show-graphs", action="store_true",
                        help="print the full listing of every captured graph and fusion group")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--eager", action="store_true", help="train eagerly only")
    only.add_argument("--compile", action="store_true", help="train compiled only")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Run]:
    """Train in the chosen modes, print the comparison; returns each mode's Run."""
    args = parse_args(argv)
    modes = ["eager"] if args.eager else ["compiled"] if args.compile else ["eager", "compiled"]
    torch.manual_seed(args.seed)
    train_set, held_out = load_splits(args.seed)
    initial_state = {k: v.clone() for k, v in MLP().state_dict().items()}
    print(f"{len(train_set)} training and {len(held_out)} held-out images; "
          f"model: {MLP()}")

    runs = {mode: train(mode, initial_state, train_set, held_out, args) for mode in modes}
    if "compiled" in runs:
        print_capture(runs["compiled"].report, args.show_graphs)
    print_side_by_side(runs)
    curve = args.out / "train_digits_loss.png"
    save_loss_curves(runs, -(-len(train_set) // args.batch_size), curve)
    print(f"loss curve saved to {curve}")
    return runs


if __name__ == "__main__":
    main()
