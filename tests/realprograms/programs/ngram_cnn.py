"""A sentence classifier in the style of the n-gram CNN text classifiers of the PyTorch
tutorials: word embeddings as a one-channel image, one Conv2d per n-gram window spanning
the embedding width, ReLU, a max-pool layer built inside forward from the sequence length,
permute and torch.cat of the pooled features, a bias-free Linear plus a separate bias
Parameter, cross-entropy and Adam over a handful of labelled three-word sentences.

The weights start from a fixed numpy generator (copied in under no_grad), so PyTorch and
jitgrad start alike and their losses can be compared step by step.

A PyTorch program (it imports torch): jitgrad runs it through `python -m jitgrad.run`.
Usage: ngram_cnn.py [--steps N] [--compile none|eager|numba]
"""

import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: N812 - the name PyTorch programs use

SENTENCES = ["we like tea", "you love rain", "they enjoy jazz", "we hate mud", "you fear rain",
             "they dislike jazz"]
LABELS = [1, 1, 1, 0, 0, 0]
WINDOWS = (2, 2, 3)
EMBED, FILTERS = 4, 3


class NgramCNN(nn.Module):
    def __init__(self, vocab, length):
        super().__init__()
        self.length = length
        self.embed = nn.Embedding(vocab, EMBED)
        self.convs = nn.ModuleList([nn.Conv2d(1, FILTERS, (n, EMBED)) for n in WINDOWS])
        self.head = nn.Linear(FILTERS * len(WINDOWS), 2, bias=False)
        self.bias = nn.Parameter(torch.ones([2]))

    def forward(self, words):
        image = self.embed(words).unsqueeze(1)  # [batch, 1, length, embed]
        pooled = []
        for n, conv in zip(WINDOWS, self.convs, strict=True):
            pool = nn.MaxPool2d((self.length - n + 1, 1))
            pooled.append(pool(F.relu(conv(image))).permute(0, 3, 2, 1))
        features = torch.reshape(torch.cat(pooled, 3), [-1, FILTERS * len(WINDOWS)])
        return self.head(features) + self.bias


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--compile", default="none")
options = parser.parse_args()

vocab = {w: i for i, w in enumerate(sorted({w for s in SENTENCES for w in s.split()}))}
words = torch.LongTensor([[vocab[w] for w in s.split()] for s in SENTENCES])
labels = torch.LongTensor(LABELS)
model = NgramCNN(len(vocab), 3)
rng = np.random.default_rng(7)
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.uniform(-0.5, 0.5, tuple(p.shape)).astype(np.float32)))
run = model if options.compile == "none" else torch.compile(model, backend=options.compile)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
losses = []
for _ in range(options.steps):
    optimizer.zero_grad()
    loss = criterion(run(words), labels)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
predictions = run(words).argmax(1).tolist()
print(f"{len(losses)} steps, loss {losses[0]:.6f} -> {losses[-1]:.6f}, predictions {predictions}")
