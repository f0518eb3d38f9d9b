"""Training steps: an MLP step with AdamW and with SGD, and a minGPT-sized transformer
forward+backward.

1. MLP train step, batch 64, 784-256-256-10 (ReLU), cross-entropy, `zero_grad`,
   `backward`, AdamW step (then the same with a plain SGD step, lr 0.01): numpy (a
   hand-written forward, backward and update, the floor for op-by-op execution), jitgrad
   eager, jitgrad compiled (the whole step under `jitgrad.compile(backend="numba")`),
   torch eager and torch.compile (inductor). Peak memory of one AdamW step (tracemalloc,
   numpy's allocations) for jitgrad eager and compiled.
2. Transformer forward+backward: token + position embeddings, one pre-LayerNorm block
   (causal self-attention, 4 heads; MLP with GELU), LayerNorm, head, cross-entropy;
   batch 16, block 32, n_embd 64, vocab 65; `loss.backward()`, no optimizer step. jitgrad
   eager and compiled (the model's forward compiled, backward through the compiled
   region), torch eager and torch.compile.
Every variant starts from the same weights; before timing, each one's first loss is
checked against jitgrad eager's (rtol 1e-4). Issue 5 aims: compiled >= 1.5x faster than
jitgrad eager on both, the MLP step <= 0.75x torch eager's time, the block <= 1.0x.

Run: python -m benchmarks.train_step
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np

from benchmarks.harness import interleaved_medians, print_table, try_import_torch

MLP_SIZES = (784, 256, 256, 10)
MLP_BATCH = 64
LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.999), 1e-8, 0.01
SGD_LR = 0.01
BATCH, BLOCK, N_EMBD, N_HEAD, VOCAB = 16, 32, 64, 4, 65


def mlp_weights(rng: np.random.Generator) -> list[np.ndarray]:
    """[w1, b1, w2, b2, w3, b3] float32, torch.nn.Linear's layout (out, in)."""
    weights = []
    for fan_in, fan_out in zip(MLP_SIZES[:-1], MLP_SIZES[1:], strict=True):
        bound = 1 / math.sqrt(fan_in)
        weights.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32))
        weights.append(rng.uniform(-bound, bound, fan_out).astype(np.float32))
    return weights


