"""LSTM language-model training step: embedding 32, one LSTM layer of 128, linear head.

Sequence 35, batch 20, vocabulary 1000 (the PTB word-LM shape of the PyTorch examples at a
smaller vocabulary): forward, cross-entropy, `zero_grad`, `backward`, SGD step. Variants:
jitgrad eager, jitgrad compiled (the whole step under `jitgrad.compile(backend="numba")`;
the 35 time steps unroll into one forward graph), torch eager and torch.compile
(inductor) when torch is installed. Every variant starts from the same weights, loaded
into torch through PyTorch's own state_dict names; before timing, each first loss is
checked against jitgrad eager's (rtol 1e-4).

Run: python -m benchmarks.lstm_lm
"""

from __future__ import annotations

import numpy as np

from benchmarks.harness import interleaved_medians, print_table, try_import_torch
from benchmarks.train_step import check_losses

VOCAB, EMBED, HIDDEN, STEPS, BATCH, LR = 1000, 32, 128, 35, 20, 0.1


def make_lm(lib):
    """The language-model class of `lib` (jitgrad or torch)."""
    nn, F = lib.nn, lib.nn.functional  # noqa: N806

    class LSTMLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(VOCAB, EMBED)
            self.lstm = nn.LSTM(EMBED, HIDDEN)
            self.head = nn.Linear(HIDDEN, VOCAB)

        def forward(self, tokens, targets):  # tokens, targets: (STEPS, BATCH) int64
            output, _ = self.lstm(self.embedding(tokens))
            return F.cross_entropy(self.head(output).view(-1, VOCAB), targets.view(-1))

    return LSTMLM


def make_step(lib, state: dict[str, np.ndarray]):
    """A training step of `lib` over a model loaded from `state`."""
    model = make_lm(lib)()
    model.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    optimizer = lib.optim.SGD(model.parameters(), lr=LR)

    def step(tokens, targets):
        loss = model(tokens, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


def variants() -> dict:
    """name -> zero-argument training step, each checked against jitgrad eager's first loss."""
    import jitgrad

    rng = np.random.default_rng(0)
    tokens, targets = (rng.integers(0, VOCAB, (STEPS, BATCH)) for _ in range(2))
    jitgrad.manual_seed(0)
    state = {k: v.detach().numpy().copy() for k, v in make_lm(jitgrad)().state_dict().items()}
    eager = make_step(jitgrad, state)
    compiled = jitgrad.compile(make_step(jitgrad, state), backend="numba")
    tokens_j, targets_j = jitgrad.tensor(tokens), jitgrad.tensor(targets)
    runs = {"jitgrad eager": lambda: eager(tokens_j, targets_j),
            "jitgrad compiled (numba)": lambda: compiled(tokens_j, targets_j)}
    losses = {name: run().item() for name, run in runs.items()}
    torch = try_import_torch()
    if torch is not None:
        tokens_t, targets_t = torch.from_numpy(tokens), torch.from_numpy(targets)
        torch_eager = make_step(torch, state)
        torch_compiled = torch.compile(make_step(torch, state))
        runs["torch eager"] = lambda: torch_eager(tokens_t, targets_t)
        runs["torch.compile (inductor)"] = lambda: torch_compiled(tokens_t, targets_t)
        losses["torch eager"] = runs["torch eager"]().item()
        losses["torch.compile (inductor)"] = runs["torch.compile (inductor)"]().item()
    check_losses(losses)
    return runs


def main() -> None:
    medians = interleaved_medians(variants(), number=3)
    print_table(f"LSTM LM train step, embedding {EMBED}, hidden {HIDDEN}, seq {STEPS}, batch "
                f"{BATCH}, vocab {VOCAB}, SGD, 1 thread, median",
                [(k, v * 1e3) for k, v in medians.items()], "ms/step", "jitgrad eager")


if __name__ == "__main__":
    main()
