"""`finfo` and `iinfo` (torch.finfo / torch.iinfo): the numeric limits of a dtype.

Attention code writes `scores.masked_fill(mask, torch.finfo(scores.dtype).min)`; the
values are Python numbers, as in PyTorch (float32 max is 3.4028234663852886e+38).
"""

from __future__ import annotations

import numpy as np

from jitgrad.eager import dtypes

# bfloat16 has no numpy dtype; torch 2.13's finfo(torch.bfloat16), field by field
_BFLOAT16 = dict(bits=16, eps=0.0078125, max=3.3895313892515355e+38,
                 tiny=1.1754943508222875e-38, resolution=0.01)


class finfo:  # noqa: N801 - PyTorch's name
    """Limits of a floating dtype (default: the default dtype): bits, eps, max, min, tiny
    (= smallest_normal), resolution. Raises TypeError for integer and bool dtypes."""

    def __init__(self, type: dtypes.dtype | None = None) -> None:  # noqa: A002 - PyTorch's name
        d = dtypes.get_default_dtype() if type is None else type
        if not d.is_floating_point:
            raise TypeError(f"jitgrad.finfo() requires a floating point input type (got {d}). "
                            f"Use jitgrad.iinfo to handle '{d}'")
        if d.np is None:
            self.bits, self.eps, self.max = _BFLOAT16["bits"], _BFLOAT16["eps"], _BFLOAT16["max"]
            self.tiny, self.resolution = _BFLOAT16["tiny"], _BFLOAT16["resolution"]
        else:
            info = np.finfo(d.np)
            self.bits, self.eps, self.max = info.bits, float(info.eps), float(info.max)
            self.tiny, self.resolution = float(info.tiny), 10.0 ** -info.precision
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = d.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(self.dtype)

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801 - PyTorch's name
    """Limits of an integer dtype: bits, max, min. Raises TypeError for float and bool dtypes."""

    def __init__(self, type: dtypes.dtype) -> None:  # noqa: A002 - PyTorch's name
        if type.category != 1:
            raise TypeError(f"{type} is not supported by jitgrad.iinfo")
        info = np.iinfo(type.np)
        self.bits, self.max, self.min = info.bits, int(info.max), int(info.min)
        self.dtype = type.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(self.dtype)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


__all__ = ["finfo", "iinfo"]
