"""The online softmax of FlashAttention: one row of scores read a tile of keys at a time.

Per query, three running values: the largest score so far m, the sum ℓ of e^(s − m) so far, and the
output accumulator o = Σ e^(s_j − m) v_j. A tile whose maximum is larger moves m, and everything
summed so far is rescaled by e^(m_old − m_new) ≤ 1:

    m_t = max(m_{t−1}, max_{j ∈ tile t} s_j)
    ℓ_t = e^(m_{t−1} − m_t) ℓ_{t−1} + Σ_{j ∈ tile t} e^(s_j − m_t)
    o_t = e^(m_{t−1} − m_t) o_{t−1} + Σ_{j ∈ tile t} e^(s_j − m_t) v_j
    O = o_T / ℓ_T = softmax(s) V                                   exactly

A tile whose keys are all masked (−∞) is skipped: m, ℓ and o stay as they were.
Axes: B a leading stack, n_k keys in T tiles of `tile` keys, d_v.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OnlineTrace:
    """The running values after each tile, for one query row (or a stack of rows)."""

    m: np.ndarray  # (..., T): the running maximum after tile t
    l: np.ndarray  # (..., T): the running sum
    o: np.ndarray  # (..., T, d_v): the output accumulator
    O: np.ndarray  # (..., 1, d_v): o_T / ℓ_T


def online_softmax(s: np.ndarray, V: np.ndarray, tile: int) -> OnlineTrace:
    """s (..., n_k) one row of scores per query, V (..., n_k, d_v); tiles of `tile` keys in order."""
    s, V = np.asarray(s, dtype=float), np.asarray(V, dtype=float)
    n_k = s.shape[-1]
    if tile < 1 or n_k % tile:
        raise ValueError(f"{n_k} keys do not split into tiles of {tile}")
    m = np.full(s.shape[:-1], -np.inf)  # (...,)
    l = np.zeros(s.shape[:-1])
    o = np.zeros((*s.shape[:-1], V.shape[-1]))  # (..., d_v)
    ms, ls, os_ = [], [], []
    with np.errstate(invalid="ignore"):
        for start in range(0, n_k, tile):
            part = s[..., start:start + tile]  # (..., tile)
            m_new = np.maximum(m, part.max(axis=-1))
            seen = np.isfinite(m_new)  # a row whose keys so far are all masked has nothing yet
            safe = np.where(seen, m_new, 0.0)
            rescale = np.where(seen, np.exp(np.where(np.isfinite(m), m, -np.inf) - safe), 1.0)  # e^(m_old − m_new)
            p = np.exp(part - safe[..., None])  # (..., tile): e^(s_j − m_t), 0 for a masked key
            l = rescale * l + p.sum(axis=-1)
            o = rescale[..., None] * o + (p[..., None, :] @ V[..., start:start + tile, :])[..., 0, :]  # (..., d_v)
            m = m_new
            ms.append(m), ls.append(l), os_.append(o)
    O = (o / l[..., None])[..., None, :]  # (..., 1, d_v)
    return OnlineTrace(np.stack(ms, axis=-1), np.stack(ls, axis=-1), np.stack(os_, axis=-2), O)
