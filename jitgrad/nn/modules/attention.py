"""`MultiheadAttention` (torch.nn's; Vaswani et al. 2017, "Attention is all you need").

With E = embed_dim, H = num_heads and d = E / H, for query (L, N, E) and key/value
(S, N, kdim / vdim) (batch_first: (N, L, E); unbatched: (L, E)):
q, k, v = the input projections, split into H heads of d features;
weights = softmax(q k^T / sqrt(d) + mask) (N*H, L, S), dropped out in training;
out = out_proj(weights v, heads concatenated). Masks follow PyTorch: `attn_mask` (L, S) or
(N*H, L, S) and `key_padding_mask` (N, S) are bool (True = may NOT attend) or float (added);
both are merged into one additive mask. Parameters carry PyTorch's names and init:
`in_proj_weight` (3E, E) xavier-uniform and `in_proj_bias` zeros when kdim == vdim == E,
else `q_proj_weight`, `k_proj_weight`, `v_proj_weight`; `out_proj` a Linear with zero bias
(of torch's subclass name, NonDynamicallyQuantizableLinear).
Everything is composed of tensor ops, so gradients and compiled graphs come from them.
"""

from __future__ import annotations

import math
from typing import Any

from jitgrad.eager.ops import linalg, shape
from jitgrad.eager.ops.comparison import masked_fill
from jitgrad.eager.ops.creation import empty, full, zeros
from jitgrad.eager.ops.joining import triu
from jitgrad.eager.ops.nn_ops import softmax
from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn import init
from jitgrad.nn.modules.linear import NonDynamicallyQuantizableLinear
from jitgrad.nn.modules.module import Module
from jitgrad.nn.parameter import Parameter


def additive_mask(mask: Tensor | None, like: Tensor) -> Tensor | None:
    """A bool mask (True = masked) as 0 / -inf in like's dtype; a float mask unchanged."""
    if mask is None or mask.dtype.is_floating_point:
        return mask
    return masked_fill(zeros(mask.shape, dtype=like.dtype), mask, -math.inf)


class MultiheadAttention(Module):
    """Multi-head attention over (query, key, value); returns (output, weights or None)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are "
                                      "not implemented by jitgrad")
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim
        self.head_dim, self.batch_first = embed_dim // num_heads, batch_first
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, dtype=dtype))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = Parameter(empty(embed_dim, embed_dim, dtype=dtype))
            self.k_proj_weight = Parameter(empty(embed_dim, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(empty(embed_dim, self.vdim, dtype=dtype))
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for weight in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight,
                       self.v_proj_weight):
            if weight is not None:
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _projections(self, query: Tensor, key: Tensor, value: Tensor) -> list[Tensor]:
        e = self.embed_dim
        biases = [None] * 3 if self.in_proj_bias is None else \
            [self.in_proj_bias[i * e:(i + 1) * e] for i in range(3)]
        if self._qkv_same_embed_dim:
            weights = [self.in_proj_weight[i * e:(i + 1) * e] for i in range(3)]
        else:
            weights = [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
        return [linalg.linear(x, w, b)
                for x, w, b in zip((query, key, value), weights, biases, strict=True)]

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = [t.unsqueeze(1) for t in (query, key, value)]
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = [t.transpose(0, 1) for t in (query, key, value)]
        length, batch, _ = query.shape
        source, heads, d = key.shape[0], self.num_heads, self.head_dim
        q, k, v = self._projections(query, key, value)
        q, k, v = [t.reshape(t.shape[0], batch * heads, d).transpose(0, 1) for t in (q, k, v)]
        scores = linalg.matmul(q * (1.0 / math.sqrt(d)), shape.permute(k, (0, 2, 1)))
        mask = self._merged_mask(attn_mask, key_padding_mask, batch, length, source, q,
                                 is_causal)
        if mask is not None:
            scores = scores + mask
        weights = F.dropout(softmax(scores, -1), self.dropout, self.training)
        out = linalg.matmul(weights, v).transpose(0, 1).reshape(length, batch, self.embed_dim)
        out = self.out_proj(out)
        out = out.squeeze(1) if unbatched else (out.transpose(0, 1) if self.batch_first
                                                else out)
        if not need_weights:
            return out, None
        per_head = weights.reshape(batch, heads, length, source)
        averaged = per_head.mean(1) if average_attn_weights else per_head
        return out, averaged.squeeze(0) if unbatched else averaged

    def _merged_mask(self, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                     batch: int, length: int, source: int, like: Tensor,
                     is_causal: bool) -> Tensor | None:
        """attn_mask and key_padding_mask as one additive mask broadcasting to (N*H, L, S)."""
        if is_causal and attn_mask is None:
            attn_mask = causal_mask(length, source, like)
        mask = additive_mask(attn_mask, like)
        padding = additive_mask(key_padding_mask, like)
        if padding is not None:
            padding = padding.reshape(batch, 1, 1, source).expand(
                batch, self.num_heads, 1, source).reshape(batch * self.num_heads, 1, source)
            mask = padding if mask is None else mask + padding
        return mask


def causal_mask(length: int, source: int, like: Tensor) -> Tensor:
    """0 on and below the diagonal, -inf above it: (L, S) in like's dtype."""
    return triu(full((length, source), -math.inf, dtype=like.dtype), 1)


__all__ = ["MultiheadAttention"]
