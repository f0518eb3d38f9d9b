"""A character-level MLP language model in the style of makemore part 2: a table of
character embeddings C, indexed by 3-character contexts (C[X]), a tanh hidden layer and
cross-entropy over the next character, trained by manual SGD on a handful of names.

A PyTorch program (it imports torch): jitgrad runs it through `python -m jitgrad.run`.
Usage: char_mlp.py [--steps N] [--compile none|eager|numba]
"""

# ruff: noqa: N803, N812  (the names PyTorch programs use: F, X, W1)

import argparse

import torch
import torch.nn.functional as F

NAMES = ["emma", "olivia", "ava", "isabella", "sophia", "charlotte", "mia", "amelia",
         "harper", "evelyn", "abigail", "emily", "elizabeth", "mila", "ella", "avery"]
BLOCK = 3

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--compile", default="none")
options = parser.parse_args()

chars = sorted(set("".join(NAMES)))
index_of = {ch: i + 1 for i, ch in enumerate(chars)}
index_of["."] = 0
vocab = len(index_of)

contexts, targets = [], []
for name in NAMES:
    window = [0] * BLOCK
    for ch in name + ".":
        contexts.append(window)
        targets.append(index_of[ch])
        window = window[1:] + [index_of[ch]]
X = torch.tensor(contexts)
Y = torch.tensor(targets)

g = torch.Generator().manual_seed(2147483647)
C = torch.randn((vocab, 4), generator=g)
W1 = torch.randn((BLOCK * 4, 32), generator=g) * 0.2
b1 = torch.randn(32, generator=g) * 0.01
W2 = torch.randn((32, vocab), generator=g) * 0.1
b2 = torch.zeros(vocab)
parameters = [C, W1, b1, W2, b2]
initial = [p.clone() for p in parameters]
for p in parameters:
    p.requires_grad = True


def loss_of(X, Y, C, W1, b1, W2, b2):
    emb = C[X]
    hidden = torch.tanh(emb.view(-1, BLOCK * 4) @ W1 + b1)
    logits = hidden @ W2 + b2
    return F.cross_entropy(logits, Y)


if options.compile != "none":
    loss_of = torch.compile(loss_of, backend=options.compile)

losses = []
for _ in range(options.steps):
    loss = loss_of(X, Y, *parameters)
    losses.append(loss.item())
    for p in parameters:
        p.grad = None
    loss.backward()
    for p in parameters:
        p.data += -0.5 * p.grad
print(f"{X.shape[0]} examples, vocab {vocab}, loss {losses[0]:.4f} -> {losses[-1]:.4f}")
