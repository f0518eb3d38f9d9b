"""`torch_swap`: the import swap for one test, undone afterwards so other tests see no `torch`."""

import pytest

import jitgrad


@pytest.fixture
def torch_swap():
    torch = jitgrad.patch_torch()
    yield torch
    jitgrad.unpatch_torch()
