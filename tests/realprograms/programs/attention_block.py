"""One transformer block in the style of minGPT: LayerNorm, causal self-attention with a
lower-triangular mask buffer (masked_fill with -inf, softmax), a GELU MLP, and residual
connections; forward and backward of a squared-output loss on a fixed batch.

A PyTorch program (it imports torch): jitgrad runs it through `python -m jitgrad.run`.
Usage: attention_block.py [--compile none|eager|numba] [--dtype float32|float64]
"""

# ruff: noqa: N803, N812  (the names PyTorch programs use: F, X, W1)

import argparse
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        mask = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("bias", mask.view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(n_embd, 4 * n_embd), act=nn.GELU(),
                                      c_proj=nn.Linear(4 * n_embd, n_embd)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        m = self.mlp
        return x + m.c_proj(m.act(m.c_fc(self.ln_2(x))))


parser = argparse.ArgumentParser()
parser.add_argument("--compile", default="none")
parser.add_argument("--dtype", default="float32")
options = parser.parse_args()

torch.manual_seed(1337)
block = Block(n_embd=16, n_head=4, block_size=8).to(getattr(torch, options.dtype))
x = torch.randn(2, 6, 16, dtype=getattr(torch, options.dtype))
run = block if options.compile == "none" else torch.compile(block, backend=options.compile)
out = run(x)
loss = out.pow(2).mean()
loss.backward()
grads = {name: p.grad for name, p in block.named_parameters()}
print(f"loss {loss.item():.6f}, {len(grads)} parameter gradients")
