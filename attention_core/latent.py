"""Multi-head latent attention (MLA, DeepSeek-V2): keys and values rebuilt from one cached latent per token.

    C   = X W_DKV                     (n, d_c): the only thing a decoder caches, d_c floats per token and layer
    K_i = C W_UK_i,  V_i = C W_UV_i   (n, d_k), (n, d_v): head i's keys and values, up-projected
    O_i = softmax(mask(Q_i K_iᵀ / √d_k)) V_i,  Q_i = X W_Q_i
    absorbed: Q_i K_iᵀ = X W_Q_i (C W_UK_i)ᵀ = (X W_QK_i) Cᵀ with W_QK_i = W_Q_i W_UK_iᵀ (d, d_c), computed once

Multi-head attention caches h (d_k + d_v) floats per token and layer instead of d_c. (The decoupled RoPE
key of the paper is left out.) Axes: n tokens, d model width, d_c latent width, h heads, d_k, d_v.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .attention import AttentionTrace, scaled_dot_product


def latent(X: np.ndarray, W_DKV: np.ndarray) -> np.ndarray:
    """C = X W_DKV: the down-projection every head's keys and values are rebuilt from."""
    return X @ W_DKV  # (n, d) @ (d, d_c) -> (n, d_c)


def absorbed_query(W_Q: np.ndarray, W_UK: np.ndarray) -> np.ndarray:
    """W_QK = W_Q W_UKᵀ, so that (X W_QK) Cᵀ = (X W_Q)(C W_UK)ᵀ."""
    return W_Q @ W_UK.mT  # (d, d_k) @ (d_k, d_c) -> (d, d_c)


def latent_attention(X: np.ndarray, W_DKV: np.ndarray, W_Q: Sequence[np.ndarray], W_UK: Sequence[np.ndarray],
                     W_UV: Sequence[np.ndarray], causal: bool = False) -> tuple[np.ndarray, list[AttentionTrace]]:
    """(C, one trace per head) with K_i = C W_UK_i and V_i = C W_UV_i."""
    C = latent(X, W_DKV)  # (n, d_c)
    heads = [scaled_dot_product(X @ q, C @ k, C @ v, causal=causal) for q, k, v in zip(W_Q, W_UK, W_UV)]
    return C, heads


def cache_floats(d_c: int) -> int:
    """Floats cached per token and layer: the latent row alone."""
    return int(d_c)


def multi_head_cache_floats(h: int, d_k: int, d_v: int) -> int:
    """What multi-head attention caches instead: a key and a value per head."""
    return int(h) * (int(d_k) + int(d_v))
