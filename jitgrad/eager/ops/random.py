"""Random numbers: the default `Generator`, `manual_seed`, random factories and fills.

Backed by numpy's PCG64. jitgrad does not reproduce PyTorch's random stream: seeded
runs are reproducible within jitgrad, and tests never compare random values with torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Generator:
    """A random number generator (`torch.Generator`), wrapping `numpy.random.Generator`.

    `np` is the numpy Generator every jitgrad random op draws from.
    """

    def __init__(self, device: Any = "cpu") -> None:
        self._seed = 67280421310721  # PyTorch's default seed value, for familiarity
        self.np = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed: int) -> Generator:
        """Reseed; returns self (so `Generator().manual_seed(0)` works)."""
        self._seed = int(seed)
        self.np = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> dict[str, Any]:
        return self.np.bit_generator.state

    def set_state(self, state: dict[str, Any]) -> None:
        self.np.bit_generator.state = state


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (and return it), as `torch.manual_seed`."""
    return default_generator.manual_seed(seed)


def generator_of(generator: Generator | None) -> np.random.Generator:
    """The numpy Generator to draw from: the given one's, else the default's."""
    return (generator or default_generator).np


__all__ = ["Generator", "manual_seed", "default_generator"]

METHODS: dict[str, Any] = {}
