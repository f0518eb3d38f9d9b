"""Per-op overhead of eager mode: a 50-op chain on 8-element float32 tensors.

Chain: 25 x (x = (x * b).tanh()), as in research/eager_autograd.md §5.2. Reported per
op (forward) and per backward node ((forward+backward - forward) / 51 nodes, the 50 ops
plus the final sum), beside numpy (no autograd) and torch eager when installed, all on
one thread and timed in the same run. Aim (issue 2): forward <= 1.0x torch's per-op
cost, backward <= 1.0x torch's per-node cost.

A second table times in-place updates of 2^24 float32 elements (what every optimizer step
pays): copy_, add_, mul_(0.5), add_(alpha=-0.1) and zero_, beside numpy writing with
`out=` and torch eager.

A third table times the chain forward and backward (`chain(a, b).sum().backward()`)
eager and with the chain compiled: jitgrad.compile(backend="numba"), whose backward is
one compiled graph, beside torch eager and torch.compile (issue 12 aim: compiled <= 0.5x
torch.compile).

Run: python -m benchmarks.eager_overhead
"""

from __future__ import annotations

import numpy as np

from benchmarks.harness import interleaved_medians, print_table, try_import_torch

N_OPS = 50
SIZE = 8


def _chain(x, b, tanh):
    for _ in range(N_OPS // 2):
        x = tanh(x * b)
    return x


def variants() -> tuple[dict, dict]:
    import jitgrad as jg

    rng = np.random.default_rng(0)
    a_np = rng.uniform(-1, 1, SIZE).astype(np.float32)
    b_np = rng.uniform(-1, 1, SIZE).astype(np.float32)
    forward = {"numpy": lambda: _chain(a_np, b_np, np.tanh)}
    backward = {}
    a_jg = jg.tensor(a_np, requires_grad=True)
    b_jg = jg.tensor(b_np)
    forward["jitgrad eager (no grad)"] = lambda: _chain(b_jg, b_jg, jg.tanh)
    forward["jitgrad eager (recording)"] = lambda: _chain(a_jg, b_jg, jg.tanh)
    backward["jitgrad eager"] = lambda: _chain(a_jg, b_jg, jg.tanh).sum().backward()
    torch = try_import_torch()
    if torch is not None:
        a_t = torch.tensor(a_np, requires_grad=True)
        b_t = torch.tensor(b_np)
        forward["torch eager (no grad)"] = lambda: _chain(b_t, b_t, torch.tanh)
        forward["torch eager (recording)"] = lambda: _chain(a_t, b_t, torch.tanh)
        backward["torch eager"] = lambda: _chain(a_t, b_t, torch.tanh).sum().backward()
    return forward, backward


def _chain_sum(a, b):
    return _chain(a, b, type(a).tanh).sum()


def compiled_chain_variants() -> dict:
    """fwd+bwd of the chain, eager and compiled, for jitgrad and torch."""
    import jitgrad as jg

    rng = np.random.default_rng(0)
    a_np = rng.uniform(-1, 1, SIZE).astype(np.float32)
    b_np = rng.uniform(-1, 1, SIZE).astype(np.float32)
    libraries = {"jitgrad": (jg, jg.compile(_chain_sum, backend="numba"))}
    torch = try_import_torch()
    if torch is not None:
        libraries["torch"] = (torch, torch.compile(_chain_sum))
    runs = {}
    for name, (lib, compiled) in libraries.items():
        a = lib.tensor(a_np, requires_grad=True)
        b = lib.tensor(b_np)
        runs[f"{name} eager"] = lambda a=a, b=b: _chain_sum(a, b).backward()
        label = f"{name} compiled (numba)" if name == "jitgrad" else "torch.compile (inductor)"
        runs[label] = lambda a=a, b=b, compiled=compiled: compiled(a, b).backward()
    return runs


INPLACE_SIZE = 1 << 24


def inplace_variants() -> dict:
    import jitgrad as jg

    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(INPLACE_SIZE, dtype=np.float32)
    y_np = rng.standard_normal(INPLACE_SIZE, dtype=np.float32)
    half = np.float32(0.5)
    updates = {"numpy out=": {
        "copy_": lambda: np.copyto(x_np, y_np), "add_": lambda: np.add(x_np, y_np, out=x_np),
        "mul_(0.5)": lambda: np.multiply(x_np, half, out=x_np),
        "add_(alpha)": lambda: np.add(x_np, np.multiply(y_np, np.float32(-0.1)), out=x_np),
        "zero_": lambda: x_np.fill(0)}}
    modules = {"jitgrad eager": jg}
    torch = try_import_torch()
    if torch is not None:
        modules["torch eager"] = torch
    for name, module in modules.items():
        x, y = module.from_numpy(x_np.copy()), module.from_numpy(y_np.copy())
        updates[name] = {"copy_": lambda x=x, y=y: x.copy_(y), "add_": lambda x=x, y=y: x.add_(y),
                         "mul_(0.5)": lambda x=x: x.mul_(0.5),
                         "add_(alpha)": lambda x=x, y=y: x.add_(y, alpha=-0.1),
                         "zero_": lambda x=x: x.zero_()}
    return updates


def main() -> None:
    updates = inplace_variants()
    for op in updates["numpy out="]:
        medians = interleaved_medians({name: ops[op] for name, ops in updates.items()}, number=3)
        print_table(f"In place: x.{op} on 2^24 float32 (1 thread, median)",
                    [(name, seconds * 1e3) for name, seconds in medians.items()], "ms",
                    "torch eager" if "torch eager" in updates else "numpy out=")
    forward, backward = variants()
    medians = interleaved_medians(forward | {f"{k} fwd+bwd": v for k, v in backward.items()},
                                  number=200)
    per_op = [(name, medians[name] / N_OPS * 1e6) for name in forward]
    reference = "torch eager (recording)" if "torch eager (recording)" in forward else "numpy"
    print_table(f"Forward, per op ({N_OPS}-op chain, {SIZE} float32 elements, 1 thread, median)",
                per_op, "us/op", reference)
    per_node = []
    for name in backward:
        recording = medians[f"{name} (recording)"]
        per_node.append((name, (medians[f"{name} fwd+bwd"] - recording) / (N_OPS + 1) * 1e6))
    print_table("Backward, per node ((fwd+bwd - fwd) / 51 nodes)", per_node, "us/node",
                "torch eager" if "torch eager" in backward else "jitgrad eager")
    medians = interleaved_medians(compiled_chain_variants(), number=200)
    print_table(f"{N_OPS}-op chain on {SIZE} float32 elements, forward + backward (1 thread, "
                "median)", [(name, seconds * 1e6) for name, seconds in medians.items()],
                "us/call", "jitgrad eager")


if __name__ == "__main__":
    main()
