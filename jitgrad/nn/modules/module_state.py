"""Saving and loading a Module's state dict (torch.nn.Module.state_dict / load_state_dict).

Layout and error texts follow PyTorch (research/eager_autograd.md §3.1): keys are dotted
names, own parameters first, then own persistent buffers, then each child; loading
copies values into the existing tensors in place, so optimizers holding the parameters
keep working, and reports every problem in one RuntimeError, one tab-indented line each
("Missing key(s) in state_dict: ...", "Unexpected key(s) ...", "size mismatch for ...").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from jitgrad.eager.tensor import Tensor
from jitgrad.nn.parameter import UninitializedParameter

if TYPE_CHECKING:
    from jitgrad.nn.modules.module import Module


class IncompatibleKeys(NamedTuple):
    """What `load_state_dict(strict=False)` could not match (torch's `_IncompatibleKeys`)."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"_IncompatibleKeys(missing_keys={self.missing_keys!r}, "
                f"unexpected_keys={self.unexpected_keys!r})")


def _local_state(module: Module) -> dict[str, Tensor]:
    """The module's own parameters and persistent buffers that are not None."""
    local = {k: v for k, v in module._parameters.items() if v is not None}
    local.update((k, v) for k, v in module._buffers.items()
                 if v is not None and k not in module._non_persistent_buffers_set)
    return local


def collect_state(module: Module, destination: dict[str, Any], prefix: str,
                  keep_vars: bool) -> None:
    """Add `module`'s entries (recursively) to `destination` under `prefix`."""
    for name, value in _local_state(module).items():
        destination[prefix + name] = value if keep_vars else value.detach()
    for name, child in module._modules.items():
        if child is not None:
            collect_state(child, destination, f"{prefix}{name}.", keep_vars)


def load_state(module: Module, state_dict: Mapping[str, Any], strict: bool) -> IncompatibleKeys:
    """Copy matching entries into `module`; see `Module.load_state_dict`."""
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
    missing: list[str] = []
    unexpected: list[str] = []
    errors: list[str] = []
    _load_recursive(module, dict(state_dict), "", missing, unexpected, errors)
    if strict:
        if unexpected:
            keys = ", ".join(f'"{k}"' for k in unexpected)
            errors.insert(0, f"Unexpected key(s) in state_dict: {keys}. ")
        if missing:
            keys = ", ".join(f'"{k}"' for k in missing)
            errors.insert(0, f"Missing key(s) in state_dict: {keys}. ")
    if errors:
        raise RuntimeError(f"Error(s) in loading state_dict for {type(module).__name__}:\n\t"
                           + "\n\t".join(errors))
    return IncompatibleKeys(missing, unexpected)


def _load_recursive(module: Module, state_dict: dict[str, Any], prefix: str,
                    missing: list[str], unexpected: list[str], errors: list[str]) -> None:
    # missing and unexpected keys are collected in both modes; `strict` only decides
    # whether they are errors (PyTorch passes strict=True to every _load_from_state_dict)
    local = _local_state(module)
    for name, target in local.items():
        key = prefix + name
        if key in state_dict:
            _copy_entry(key, target, state_dict[key], errors)
        else:
            missing.append(key)
    for key in state_dict:
        if key.startswith(prefix):
            head, dot, _ = key[len(prefix):].partition(".")
            known = head in module._modules if dot else head in local
            if not known:
                unexpected.append(key)
    for name, child in module._modules.items():
        if child is not None:
            child_prefix = f"{prefix}{name}."
            child_state = {k: v for k, v in state_dict.items() if k.startswith(child_prefix)}
            _load_recursive(child, child_state, child_prefix, missing, unexpected, errors)


def _copy_entry(key: str, target: Tensor, source: Any, errors: list[str]) -> None:
    """Copy `source` into `target` in place (as `target.copy_` under no_grad), or record why not."""
    if not isinstance(source, Tensor):
        errors.append(f'While copying the parameter named "{key}", expected jitgrad.Tensor '
                      f"from checkpoint but received {type(source)}")
        return
    if isinstance(target, UninitializedParameter):  # a lazy module takes the saved shape
        target.materialize(source.shape)
    if target.ndim == 0 and source.ndim == 1:  # checkpoints written by PyTorch 0.3
        source = source[0]
    if source.shape != target.shape:
        errors.append(f"size mismatch for {key}: copying a param with shape {source.shape!r} "
                      f"from checkpoint, the shape in current model is {target.shape!r}.")
        return
    target._data[...] = source._data
    target._bump_version()
