"""Grouped-query attention (GQA), and multi-query attention (MQA) as its g = 1 case.

h query heads share g key/value heads (g divides h): the h/g consecutive query heads of a group read
the same K and V.

    group(i) = ⌊i / (h/g)⌋                     (0-based: heads 0 … h/g − 1 read group 0, and so on)
    head_i   = Attention(X W_Q[i], X W_K[group(i)], X W_V[group(i)])
    GQA(X)   = Concat(head_0, …, head_{h−1})
    cache    = g (d_k + d_v) floats per token and layer (2 g d_k when d_v = d_k); multi-head: h (d_k + d_v)

Axes: n tokens, d model width, d_k key width, d_v value width, h query heads, g key/value groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .attention import AttentionTrace, scaled_dot_product


@dataclass(frozen=True)
class GroupedTrace:
    heads: tuple[AttentionTrace, ...]  # one trace per query head (its K and V are its group's)
    group: tuple[int, ...]  # the 0-based group of each head
    K: tuple[np.ndarray, ...]  # per group (n, d_k)
    V: tuple[np.ndarray, ...]  # per group (n, d_v)
    concat: np.ndarray  # (n, h·d_v)


def group_of(head: int, h: int, g: int) -> int:
    """The 0-based K/V group of the 0-based query head `head`: consecutive heads share a group."""
    if g < 1 or h % g:
        raise ValueError(f"{g} groups do not divide {h} heads")
    return head // (h // g)


def grouped_query_attention(X, W_Q: Sequence, W_K: Sequence, W_V: Sequence, causal: bool = False) -> GroupedTrace:
    """W_Q: h per-head query weights (d, d_k); W_K, W_V: g per-group weights (d, d_k), (d, d_v)."""
    h, g = len(W_Q), len(W_K)
    if g == 0 or len(W_V) != g:
        raise ValueError("W_K and W_V need one matrix per group, the same number of groups each")
    X = np.asarray(X, dtype=float)
    K = tuple(X @ np.asarray(w, dtype=float) for w in W_K)  # g × (n, d_k): computed once per group
    V = tuple(X @ np.asarray(w, dtype=float) for w in W_V)  # g × (n, d_v)
    group = tuple(group_of(i, h, g) for i in range(h))
    heads = tuple(scaled_dot_product(X @ np.asarray(wq, dtype=float), K[j], V[j], causal=causal)
                  for wq, j in zip(W_Q, group))
    concat = np.concatenate([hd.O for hd in heads], axis=1)  # (n, h·d_v)
    return GroupedTrace(heads=heads, group=group, K=K, V=V, concat=concat)


def kv_cache_floats(kv_heads: int, d_k: int, d_v: int | None = None) -> int:
    """The floats a K/V cache holds per token and layer: one key (d_k) and one value (d_v) per K/V head.
    kv_heads = g for GQA, 1 for MQA, h for multi-head attention."""
    return int(kv_heads) * (int(d_k) + int(d_k if d_v is None else d_v))
