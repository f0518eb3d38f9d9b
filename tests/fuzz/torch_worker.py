"""Runs fuzz programs on real torch: a subprocess of an interpreter that has torch.

Started by `TorchWorker` (below) as `<torch python> torch_worker.py`; reads pickled
`(source, filename, calls)` requests from stdin, runs them with tests.fuzz.harness
(imported by path: this interpreter has neither jitgrad nor the project on its path), and
writes pickled call results to stdout. `graph_break()` is a no-op under torch.
The class `TorchWorker` is the client, used by the campaign under `--torch`.
"""

import os
import pickle
import struct
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))


def send(stream, obj) -> None:
    data = pickle.dumps(obj)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def receive(stream):
    header = stream.read(8)
    if len(header) < 8:
        raise EOFError("torch worker closed its stream")
    return pickle.loads(stream.read(struct.unpack("<Q", header)[0]))


def gelu_with_infinity(torch):
    """F.gelu that gives x for x > max / 2 and +inf at +inf (torch's vectorized kernel
    computes (1 + erf) * x * 0.5, which overflows there, and gives NaN at +inf; see the
    deliberate differences in tests.fuzz.runner). The gradient stays torch's: where()
    routes a zero into gelu's backward (NaN at +inf, as 0 * gelu'(inf))."""
    gelu = torch.nn.functional.gelu

    def patched(input, approximate="none"):
        huge = input > torch.finfo(input.dtype).max / 2 if input.is_floating_point() else \
            input != input
        return torch.where(huge, input, gelu(input, approximate=approximate))

    return patched


TORCH_QUIRKS = {"gelu": gelu_with_infinity}  # torch.nn.functional name -> shim factory


def serve() -> None:
    sys.path.insert(0, HERE)
    import harness
    import numpy as np
    import torch

    torch.set_num_threads(1)
    for name, shim in TORCH_QUIRKS.items():
        setattr(torch.nn.functional, name, shim(torch))
    while True:
        try:
            source, filename, calls = receive(sys.stdin.buffer)
        except EOFError:
            return
        fn, sink = harness.load_program(torch, source, filename, lambda: None)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            results = [harness.run_call(torch, fn, call, sink) for call in calls]
        send(sys.stdout.buffer, results)


class TorchWorker:
    """Client of one torch subprocess; `run(program)` returns its call results."""

    def __init__(self, python: str):
        self.process = subprocess.Popen([python, os.path.join(HERE, "torch_worker.py")],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def run(self, program) -> list[dict]:
        send(self.process.stdin, (program.source, program.filename, program.calls))
        return receive(self.process.stdout)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


if __name__ == "__main__":
    serve()
