"""`jitgrad.onnx`: importable, so scripts that export at the end still train; exporting is
refused (jitgrad has no ONNX exporter: export the model with PyTorch)."""

from __future__ import annotations

from jitgrad.refusal import refused

export = refused("torch.onnx.export", "jitgrad has no ONNX exporter; save the weights with "
                 "jitgrad.save(model.state_dict(), path), load them into the PyTorch model "
                 "and export it with PyTorch")


def is_in_onnx_export() -> bool:
    """False: jitgrad never runs an ONNX export."""
    return False


__all__ = ["export", "is_in_onnx_export"]
