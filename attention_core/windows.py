"""Sliding-window attention with attention sinks (StreamingLLM).

Query i (0-based) sees key j when j ≤ i (causal) and either j lies in the window of the last w
positions (i − w < j) or j is one of the s sink tokens kept at the front (j < s):

    M_ij = 0 if j ≤ i and (j > i − w or j < s), else −∞        # (n, n)

The cache of one layer and head then holds s + w keys and as many values, whatever the length T of the
text, against 2 · T · d for full attention.
"""

from __future__ import annotations

import numpy as np


def window_visible(n: int, window: int, sinks: int = 0) -> np.ndarray:
    """(n, n) bool: may query i see key j."""
    if window < 1 or sinks < 0:
        raise ValueError(f"a window needs w ≥ 1 and s ≥ 0 (got w = {window}, s = {sinks})")
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return (j <= i) & ((j > i - window) | (j < sinks))


def window_mask(n: int, window: int, sinks: int = 0) -> np.ndarray:
    """The additive mask: 0 where a key is seen, −∞ where it is not; (n, n)."""
    return np.where(window_visible(n, window, sinks), 0.0, -np.inf)


def window_mask_loop(n: int, window: int, sinks: int = 0) -> np.ndarray:
    """The same mask cell by cell, as the rule reads."""
    M = np.full((n, n), -np.inf)
    for i in range(n):
        for j in range(i + 1):
            if i - j < window or j < sinks:
                M[i, j] = 0.0
    return M


def window_cache_floats(window: int, sinks: int, d_head: int) -> int:
    """Floats one layer and head keep: a key and a value row for each of the s + w kept tokens."""
    return 2 * (window + sinks) * d_head


def full_cache_floats(tokens: int, d_head: int) -> int:
    """Floats one layer and head keep with full attention over `tokens` tokens."""
    return 2 * tokens * d_head
