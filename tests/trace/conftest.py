"""Every trace test starts and ends with empty compile caches and counters."""

import pytest

import jitgrad as jg


@pytest.fixture(autouse=True)
def fresh_caches():
    jg.reset()
    yield
    jg.reset()
