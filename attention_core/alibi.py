"""ALiBi (attention with linear biases): no position embedding; a head's scores are penalised by how
far back the key lies, with one slope per head.

    m_h = 2^(−8h/H)                       # head h = 1 … H: the slopes halve geometrically
    B_ij = −m_h (i − j)  (j ≤ i),  −∞ (j > i: the causal mask)
    A = softmax(S / √d_k + B)
"""

from __future__ import annotations

import numpy as np

from .ops import softmax


def alibi_slope(h, heads: int) -> np.ndarray:
    """m_h = 2^(−8h/H) for head h counted from 1."""
    return 2.0 ** (-8.0 * np.asarray(h, dtype=float) / heads)


def alibi_bias(n: int, slope: float) -> np.ndarray:
    """(n, n): −m (i − j) on and below the diagonal, −∞ above it."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return np.where(j <= i, -slope * (i - j), -np.inf) + 0.0


def alibi_attention(S: np.ndarray, d_k: int, slope: float) -> tuple[np.ndarray, np.ndarray]:
    """(masked, A): S / √d_k + B and its row-wise softmax; S (..., n, n)."""
    S = np.asarray(S, dtype=float)
    masked = S / np.sqrt(d_k) + alibi_bias(S.shape[-1], slope)
    return masked, softmax(masked)
