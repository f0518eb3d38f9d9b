"""docs/torch_api/coverage.md is current and honest (tools/torch_api/inventory.py).

The committed table must equal the one generated now from jitgrad; every name it marks
implemented resolves through the import swap to jitgrad's own object, every refused one
raises its documented RuntimeError, and every missing one raises MissingTorchAPIError
naming the torch path.
"""

from __future__ import annotations

import importlib
import types

import pytest

import jitgrad
from jitgrad._patch import MissingTorchAPIError
from tools.torch_api import inventory

ENTRIES = inventory.entries()


def by_status(status: str) -> list[inventory.Entry]:
    return [e for e in ENTRIES if e.status == status]


def torch_attribute(path: str) -> object:
    """getattr through the import swap, as a script's `torch.a.b.name` does."""
    owner_path, name = path.rsplit(".", 1)
    if owner_path == "torch.Tensor":
        return getattr(importlib.import_module("torch").Tensor, name)
    return getattr(importlib.import_module(owner_path), name)


@pytest.fixture(scope="module")
def swap():
    jitgrad.patch_torch()
    yield
    jitgrad.unpatch_torch()


def test_committed_table_is_current():
    assert inventory.TABLE_FILE.read_text() == inventory.render(ENTRIES), \
        "run: python tools/torch_api/inventory.py"


def test_every_status_is_seen_and_names_are_unique():
    assert {e.status for e in ENTRIES} == {"implemented", "refused", "missing"}
    assert len({e.path for e in ENTRIES}) == len(ENTRIES)


def test_implemented_names_resolve_to_jitgrad_objects(swap):
    for entry in by_status("implemented"):
        assert torch_attribute(entry.path) is inventory.jitgrad_object(entry.path), entry.path


@pytest.mark.parametrize("entry", by_status("refused"), ids=lambda e: e.path)
def test_refused_names_raise_their_documented_error(swap, entry):
    with pytest.raises(RuntimeError) as info:
        torch_attribute(entry.path)()
    assert str(info.value) == entry.reason
    assert str(info.value).startswith(entry.path + ": ")


def test_missing_names_raise_missing_torch_api_error(swap):
    modules = [e for e in by_status("missing") if not e.path.startswith("torch.Tensor.")]
    for entry in modules:
        try:
            importlib.import_module(entry.path.rsplit(".", 1)[0])
        except ImportError:
            continue  # the whole module is missing: its import raises (test_import_swap)
        if isinstance(inventory.jitgrad_object(entry.path), types.ModuleType):
            continue  # torch.trace: the name of jitgrad's tracer package
        with pytest.raises(MissingTorchAPIError, match=rf"does not implement {entry.path} "):
            torch_attribute(entry.path)
