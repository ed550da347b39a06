"""The online softmax of FlashAttention: one row of scores read a tile of keys at a time.

Per query, three running values: the largest score so far m, the sum ℓ of e^(s − m) so far, and the
output accumulator o = Σ e^(s_j − m) v_j. A tile whose maximum is larger moves m, and everything
summed so far is rescaled by e^(m_old − m_new) ≤ 1:

    m_t = max(m_{t−1}, max_{j ∈ tile t} s_j)
    ℓ_t = e^(m_{t−1} − m_t) ℓ_{t−1} + Σ_{j ∈ tile t} e^(s_j − m_t)
    o_t = e^(m_{t−1} − m_t) o_{t−1} + Σ_{j ∈ tile t} e^(s_j − m_t) v_j
    O = o_T / ℓ_T = softmax(s) V                                   exactly

A tile whose keys are all masked (−∞) is skipped: m, ℓ and o stay as they were. Row t of m and ℓ (..., T, 1)
and of o (..., T, d_v) holds the value after tile t; S is (..., 1, n_k), V (..., n_k, d_v), n_k keys in T tiles.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def _by_tile(S: np.ndarray, tile: int) -> np.ndarray:
    """(..., 1, n_k) -> (..., T, tile)."""
    s, tile = np.asarray(S, dtype=float)[..., 0, :], int(tile)
    if tile < 1 or s.shape[-1] % tile:
        raise ValueError(f"{s.shape[-1]} keys do not split into tiles of {tile}")
    return s.reshape(*s.shape[:-1], -1, tile)


def running_max(S: np.ndarray, tile: int, own: bool = False) -> np.ndarray:
    """m (..., T, 1): row t the largest score of tiles 1 … t (`own`, a mistake: of tile t alone; a tile whose
    keys are all masked keeps the row before)."""
    m = _by_tile(S, tile).max(axis=-1)  # (..., T): each tile's own maximum
    for t in range(1, m.shape[-1]):
        m[..., t] = np.where(np.isneginf(m[..., t]), m[..., t - 1], m[..., t]) if own else \
            np.maximum(m[..., t - 1], m[..., t])
    return m[..., None]


def running_sum(S: np.ndarray, m: np.ndarray, tile: int, V: np.ndarray | None = None, *, rescale: int = 1,
                divide_by: np.ndarray | None = None, table: Callable[[np.ndarray], np.ndarray] = np.exp,
                write: Callable[[np.ndarray], np.ndarray] = lambda row: row) -> np.ndarray:
    """ℓ (V None) or o after each tile from the running maxima m: acc_t = e^(rescale·(m_{t−1} − m_t)) acc_{t−1}
    + Σ_{j ∈ t} e^(s_j − m_t) [v_j], from m_0 = −∞ and acc_0 = 0. The ways it is got wrong are parameters:
    `rescale` −1 inverted, 0 none; `divide_by` ℓ: acc_t divided by ℓ_t after every tile. `table(x)` is e^x as
    it is read (the factors, then the terms), `write(row)` a row as written: the next tile carries it on."""
    s = _by_tile(S, tile)  # (..., T, tile)
    m = np.asarray(m, dtype=float)[..., 0]  # (..., T)
    before = np.concatenate([np.full(m[..., :1].shape, -np.inf), m[..., :-1]], axis=-1)  # m_{t−1}
    base = np.where(np.isfinite(m), m, 0.0)  # no key seen yet: every term is e^(−∞) = 0
    carried = np.isfinite(before)  # m_0 = −∞: nothing carried, the factor is 0
    factors = table(np.where(carried, rescale * (np.where(carried, before, 0.0) - base), -np.inf))  # (..., T)
    terms = table(s - base[..., None])  # (..., T, tile)
    if V is None:
        added = terms.sum(axis=-1)[..., None]  # (..., T, 1)
    else:
        V = np.asarray(V, dtype=float)
        added = (terms[..., None, :] @ V.reshape(*V.shape[:-2], *s.shape[-2:], -1))[..., 0, :]  # (..., T, d_v)
    visible = np.isfinite(s).any(axis=-1)[..., None]  # (..., T, 1): the tile has a key to add
    rows, acc = [], np.zeros(added[..., 0, :].shape)
    for t in range(added.shape[-2]):
        new = factors[..., t, None] * acc + added[..., t, :]
        if divide_by is not None:
            new = new / np.asarray(divide_by, dtype=float)[..., t, :]
        rows.append(acc := write(np.where(visible[..., t, :], new, acc)))
    return np.stack(np.broadcast_arrays(*rows), axis=-2)


def output(l: np.ndarray, o: np.ndarray) -> np.ndarray:
    """O = o_T / ℓ_T: (..., T, 1), (..., T, d_v) -> (..., 1, d_v)."""
    return np.asarray(o, dtype=float)[..., -1:, :] / np.asarray(l, dtype=float)[..., -1:, :]