def make_mlp_step(lib, weights: list[np.ndarray], optimizer_name: str = "adamw"):
    """The training step of `lib` (jitgrad or torch) over an MLP holding `weights`, with
    an AdamW or ("sgd") a plain SGD update."""
    nn = lib.nn
    layers = [nn.Linear(a, b) for a, b in zip(MLP_SIZES[:-1], MLP_SIZES[1:], strict=True)]
    model = nn.Sequential(layers[0], nn.ReLU(), layers[1], nn.ReLU(), layers[2])
    with lib.no_grad():
        for param, value in zip(model.parameters(), weights, strict=True):
            param.copy_(lib.tensor(value))
    optimizer = lib.optim.SGD(model.parameters(), lr=SGD_LR) if optimizer_name == "sgd" \
        else lib.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                             weight_decay=WEIGHT_DECAY)

    def step(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


class NumpyMLPStep:
    """The same step written with numpy: forward, cross-entropy, backward, AdamW or SGD."""

    def __init__(self, weights: list[np.ndarray], optimizer_name: str = "adamw") -> None:
        self.update = self.sgd if optimizer_name == "sgd" else self.adamw
        self.params = [w.copy() for w in weights]
        self.m = [np.zeros_like(w) for w in weights]
        self.v = [np.zeros_like(w) for w in weights]
        self.t = 0

    def __call__(self, x: np.ndarray, y: np.ndarray) -> float:
        w1, b1, w2, b2, w3, b3 = self.params
        h1 = np.maximum(x @ w1.T + b1, 0)
        h2 = np.maximum(h1 @ w2.T + b2, 0)
        logits = h2 @ w3.T + b3
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        rows = np.arange(len(y))
        loss = -log_probs[rows, y].mean()
        d_logits = np.exp(log_probs)
        d_logits[rows, y] -= 1
        d_logits /= len(y)
        d_h2 = (d_logits @ w3) * (h2 > 0)
        d_h1 = (d_h2 @ w2) * (h1 > 0)
        grads = [d_h1.T @ x, d_h1.sum(0), d_h2.T @ h1, d_h2.sum(0), d_logits.T @ h2,
                 d_logits.sum(0)]
        self.update(grads)
        return float(loss)

    def sgd(self, grads: list[np.ndarray]) -> None:
        for p, g in zip(self.params, grads, strict=True):
            p -= SGD_LR * g

    def adamw(self, grads: list[np.ndarray]) -> None:
        self.t += 1
        beta1, beta2 = BETAS
        correction1, correction2 = 1 - beta1**self.t, 1 - beta2**self.t
        for p, g, m, v in zip(self.params, grads, self.m, self.v, strict=True):
            p *= 1 - LR * WEIGHT_DECAY
            m *= beta1
            m += (1 - beta1) * g
            v *= beta2
            v += (1 - beta2) * g * g
            p -= (LR / correction1) * m / (np.sqrt(v / correction2) + EPS)


def peak_mib(fn) -> float:
    """Peak MiB allocated (tracemalloc) during one call of `fn`, above what was live."""
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def mlp_variants(optimizer_name: str = "adamw") -> tuple[dict, dict]:
    """name -> zero-argument step, checked against jitgrad eager's first loss; and the
    peak MiB of one jitgrad eager and compiled step."""
    import jitgrad

    rng = np.random.default_rng(0)
    weights = mlp_weights(rng)
    x = rng.standard_normal((MLP_BATCH, MLP_SIZES[0])).astype(np.float32)
    y = rng.integers(0, MLP_SIZES[-1], MLP_BATCH)
    xj, yj = jitgrad.tensor(x), jitgrad.tensor(y)
    eager = make_mlp_step(jitgrad, weights, optimizer_name)
    compiled = jitgrad.compile(make_mlp_step(jitgrad, weights, optimizer_name),
                               backend="numba")
    numpy_step = NumpyMLPStep(weights, optimizer_name)
    runs = {"numpy": lambda: numpy_step(x, y), "jitgrad eager": lambda: eager(xj, yj),
            "jitgrad compiled (numba)": lambda: compiled(xj, yj)}
    losses = {"numpy": numpy_step(x, y), "jitgrad eager": eager(xj, yj).item(),
              "jitgrad compiled (numba)": compiled(xj, yj).item()}
    torch = try_import_torch()
    if torch is not None:
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)
        torch_eager = make_mlp_step(torch, weights, optimizer_name)
        torch_compiled = torch.compile(make_mlp_step(torch, weights, optimizer_name))
        runs["torch eager"] = lambda: torch_eager(xt, yt)
        runs["torch.compile (inductor)"] = lambda: torch_compiled(xt, yt)
        losses["torch eager"] = torch_eager(xt, yt).item()
        losses["torch.compile (inductor)"] = torch_compiled(xt, yt).item()
    check_losses(losses)
    memory = {"jitgrad eager": peak_mib(runs["jitgrad eager"]),
              "jitgrad compiled (numba)": peak_mib(runs["jitgrad compiled (numba)"])}
    return runs, memory


def check_losses(losses: dict[str, float]) -> None:
    reference = losses["jitgrad eager"]
    for name, loss in losses.items():
        np.testing.assert_allclose(loss, reference, rtol=1e-4,
                                   err_msg=f"{name}'s first loss disagrees with jitgrad eager")


