"""Per-op overhead of eager mode: a 50-op chain on 8-element float32 tensors.

Chain: 25 x (x = (x * b).tanh()), as in research/eager_autograd.md §5.2. Reported per
op (forward) and per backward node ((forward+backward - forward) / 51 nodes, the 50 ops
plus the final sum), beside numpy (no autograd) and torch eager when installed, all on
one thread and timed in the same run. Aim (issue 2): forward <= 1.0x torch's per-op
cost, backward <= 1.0x torch's per-node cost.

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


def main() -> None:
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


if __name__ == "__main__":
    main()
