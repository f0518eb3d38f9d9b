"""The codegen tests test the kernels themselves, on small inputs, so every fusion group
gets a kernel here (the shipped rule runs groups too small for one as numpy ops: Note
[Groups too small for a kernel] in jitgrad/codegen/launch_cost.py, tested on its own in
test_launch_cost.py). The environment variable carries the switch to the subprocesses
the cache tests start."""

import pytest

from jitgrad import config


@pytest.fixture(autouse=True)
def every_group_a_kernel(monkeypatch):
    monkeypatch.setattr(config, "SMALL_GROUPS_AS_NUMPY", False)
    monkeypatch.setenv("JITGRAD_SMALL_GROUPS_AS_NUMPY", "0")
