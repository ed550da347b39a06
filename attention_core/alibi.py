"""ALiBi (attention with linear biases): no position embedding; a head's scores are penalised by how
far back the key lies, with one slope per head.

    m_h = 2^(−8h/H)                       # head h = 1 … H: the slopes halve geometrically
    B_ij = −m_h (i − j)  (j ≤ i),  −∞ (j > i: the causal mask)
    A = softmax(S / √d_k + B)               # the softmax of the biased scores (biased)
"""

from __future__ import annotations

import numpy as np


def alibi_slope(h, heads: int) -> np.ndarray:
    """m_h = 2^(−8h/H) for head h counted from 1."""
    return 2.0 ** (-8.0 * np.asarray(h, dtype=float) / heads)


def alibi_bias(n: int, slope, causal: bool = True) -> np.ndarray:
    """(..., n, n) for slopes (...): −m (i − j) on and below the diagonal, −∞ above it; not `causal`: −m |i − j|
    on every cell."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    m = np.asarray(slope, dtype=float)[..., None, None]
    if not causal:
        return -m * np.abs(i - j) + 0.0
    return np.where(j <= i, -m * (i - j), -np.inf) + 0.0


def biased(scaled: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """scaled + bias; a bias with one more axis (heads) than the scaled scores biases them once per head."""
    scaled = np.asarray(scaled, dtype=float)
    return (scaled[..., None, :, :] if np.ndim(bias) > scaled.ndim else scaled) + bias

