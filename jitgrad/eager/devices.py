"""`jitgrad.device` and the device and layout flags of tensors: jitgrad computes on the
CPU only, with dense tensors."""

from __future__ import annotations


class device:  # noqa: N801 - PyTorch spells it `torch.device`
    """A device name; jitgrad computes on the CPU only."""

    __slots__ = ("type", "index")
    type: str  # noqa: A003 - torch's attribute name
    index: int | None

    def __init__(self, type: str | device = "cpu", index: int | None = None) -> None:  # noqa: A002
        if isinstance(type, device):
            name, index = type.type, type.index
        else:
            name = type
        kind = name.split(":")[0]
        if kind not in ("cpu", "cuda", "mps", "meta"):
            raise RuntimeError(f"Expected one of cpu, cuda, mps device type at start of device "
                               f"string: {name}")
        self.type = kind
        self.index = index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and other.type == self.type

    def __hash__(self) -> int:
        return hash(self.type)

    def __repr__(self) -> str:
        return f"device(type='{self.type}')"

    def __str__(self) -> str:
        return self.type


CPU = device("cpu")


class DeviceFlag:
    """A read-only flag every jitgrad tensor answers alike (`x.is_cuda`, `x.is_sparse`)."""

    def __init__(self, value: bool) -> None:
        self.value = value

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> bool:
        return self.value

    def __set__(self, obj: object, value: object) -> None:
        raise AttributeError(f"attribute '{self.name}' of 'Tensor' objects is not writable")
