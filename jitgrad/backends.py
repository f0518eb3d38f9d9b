"""`jitgrad.backends`: PyTorch's backend switches, which select nothing on jitgrad's CPU.

nanoGPT sets `torch.backends.cuda.matmul.allow_tf32 = True` and
`torch.backends.cudnn.allow_tf32 = True` before choosing its device; the flags are
plain attributes here, kept so such assignments work. jitgrad computes float32 in
float32 whatever they say.
"""

from __future__ import annotations

from types import SimpleNamespace


def _false() -> bool:
    return False


cuda = SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False,
                                              allow_fp16_reduced_precision_reduction=True),
                       is_built=_false)
cudnn = SimpleNamespace(enabled=True, allow_tf32=True, benchmark=False, deterministic=False,
                        is_available=_false)
mps = SimpleNamespace(is_available=_false, is_built=_false)

__all__ = ["cuda", "cudnn", "mps"]
