"""Pure NumPy attention: forward and backward of every step, intermediates kept for teaching."""

from .attention import (
    AttentionGrads,
    AttentionTrace,
    backward,
    cross_attention,
    scaled_dot_product,
    self_attention,
)
from .embedding import embed, embed_backward
from .grouped import GroupedTrace, grouped_query_attention, kv_cache_floats  # gqa
from .multi_head import MultiHeadGrads, MultiHeadTrace, multi_head_attention, multi_head_backward
from .ops import causal_mask, softmax

__all__ = [
    "AttentionGrads", "AttentionTrace", "MultiHeadGrads", "MultiHeadTrace",
    "backward", "causal_mask", "cross_attention", "embed", "embed_backward", "multi_head_attention",
    "multi_head_backward", "scaled_dot_product", "self_attention", "softmax",
    "GroupedTrace", "grouped_query_attention", "kv_cache_floats",  # gqa
]
