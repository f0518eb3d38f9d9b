"""A small PyTorch-style training script, run with `import jitgrad as torch`, must learn.

The code below is written exactly as it would be against torch (Module subclass, Linear,
F.cross_entropy, AdamW, no_grad, state_dict round trip, DataLoader); only the import differs.
"""

import numpy as np

import jitgrad as torch
import jitgrad.nn as nn
import jitgrad.nn.functional as F  # noqa: N812
from jitgrad.utils.data import DataLoader, TensorDataset


def _spirals(n_per_class=100, classes=3, seed=0):
    """Interleaved 2-D spirals (the cs231n toy problem): not linearly separable."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.0, 1.0, n_per_class)
        t = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0, 0.2, n_per_class)
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], axis=1))
        ys.append(np.full(n_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int64)


class MLP(nn.Module):
    def __init__(self, hidden=64, classes=3):
        super().__init__()
        self.fc1 = nn.Linear(2, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def test_mlp_learns_spirals_with_adamw_and_survives_a_state_dict_round_trip():
    torch.manual_seed(0)
    x_np, y_np = _spirals()
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    loader = DataLoader(TensorDataset(x, y), batch_size=50, shuffle=True)
    model = MLP()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=1e-4)

    first_loss = None
    for _epoch in range(60):
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if first_loss is None:
                first_loss = loss.item()

    model.eval()
    with torch.no_grad():
        logits = model(x)
        final_loss = F.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(dim=1) == y).float().mean().item()
    assert first_loss > 1.0  # about log(3) at the start
    assert final_loss < 0.15 and accuracy > 0.95

    restored = MLP()
    restored.load_state_dict(model.state_dict())
    with torch.no_grad():
        np.testing.assert_array_equal(restored(x).numpy(), logits.numpy())
