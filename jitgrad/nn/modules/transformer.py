"""`TransformerEncoderLayer`, `TransformerEncoder`, `TransformerDecoderLayer`,
`TransformerDecoder` and `Transformer` (torch.nn's; Vaswani et al. 2017).

Sub-module names, shapes and defaults are PyTorch's (`self_attn`, `multihead_attn`,
`linear1`, `linear2`, `norm1..3`, `dropout`, `dropout1..3`, stacks in `layers`), so
state_dicts load both ways. A layer is post-norm, x = norm(x + block(x)), or pre-norm with
norm_first=True, x = x + block(norm(x)); the feed-forward block is
linear2(dropout(activation(linear1(x)))). Stacks hold deep copies of the layer given, as
PyTorch's do, and an optional final norm. PyTorch's eval-mode "fast path" (nested tensors)
has no counterpart here: results agree with PyTorch's regular path.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from jitgrad.eager.ops.creation import zeros
from jitgrad.eager.tensor import Tensor
from jitgrad.nn import functional as F  # noqa: N812 - PyTorch's spelling
from jitgrad.nn import init
from jitgrad.nn.modules.attention import MultiheadAttention, causal_mask
from jitgrad.nn.modules.container import ModuleList
from jitgrad.nn.modules.dropout import Dropout
from jitgrad.nn.modules.linear import Linear
from jitgrad.nn.modules.module import Module
from jitgrad.nn.modules.normalization import LayerNorm

Activation = str | Callable[[Tensor], Tensor]


def _activation(activation: Activation) -> Callable[[Tensor], Tensor]:
    if callable(activation):
        return activation
    if activation in ("relu", "gelu"):
        return getattr(F, activation)  # made from their declarations: mypy sees neither
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class _FeedForward(Module):
    """The feed-forward half that encoder and decoder layers share."""

    def _init_feed_forward(self, d_model: int, dim_feedforward: int, dropout: float,
                           activation: Activation, layer_norm_eps: float, bias: bool,
                           norm_first: bool, dtype: Any) -> None:
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.activation = _activation(activation)

    def _ff_block(self, x: Tensor, dropout: Module) -> Tensor:
        return dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def _residual(self, x: Tensor, norm: Module, block: Callable[[Tensor], Tensor]) -> Tensor:
        return x + block(norm(x)) if self.norm_first else norm(x + block(x))


class TransformerEncoderLayer(_FeedForward):
    """Self-attention then feed-forward, each with a residual connection and a LayerNorm."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Activation = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self._init_feed_forward(d_model, dim_feedforward, dropout, activation, layer_norm_eps,
                                bias, norm_first, dtype)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        def attend(x: Tensor) -> Tensor:
            out = self.self_attn(x, x, x, attn_mask=src_mask,
                                 key_padding_mask=src_key_padding_mask, need_weights=False,
                                 is_causal=is_causal)[0]
            return self.dropout1(out)

        x = self._residual(src, self.norm1, attend)
        return self._residual(x, self.norm2, lambda y: self._ff_block(y, self.dropout2))


class TransformerDecoderLayer(_FeedForward):
    """Self-attention, attention over the encoder's memory, then feed-forward."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Activation = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout, bias=bias,
                                                 batch_first=batch_first, dtype=dtype)
        self._init_feed_forward(d_model, dim_feedforward, dropout, activation, layer_norm_eps,
                                bias, norm_first, dtype)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2, self.dropout3 = (Dropout(dropout), Dropout(dropout),
                                                       Dropout(dropout))

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        def attend_self(x: Tensor) -> Tensor:
            return self.dropout1(self.self_attn(x, x, x, attn_mask=tgt_mask,
                                                key_padding_mask=tgt_key_padding_mask,
                                                need_weights=False, is_causal=tgt_is_causal)[0])

        def attend_memory(x: Tensor) -> Tensor:
            out = self.multihead_attn(x, memory, memory, attn_mask=memory_mask,
                                      key_padding_mask=memory_key_padding_mask,
                                      need_weights=False, is_causal=memory_is_causal)[0]
            return self.dropout2(out)

        x = self._residual(tgt, self.norm1, attend_self)
        x = self._residual(x, self.norm2, attend_memory)
        return self._residual(x, self.norm3, lambda y: self._ff_block(y, self.dropout3))


class TransformerEncoder(Module):
    """num_layers deep copies of encoder_layer, then `norm` if given."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return self.norm(x) if self.norm is not None else x


class TransformerDecoder(Module):
    """num_layers deep copies of decoder_layer, then `norm` if given."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                      memory_key_padding_mask, bool(tgt_is_causal), memory_is_causal)
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """An encoder stack and a decoder stack, each ending in a LayerNorm; parameters of two
    or more dims drawn xavier-uniform, as PyTorch's."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Activation = "relu",
                 custom_encoder: Module | None = None, custom_decoder: Module | None = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        options = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                       layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                       norm_first=norm_first, bias=bias, dtype=dtype)
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **options), num_encoder_layers,
            LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype))
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **options), num_decoder_layers,
            LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                            memory_key_padding_mask, tgt_is_causal, memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None,
                                        dtype: Any = None) -> Tensor:
        """(sz, sz) float mask: 0 on and below the diagonal, -inf above it."""
        return causal_mask(sz, sz, zeros(0, dtype=dtype))


__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer"]