def make_gpt_block(lib):
    """An embedding + one transformer block + head model class of `lib`."""
    nn, F = lib.nn, lib.nn.functional  # noqa: N806

    class TinyGPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, N_EMBD), nn.Embedding(BLOCK, N_EMBD)
            self.ln_1, self.ln_2, self.ln_f = (nn.LayerNorm(N_EMBD) for _ in range(3))
            self.qkv, self.proj = nn.Linear(N_EMBD, 3 * N_EMBD), nn.Linear(N_EMBD, N_EMBD)
            self.fc, self.fc_out = nn.Linear(N_EMBD, 4 * N_EMBD), nn.Linear(4 * N_EMBD, N_EMBD)
            self.head = nn.Linear(N_EMBD, VOCAB)
            self.register_buffer("mask", lib.tril(lib.ones(BLOCK, BLOCK)).view(1, 1, BLOCK,
                                                                                BLOCK))

        def attention(self, x):
            B, T, C = x.shape  # noqa: N806
            q, k, v = self.qkv(x).split(C, dim=2)
            q = q.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)  # (B, heads, T, C/heads)
            k = k.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            v = v.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // N_HEAD))
            att = F.softmax(att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")), -1)
            return self.proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(lib.arange(idx.shape[1]))
            x = x + self.attention(self.ln_1(x))
            x = x + self.fc_out(F.gelu(self.fc(self.ln_2(x))))
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))

    return TinyGPT


def gpt_variants() -> dict:
    """name -> zero-argument forward+backward, checked against jitgrad eager's loss."""
    import jitgrad

    rng = np.random.default_rng(0)
    idx = rng.integers(0, VOCAB, (BATCH, BLOCK))
    targets = rng.integers(0, VOCAB, (BATCH, BLOCK))
    model = make_gpt_block(jitgrad)()
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    compiled = jitgrad.compile(model, backend="numba")
    idx_j, targets_j = jitgrad.tensor(idx), jitgrad.tensor(targets)
    runs = {"jitgrad eager": lambda: model(idx_j, targets_j).backward(),
            "jitgrad compiled (numba)": lambda: compiled(idx_j, targets_j).backward()}
    losses = {"jitgrad eager": model(idx_j, targets_j).item(),
              "jitgrad compiled (numba)": compiled(idx_j, targets_j).item()}
    torch = try_import_torch()
    if torch is not None:
        torch_model = make_gpt_block(torch)()
        torch_model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
        torch_compiled = torch.compile(torch_model)
        idx_t, targets_t = torch.from_numpy(idx), torch.from_numpy(targets)
        runs["torch eager"] = lambda: torch_model(idx_t, targets_t).backward()
        runs["torch.compile (inductor)"] = lambda: torch_compiled(idx_t, targets_t).backward()
        losses["torch eager"] = torch_model(idx_t, targets_t).item()
        losses["torch.compile (inductor)"] = torch_compiled(idx_t, targets_t).item()
    check_losses(losses)
    return runs


def main() -> None:
    runs, memory = mlp_variants()
    medians = interleaved_medians(runs, number=20)
    print_table(f"MLP train step, batch {MLP_BATCH}, {'-'.join(map(str, MLP_SIZES))}, AdamW, "
                "1 thread, median", [(k, v * 1e3) for k, v in medians.items()], "ms/step",
                "numpy")
    print("  peak memory of one step: " + ", ".join(f"{name} {mib:.2f} MiB"
                                                    for name, mib in memory.items()))
    runs, _ = mlp_variants("sgd")
    medians = interleaved_medians(runs, number=20)
    print_table(f"MLP train step, batch {MLP_BATCH}, {'-'.join(map(str, MLP_SIZES))}, SGD, "
                "1 thread, median", [(k, v * 1e3) for k, v in medians.items()], "ms/step",
                "numpy")
    medians = interleaved_medians(gpt_variants(), number=3)
    print_table(f"Transformer block forward+backward, batch {BATCH}, block {BLOCK}, n_embd "
                f"{N_EMBD}, {N_HEAD} heads, vocab {VOCAB}, 1 thread, median",
                [(k, v * 1e3) for k, v in medians.items()], "ms/step", "jitgrad eager")


if __name__ == "__main__":
    main()
