"""One decoding step of a causal decoder with a KV cache.

A decoder that has already produced t tokens keeps their keys and values (the cache, t rows each).
For the next token only its own q, k and v are computed; its k and v are appended to the cache, and
its query attends to every cached position and to itself:

    K = [K_cache; k]   V = [V_cache; v]            # (t+1, d_k), (t+1, d_v)
    s = q Kᵀ,  a = softmax(s / √d_k),  o = a V     # (1, t+1), (1, t+1), (1, d_v)

No mask is needed: the new token is the last position, so nothing lies in its future. The result is
the last row of full causal attention over the t+1 tokens (the earlier rows are what the cache saves
recomputing). The cache of a whole model holds a key and a value row per token, head and layer:

    cache_floats = 2 · layers · heads · tokens · d_head
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ops import scale, scores, softmax, weighted_sum


@dataclass(frozen=True)
class DecodeStep:
    """The updated caches and the new token's score row, weights and output."""

    K: np.ndarray  # (t+1, d_k): K_cache with k as its last row
    V: np.ndarray  # (t+1, d_v): V_cache with v as its last row
    scores: np.ndarray  # (1, t+1): q Kᵀ
    scaled: np.ndarray  # (1, t+1): scores / √d_k
    A: np.ndarray  # (1, t+1): softmax of the scaled row (no mask)
    O: np.ndarray  # (1, d_v): A V


def _row(name: str, x) -> np.ndarray:
    x = np.atleast_2d(np.asarray(x, dtype=float))
    if x.shape[0] != 1:
        raise ValueError(f"{name} must be one row (1 × d), got shape {x.shape}")
    return x


def decode_step(K_cache, V_cache, q, k, v, d_k: int | None = None) -> DecodeStep:
    """The new token's attention with the cache. d_k defaults to the width of q."""
    q, k, v = _row("q", q), _row("k", k), _row("v", v)
    K_cache = np.asarray(K_cache, dtype=float).reshape(-1, k.shape[1])  # (t, d_k); t = 0 is allowed
    V_cache = np.asarray(V_cache, dtype=float).reshape(-1, v.shape[1])  # (t, d_v)
    if K_cache.shape[0] != V_cache.shape[0]:
        raise ValueError(f"K_cache has {K_cache.shape[0]} rows but V_cache has {V_cache.shape[0]}")
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"q is {q.shape[1]} wide but k is {k.shape[1]}")
    K = np.vstack([K_cache, k])  # (t+1, d_k)
    V = np.vstack([V_cache, v])  # (t+1, d_v)
    S = scores(q, K)  # (1, d_k) @ (d_k, t+1) -> (1, t+1)
    Z = scale(S, int(d_k) if d_k is not None else q.shape[1])
    A = softmax(Z, axis=-1)  # the last position is the newest: nothing to mask
    return DecodeStep(K=K, V=V, scores=S, scaled=Z, A=A, O=weighted_sum(A, V))


def cache_floats(layers: int, heads: int, tokens: int, d_head: int) -> int:
    """Floats a model's K/V cache holds: a key and a value of d_head each, per token, head and layer."""
    return 2 * int(layers) * int(heads) * int(tokens) * int(d_head)
