"""`jitgrad.utils.tensorboard`: a `SummaryWriter` that writes scalars to a CSV file.

makemore imports `torch.utils.tensorboard.SummaryWriter` unconditionally and logs its
losses with `add_scalar`. jitgrad does not write TensorBoard event files; its writer
appends `tag,step,value` rows to `<log_dir>/scalars.csv`, which any plotting tool reads.
"""

from __future__ import annotations

import datetime
import os
import socket
from typing import Any

from jitgrad.eager.tensor import Tensor


class SummaryWriter:
    """Scalar logger: `add_scalar(tag, value, global_step)` -> a row of scalars.csv.

    log_dir defaults to `runs/<date>_<host><comment>` as in PyTorch; it is created.
    Raises NotImplementedError for the other TensorBoard summaries (histograms, images).
    """

    def __init__(self, log_dir: str | None = None, comment: str = "", purge_step: int | None = None,
                 max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = "") -> None:
        if log_dir is None:
            stamp = datetime.datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = log_dir
        os.makedirs(log_dir, exist_ok=True)
        path = os.path.join(log_dir, "scalars.csv")
        is_new = not os.path.exists(path) or os.path.getsize(path) == 0
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        if is_new:
            self._file.write("tag,step,value\n")

    def add_scalar(self, tag: str, scalar_value: Any, global_step: int | None = None,
                   walltime: float | None = None, new_style: bool = False,
                   double_precision: bool = False) -> None:
        """Append one row; the value (a number or one-element Tensor) as a Python float."""
        value = float(scalar_value.item() if isinstance(scalar_value, Tensor) else scalar_value)
        step = "" if global_step is None else int(global_step)
        self._file.write(f"{tag},{step},{value!r}\n")

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict[str, Any],
                    global_step: int | None = None, walltime: float | None = None) -> None:
        """One row per entry, tagged `<main_tag>/<key>`."""
        for key, value in tag_scalar_dict.items():
            self.add_scalar(f"{main_tag}/{key}", value, global_step)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("add_"):
            raise NotImplementedError(f"SummaryWriter.{name}: jitgrad's SummaryWriter writes "
                                      f"scalars only (add_scalar, add_scalars)")
        raise AttributeError(f"'SummaryWriter' object has no attribute '{name}'")

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["SummaryWriter"]
