"""Train a GPT-style character model on US-Census names with a compiled forward.

The corpus is the 1990 US-Census name lists shipped by the PyPI package `names`
(88,799 surnames and 5,494 first names; lower-cased, deduplicated, shuffled and split
90/10 by name into training and validation text, one name per line). A small GPT
(token + position embeddings, N blocks of LayerNorm -> causal self-attention and
LayerNorm -> MLP with GELU, each with a residual, then LayerNorm and a linear head)
learns to predict the next character of random windows of that text, with AdamW.

The model's forward (embeddings through the cross-entropy loss) runs under
`jitgrad.compile(backend="numba")` as one graph: the script checks with `jitgrad.explain`
that the forward has no graph break and prints what was captured. It prints eager and
compiled training-step times, the validation loss beside that of a unigram model of the
corpus (the entropy of its character frequencies; a model that ignores context cannot do
better), saves the loss curves as a PNG and samples new names at the end.

    python examples/char_transformer.py [--steps 800] [--n-layer 2] [--n-embd 64] ...

Apart from the first import lines, the model is what one would write against PyTorch.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
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
import names  # noqa: E402  (the corpus: census name lists inside the package)
import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402

import jitgrad  # noqa: E402
import jitgrad as torch  # noqa: E402
import jitgrad.nn as nn  # noqa: E402
import jitgrad.nn.functional as F  # noqa: E402, N812

NAME_FILES = ("dist.all.last", "dist.female.first", "dist.male.first")


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t attends to positions <= t."""

    def __init__(self, n_embd: int, n_head: int, block_size: int) -> None:
        super().__init__()
        assert n_embd % n_head == 0, "heads split the embedding evenly"
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        causal = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("mask", causal.view(1, 1, block_size, block_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape  # noqa: N806 (the usual names: batch, time, channels)
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, n_embd: int, n_head: int, block_size: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Character GPT: (B, T) int64 ids -> (B, T, vocab) logits, and the mean cross-entropy
    against (B, T) targets when they are given."""

    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int,
                 n_embd: int) -> None:
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList([Block(n_embd, n_head, block_size) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T = idx.shape  # noqa: N806
        pos = torch.arange(0, T, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T))
        return logits, loss


class Corpus:
    """The census names as text: vocabulary, encoded training/validation streams."""

    def __init__(self, seed: int) -> None:
        folder = Path(names.__file__).parent
        words = set()
        for file_name in NAME_FILES:
            with open(folder / file_name) as lines:
                words.update(line.split()[0].lower() for line in lines if line.strip())
        ordered = sorted(words)
        np.random.default_rng(seed).shuffle(ordered)
        n_val = len(ordered) // 10
        self.train_names, self.val_names = ordered[n_val:], ordered[:n_val]
        train_text = "".join(name + "\n" for name in self.train_names)
        val_text = "".join(name + "\n" for name in self.val_names)
        self.chars = sorted(set(train_text) | set(val_text))
        self.index = {ch: i for i, ch in enumerate(self.chars)}
        self.train = torch.tensor([self.index[ch] for ch in train_text], dtype=torch.long)
        self.val = torch.tensor([self.index[ch] for ch in val_text], dtype=torch.long)

    def unigram_cross_entropy(self) -> float:
        """Nats per character of the validation text under the training text's character
        frequencies: the loss of the best model that ignores context."""
        counts = np.bincount(self.train.numpy(), minlength=len(self.chars)).astype(np.float64)
        log_p = np.log(counts / counts.sum())
        return float(-log_p[self.val.numpy()].mean())

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)


def get_batch(data: torch.Tensor, batch_size: int, block_size: int,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets), both (batch_size, block_size) int64: random windows of `data`
    and the same windows shifted by one character."""
    starts = torch.randint(len(data) - block_size - 1, (batch_size, 1), generator=generator)
    windows = data[starts + torch.arange(block_size + 1)]
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()


def train_step(forward, optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    """One AdamW step on the batch through `forward` (the model, eager or compiled)."""
    _, loss = forward(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def check_forward_capture(compiled, x: torch.Tensor, y: torch.Tensor) -> None:
    """Print what the compiled forward captured.

    Lists the forward's fusion groups one line each; the backward's (compiled when the
    backend builds a joint graph) are counted.
    Raises RuntimeError if the forward is not a single graph without breaks.
    """
    report = jitgrad.explain(compiled)(x, y)
    groups = [str(group) for graph_groups in report.fusion_groups for group in graph_groups]
    backward = [group for group in groups if group.startswith("backward")]
    print(f"\nCompiled forward (jitgrad.explain): {report.graph_count} graph(s), "
          f"{report.graph_break_count} graph breaks, {sum(report.ops_per_graph)} ops, "
          f"{len(groups) - len(backward)} forward and {len(backward)} backward fusion groups")
    for reason in report.break_reasons:
        print(reason)
    for outcome in report.frame_outcomes:
        print(f"  frame {outcome}")
    if report.graph_count != 1 or report.graph_break_count != 0:
        raise RuntimeError("the model's forward should compile to one graph with no break; "
                           "the reasons are printed above")
    for group in groups:
        if group not in backward:
            print("  " + group.splitlines()[0])


def time_steps(model: GPT, compiled, corpus: Corpus, args: argparse.Namespace) -> None:
    """Print the median ms per training step, eager vs compiled, each from the same
    weights on the same batch; the model's weights are restored afterwards."""
    generator = torch.Generator().manual_seed(args.seed + 1)
    x, y = get_batch(corpus.train, args.batch_size, args.block_size, generator)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    seconds = {}
    for name, forward in (("eager", model), ("compiled", compiled)):
        model.load_state_dict(initial)
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
        train_step(forward, optimizer, x, y)  # warm-up: compiles, allocates optimizer state
        samples = []
        for _ in range(args.timing_steps):
            start = time.perf_counter()
            train_step(forward, optimizer, x, y)
            samples.append(time.perf_counter() - start)
        seconds[name] = statistics.median(samples)
    model.load_state_dict(initial)
    print(f"\nTraining step (forward, backward, AdamW), median of {args.timing_steps}:"
          f" eager {1e3 * seconds['eager']:.1f} ms, compiled {1e3 * seconds['compiled']:.1f} ms"
          f" ({seconds['eager'] / seconds['compiled']:.2f}x)")


def validation_loss(forward, corpus: Corpus, args: argparse.Namespace) -> float:
    """Mean loss over fixed validation windows (the same ones at every evaluation)."""
    generator = torch.Generator().manual_seed(args.seed + 2)
    with torch.no_grad():
        losses = [forward(*get_batch(corpus.val, args.batch_size, args.block_size,
                                     generator))[1].item() for _ in range(args.eval_batches)]
    return sum(losses) / len(losses)


def sample(model: GPT, corpus: Corpus, count: int, generator: torch.Generator) -> list[str]:
    """`count` names drawn character by character with multinomial sampling."""
    newline = corpus.index["\n"]
    drawn = []
    with torch.no_grad():
        for _ in range(count):
            ids = [newline]
            while len(ids) < 2 * model.block_size:
                context = torch.tensor([ids[-model.block_size:]], dtype=torch.long)
                logits, _ = model(context)
                probs = F.softmax(logits[0, -1], dim=-1)
                ids.append(int(torch.multinomial(probs, 1, generator=generator).item()))
                if ids[-1] == newline:
                    break
            drawn.append(corpus.decode(ids[1:]).strip())
    return drawn


def save_loss_curves(train_losses: list[float], val_points: list[tuple[int, float]],
                     unigram: float, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    window = max(1, len(train_losses) // 50)
    smooth = np.convolve(train_losses, np.ones(window) / window, mode="valid")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    label = "train" if window == 1 else f"train (mean of {window} steps)"
    ax.plot(range(window, len(train_losses) + 1), smooth, label=label)
    steps, losses = zip(*val_points, strict=True)
    ax.plot(steps, losses, marker="o", markersize=3, label="validation")
    ax.axhline(unigram, color="gray", linestyle="--", label=f"unigram model ({unigram:.3f})")
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy (nats/char)")
    ax.set_title("Character GPT on census names (jitgrad, compiled forward)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--n-embd", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--eval-batches", type=int, default=8)
    parser.add_argument("--timing-steps", type=int, default=5)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out",
                        help="directory for the loss-curve PNG")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> float:
    """Train, evaluate and sample; returns the final validation loss."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    corpus = Corpus(args.seed)
    unigram = corpus.unigram_cross_entropy()
    model = GPT(len(corpus.chars), args.block_size, args.n_layer, args.n_head, args.n_embd)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"corpus: {len(corpus.train_names)} training and {len(corpus.val_names)} validation "
          f"names from PyPI `names` ({len(corpus.train)} / {len(corpus.val)} characters, "
          f"vocabulary {len(corpus.chars)}); model: {n_params} parameters")
    print(f"unigram model cross-entropy (character frequencies): {unigram:.4f} nats/char")

    compiled = jitgrad.compile(model, backend="numba")
    generator = torch.Generator().manual_seed(args.seed)
    check_forward_capture(compiled, *get_batch(corpus.train, args.batch_size,
                                               args.block_size, generator))
    time_steps(model, compiled, corpus, args)

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    train_losses, val_points = [], [(0, validation_loss(compiled, corpus, args))]
    start = time.perf_counter()
    progress = tqdm(range(1, args.steps + 1), desc="training", unit="step")
    for step in progress:
        x, y = get_batch(corpus.train, args.batch_size, args.block_size, generator)
        train_losses.append(train_step(compiled, optimizer, x, y))
        if step % args.eval_every == 0 or step == args.steps:
            val_points.append((step, validation_loss(compiled, corpus, args)))
            tqdm.write(f"step {step:5d}  train loss {train_losses[-1]:.4f}  "
                       f"val loss {val_points[-1][1]:.4f}")
        progress.set_postfix(loss=f"{train_losses[-1]:.3f}")
    elapsed = time.perf_counter() - start

    final = val_points[-1][1]
    print(f"\ntrained {args.steps} steps in {elapsed:.1f} s")
    print(f"validation loss {final:.4f} vs unigram model {unigram:.4f} nats/char "
          f"({'below' if final < unigram else 'NOT below'} the unigram model)")
    curve = args.out / "char_transformer_loss.png"
    save_loss_curves(train_losses, val_points, unigram, curve)
    print(f"loss curve saved to {curve}")

    known = set(corpus.train_names) | set(corpus.val_names)
    print(f"\n{args.samples} sampled names (* = not in the census lists):")
    for name in sample(model, corpus, args.samples, torch.Generator().manual_seed(args.seed)):
        print(f"  {name}{'' if name in known else ' *'}")
    return final


if __name__ == "__main__":
    main()
