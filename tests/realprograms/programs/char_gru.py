"""A character-level GRU language model in the style of makemore's `--type gru`: a
hand-written GRU cell (torch.cat of input and state, sigmoid gates, `1 - z` blend), a
learned start state expanded over the batch, torch.stack over time steps, cross-entropy
with ignore_index=-1, AdamW, and batches from a DataLoader over a TensorDataset.

A PyTorch program (it imports torch): jitgrad runs it through `python -m jitgrad.run`.
Usage: char_gru.py [--steps N] [--compile none|eager|numba]
"""

import argparse

import torch
import torch.nn as nn
from torch.nn import functional as F  # noqa: N812 - the name PyTorch programs use
from torch.utils.data import DataLoader, TensorDataset

WORDS = ["ada", "bea", "cleo", "dana", "eva", "fay", "gia", "hana", "ida", "june", "kai", "lea"]
BLOCK = 5


class GRUCell(nn.Module):
    def __init__(self, n_embd, n_hidden):
        super().__init__()
        self.xh_to_z = nn.Linear(n_embd + n_hidden, n_hidden)
        self.xh_to_r = nn.Linear(n_embd + n_hidden, n_hidden)
        self.xh_to_hbar = nn.Linear(n_embd + n_hidden, n_hidden)

    def forward(self, xt, hprev):
        xh = torch.cat([xt, hprev], dim=1)
        r = F.sigmoid(self.xh_to_r(xh))
        xhr = torch.cat([xt, r * hprev], dim=1)
        hbar = F.tanh(self.xh_to_hbar(xhr))
        z = F.sigmoid(self.xh_to_z(xh))
        return (1 - z) * hprev + z * hbar


class CharGRU(nn.Module):
    def __init__(self, vocab, n_embd=8, n_hidden=16):
        super().__init__()
        self.start = nn.Parameter(torch.zeros(1, n_hidden))
        self.wte = nn.Embedding(vocab, n_embd)
        self.cell = GRUCell(n_embd, n_hidden)
        self.lm_head = nn.Linear(n_hidden, vocab)

    def forward(self, idx, targets):
        b, t = idx.size()
        emb = self.wte(idx)
        hprev = self.start.expand((b, -1))
        hiddens = []
        for i in range(t):
            hprev = self.cell(emb[:, i, :], hprev)
            hiddens.append(hprev)
        logits = self.lm_head(torch.stack(hiddens, 1))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               ignore_index=-1)


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--compile", default="none")
options = parser.parse_args()

chars = sorted(set("".join(WORDS)))
stoi = {ch: i + 1 for i, ch in enumerate(chars)}
inputs = torch.zeros(len(WORDS), BLOCK, dtype=torch.long)
targets = torch.zeros(len(WORDS), BLOCK, dtype=torch.long)
for row, word in enumerate(WORDS):
    ids = torch.tensor([stoi[ch] for ch in word], dtype=torch.long)
    inputs[row, 1:1 + len(ids)] = ids[:BLOCK - 1]
    targets[row, :len(ids)] = ids
    targets[row, len(ids) + 1:] = -1  # after the end token 0: ignored
loader = DataLoader(TensorDataset(inputs, targets), batch_size=6, shuffle=False)

torch.manual_seed(3407)
model = CharGRU(len(chars) + 1)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01,
                              betas=(0.9, 0.99), eps=1e-8)
run = model if options.compile == "none" else torch.compile(model, backend=options.compile)
losses = []
for _ in range(options.steps):
    for x, y in loader:
        loss = run(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
print(f"{len(losses)} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}")
