"""What a new size costs once sizes are symbolic (issue 13), and a growing decoding loop.

1. New batch size on an already-dynamic function: `(x @ w + b).relu().softmax(-1)` with
   x of shape (n, 64), after two calls made n dynamic. A call at a size never seen before
   (guard, the symbolic entry's specialization: the graph re-run on fakes, the backend's
   code for those sizes, kernels reused) against a cached call, both backends. Aim:
   <= 2x a cached call.
2. A 40-step decoding loop of a one-block GPT (embedding, causal attention with a mask
   sliced by T, LayerNorm, head; B=1, C=64, 4 heads), the sequence growing by one token
   per step: wall time of the whole loop, compiles included, for jitgrad eager, jitgrad
   compiled (numba), torch eager and torch.compile (default: automatic dynamic), and the
   number of traces; then the same loop run again (every length seen, nothing compiles),
   interleaved medians of 5 runs, which is what a compiled decoding loop costs once warm.

Run: python -m benchmarks.dynamic_shapes
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

from benchmarks.harness import interleaved_medians, print_table, try_import_torch


def head(x, w, b):
    return (x @ w + b).relu().softmax(-1)


def new_size_costs(backend: str) -> tuple[float, float]:
    """(median seconds of a call at a new size, of a cached call)."""
    import jitgrad as jg

    rng = np.random.default_rng(0)
    w = jg.tensor(rng.normal(size=(64, 64)).astype(np.float32))
    b = jg.tensor(rng.normal(size=64).astype(np.float32))
    compiled = jg.compile(head, backend=backend)
    for n in (8, 9, 10):  # exact, then dynamic, then the symbolic entry checked
        compiled(jg.tensor(rng.normal(size=(n, 64)).astype(np.float32)), w, b)
    new, cached = [], []
    for n in range(11, 41):
        x = jg.tensor(rng.normal(size=(n, 64)).astype(np.float32))
        start = time.perf_counter()
        compiled(x, w, b)
        new.append(time.perf_counter() - start)
        start = time.perf_counter()
        compiled(x, w, b)
        cached.append(time.perf_counter() - start)
    return statistics.median(new), statistics.median(cached)


def gpt_modules(nn, F, arange, tril, ones, long):  # noqa: N803 - torch's module names
    class Attention(nn.Module):
        def __init__(self, width, heads, length):
            super().__init__()
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.heads = heads
            self.register_buffer("mask", tril(ones(length, length)).view(1, 1, length, length))

        def forward(self, x):
            batch, steps, width = x.size()
            q, k, v = self.qkv(x).split(width, dim=2)
            q, k, v = (t.view(batch, steps, self.heads, width // self.heads).transpose(1, 2)
                       for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, :steps, :steps] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
            return self.proj(y.transpose(1, 2).contiguous().view(batch, steps, width))

    class GPT(nn.Module):
        def __init__(self, vocab=96, width=64, heads=4, length=64):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(length, width)
            self.ln, self.attn = nn.LayerNorm(width), Attention(width, heads, length)
            self.head = nn.Linear(width, vocab)

        def forward(self, idx):
            _, steps = idx.size()
            x = self.tok(idx) + self.pos(arange(0, steps, dtype=long))
            x = x + self.attn(self.ln(x))
            return self.head(x)

    return GPT


def decode(lib, model, steps: int = 40) -> float:
    idx = lib.tensor([[1, 2]])
    start = time.perf_counter()
    with lib.no_grad():
        for _ in range(steps):
            logits = model(idx)
            idx = lib.cat((idx, logits[:, -1, :].argmax(-1, keepdim=True)), dim=1)
    return time.perf_counter() - start


def main() -> None:
    rows = []
    for backend in ("eager", "numba"):
        new, cached = new_size_costs(backend)
        rows += [(f"{backend} backend: call at a new size", new * 1e6),
                 (f"{backend} backend: cached call", cached * 1e6)]
        print(f"  {backend} backend: a new size costs {new / cached:.1f}x a cached call")
    print_table("head(x, w, b), x of (n, 64), n dynamic (1 thread, median of 30 sizes)", rows,
                "us/call", "eager backend: cached call")

    import jitgrad as jg
    from jitgrad import nn
    from jitgrad.nn import functional
    from jitgrad.trace.runtime import entry

    gpt = gpt_modules(nn, functional, jg.arange, jg.tril, jg.ones, jg.long)
    jg.manual_seed(0)
    model = gpt().eval()
    loops = {"jitgrad eager": (jg, model)}
    loop = [("jitgrad eager", decode(jg, model) * 1e3)]
    compiled = jg.compile(model)
    loops["jitgrad.compile (numba)"] = (jg, compiled)
    loop.append(("jitgrad.compile (numba)", decode(jg, compiled) * 1e3))
    traces = entry.cache_for(compiled._function, compiled._backend).compiles
    torch = try_import_torch()
    if torch is not None:
        torch_gpt = gpt_modules(torch.nn, torch.nn.functional, torch.arange, torch.tril,
                                torch.ones, torch.long)
        torch.manual_seed(0)
        torch_model = torch_gpt().eval()
        torch_compiled = torch.compile(torch_model)
        loops["torch eager"] = (torch, torch_model)
        loops["torch.compile"] = (torch, torch_compiled)
        loop.append(("torch eager", decode(torch, torch_model) * 1e3))
        loop.append(("torch.compile", decode(torch, torch_compiled) * 1e3))
    print_table("40-step decoding loop, sequence 2 -> 42, compiles included (1 thread)", loop,
                "ms", "jitgrad eager")
    print(f"  jitgrad traces: {traces}")
    warm = interleaved_medians({name: (lambda lib=lib, m=m: decode(lib, m))
                                for name, (lib, m) in loops.items()}, number=1, rounds=5)
    print_table("The same 40-step decoding loop again, every length compiled (1 thread, "
                "median of 5)", [(k, v * 1e3) for k, v in warm.items()], "ms",
                "jitgrad eager")


if __name__ == "__main__":
    main()
