"""A curve fit with and without batch normalization, in the style of the batch-norm demos
of the PyTorch tutorials: two deep tanh MLPs, one with BatchNorm1d on the input and after
every hidden (bias-free) Linear (momentum 0.5), their layers registered with setattr and kept in plain
lists, Adam, shuffled-free minibatches from a DataLoader, and a test loss measured in eval
mode (running statistics) before each epoch.

The weights start from a fixed numpy generator (nn.init would draw from the framework's own
generator), so PyTorch and jitgrad start alike and their losses can be compared.

A PyTorch program (it imports torch): jitgrad runs it through `python -m jitgrad.run`.
Usage: batchnorm_mlp.py [--epochs N] [--compile none|eager|numba]
"""

import argparse

import numpy as np
import torch
import torch.utils.data as data
from torch import nn

HIDDEN = 4


class Net(nn.Module):
    def __init__(self, batch_norm):
        super().__init__()
        self.batch_norm = batch_norm
        self.fcs, self.bns = [], []
        self.bn_input = nn.BatchNorm1d(1, momentum=0.5)
        for i in range(HIDDEN):
            # a bias before BatchNorm has a zero gradient, which Adam would scale up from
            # rounding noise into full steps: the batch-norm net goes without
            fc = nn.Linear(1 if i == 0 else 8, 8, bias=not batch_norm)
            setattr(self, f"fc{i}", fc)
            self.fcs.append(fc)
            if batch_norm:
                bn = nn.BatchNorm1d(8, momentum=0.5)
                setattr(self, f"bn{i}", bn)
                self.bns.append(bn)
        self.predict = nn.Linear(8, 1)

    def forward(self, x):
        if self.batch_norm:
            x = self.bn_input(x)
        for i in range(HIDDEN):
            x = self.fcs[i](x)
            if self.batch_norm:
                x = self.bns[i](x)
            x = torch.tanh(x)
        return self.predict(x)


parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--compile", default="none")
options = parser.parse_args()

rng = np.random.default_rng(1)
x = np.linspace(-3, 4, 200, dtype=np.float32)[:, None]
y = (np.square(x) - 2 + rng.normal(0, 0.5, x.shape)).astype(np.float32)
test_x = torch.from_numpy(np.linspace(-3, 4, 40, dtype=np.float32)[:, None])
test_y = test_x ** 2 - 2
loader = data.DataLoader(data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
                         batch_size=32, shuffle=False)
nets = [Net(batch_norm=False), Net(batch_norm=True)]
with torch.no_grad():
    for net in nets:
        for name, p in net.named_parameters():
            if not name.startswith("bn"):
                p.copy_(torch.from_numpy(rng.normal(0, 0.5, tuple(p.shape)).astype(np.float32)))
runs = [net if options.compile == "none" else torch.compile(net, backend=options.compile)
        for net in nets]
optimizers = [torch.optim.Adam(net.parameters(), lr=0.02) for net in nets]
loss_func = nn.MSELoss()
test_losses, train_losses = [[], []], [[], []]
for _ in range(options.epochs):
    for net, run, record in zip(nets, runs, test_losses, strict=True):
        net.eval()
        record.append(loss_func(run(test_x), test_y).item())
        net.train()
    for b_x, b_y in loader:
        for run, optimizer, record in zip(runs, optimizers, train_losses, strict=True):
            loss = loss_func(run(b_x), b_y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            record.append(loss.item())
print(f"test losses without / with batch norm: {test_losses[0]} / {test_losses[1]}")
