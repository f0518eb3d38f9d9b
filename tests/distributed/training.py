"""The model, data and training loop shared by the 2-rank script and its 1-process reference."""

from __future__ import annotations

import numpy as np

import jitgrad
import jitgrad.nn.functional as F  # noqa: N812 - the name PyTorch programs use
from jitgrad import nn

BATCH = 8
STEPS = 5


def make_model(seed: int) -> nn.Module:
    jitgrad.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def batches() -> list[tuple[jitgrad.Tensor, jitgrad.Tensor]]:
    """STEPS batches of BATCH rows (float32 inputs, int64 class targets)."""
    rng = np.random.default_rng(0)
    return [(jitgrad.tensor(rng.normal(size=(BATCH, 6)).astype(np.float32)),
             jitgrad.tensor(rng.integers(0, 3, size=BATCH))) for _ in range(STEPS)]


def shard(tensor: jitgrad.Tensor, rank: int, world_size: int) -> jitgrad.Tensor:
    rows = tensor.shape[0] // world_size
    return tensor[rank * rows:(rank + 1) * rows]


def train(model, step_fn, rank: int = 0, world_size: int = 1) -> dict[str, np.ndarray]:
    """Run STEPS SGD steps of `step_fn(model, optimizer, x, y)` on this rank's shards;
    returns the final parameters by name."""
    parameters = model.parameters()
    optimizer = jitgrad.optim.SGD(parameters, lr=0.5, momentum=0.9)
    for x, y in batches():
        step_fn(model, optimizer, shard(x, rank, world_size), shard(y, rank, world_size))
    return {name: p.detach().numpy().copy() for name, p in named(model)}


def named(model):
    module = getattr(model, "module", model)
    return getattr(module, "_orig_mod", module).named_parameters()


def step(model, optimizer, x, y) -> None:
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


compiled_step = jitgrad.compile(step)
