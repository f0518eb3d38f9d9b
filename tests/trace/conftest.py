"""Every trace test starts and ends with empty compile caches and counters, and runs its
graphs on the eager backend unless it names one: these tests are about capture (guards,
breaks, resume functions); tests/codegen checks the numba backend on the same graphs."""

import pytest

import jitgrad as jg
from jitgrad import config


@pytest.fixture(autouse=True)
def fresh_caches(monkeypatch):
    monkeypatch.setattr(config, "DEFAULT_BACKEND", "eager")
    jg.reset()
    yield
    jg.reset()
