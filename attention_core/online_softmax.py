"""The online softmax of FlashAttention: one row of scores read a tile of keys at a time.

Per query, three running values: the largest score so far m, the sum ℓ of e^(s − m) so far, and the
output accumulator o = Σ e^(s_j − m) v_j. A tile whose maximum is larger moves m, and everything
summed so far is rescaled by e^(m_old − m_new) ≤ 1:

    m_t = max(m_{t−1}, max_{j ∈ tile t} s_j)
    ℓ_t = e^(m_{t−1} − m_t) ℓ_{t−1} + Σ_{j ∈ tile t} e^(s_j − m_t)
    o_t = e^(m_{t−1} − m_t) o_{t−1} + Σ_{j ∈ tile t} e^(s_j − m_t) v_j
    O = o_T / ℓ_T = softmax(s) V                                   exactly

A tile whose keys are all masked (−∞) is skipped: m, ℓ and o stay as they were. Row t of m (..., T, 1),
ℓ (..., T, 1) and o (..., T, d_v) holds the values after tile t. The ways the recurrence is got wrong are
parameters of the same walk: the rescale left out or inverted (`rescale`), o divided by ℓ after every tile
(`divide_by`), each tile's own maximum as m (running_max(own=True), then nothing rescaled).
Axes: a leading stack, n_k keys in T tiles of `tile` keys, d_v.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OnlineTrace:
    """The running values after each tile, for one query row (or a stack of rows)."""

    m: np.ndarray  # (..., T): the running maximum after tile t
    l: np.ndarray  # (..., T): the running sum
    o: np.ndarray  # (..., T, d_v): the output accumulator
    O: np.ndarray  # (..., 1, d_v): o_T / ℓ_T


def _tiles(n_k: int, tile: int) -> int:
    if tile < 1 or n_k % tile:
        raise ValueError(f"{n_k} keys do not split into tiles of {tile}")
    return n_k // tile


def _by_tile(s: np.ndarray, tile: int) -> np.ndarray:
    """(..., n_k) -> (..., T, tile)."""
    return s.reshape(*s.shape[:-1], _tiles(s.shape[-1], tile), tile)


def running_max(S: np.ndarray, tile: int, own: bool = False) -> np.ndarray:
    """S (..., 1, n_k) -> m (..., T, 1): row t the largest score of tiles 1 … t (`own`: of tile t alone);
    a tile whose keys are all masked keeps the row before."""
    maxima = _by_tile(np.asarray(S, dtype=float)[..., 0, :], tile).max(axis=-1)  # (..., T)
    if not own:
        return np.maximum.accumulate(maxima, axis=-1)[..., None]
    m = maxima.copy()
    for t in range(1, m.shape[-1]):
        m[..., t] = np.where(np.isneginf(maxima[..., t]), m[..., t - 1], maxima[..., t])
    return m[..., None]


def _as_is(x: np.ndarray) -> np.ndarray:
    return x


def running_sum(S: np.ndarray, m: np.ndarray, tile: int, V: np.ndarray | None = None, *, rescale: int = 1,
                divide_by: np.ndarray | None = None, table: Callable[[np.ndarray], np.ndarray] = np.exp,
                write: Callable[[np.ndarray], np.ndarray] = _as_is) -> np.ndarray:
    """ℓ (V None: (..., T, 1)) or o ((..., T, d_v)) after each tile, from S (..., 1, n_k) and the running
    maxima m (..., T, 1):

        acc_t = e^(rescale·(m_{t−1} − m_t)) acc_{t−1} + Σ_{j ∈ t} e^(s_j − m_t) [v_j]       m_0 = −∞, acc_0 = 0

    `rescale` 1 is the right factor (−1 inverted, 0 none); `divide_by` ℓ (..., T, 1): acc_t divided by ℓ_t
    after every tile. `table(x)` is e^x as it is read (every factor, then every term); `write(row)` a row as
    it is written: the next tile carries on from it. A tile whose keys are all masked leaves the row as it was."""
    s = _by_tile(np.asarray(S, dtype=float)[..., 0, :], tile)  # (..., T, tile)
    m = np.asarray(m, dtype=float)[..., 0]  # (..., T)
    before = np.concatenate([np.full(m[..., :1].shape, -np.inf), m[..., :-1]], axis=-1)  # m_{t−1}
    base = np.where(np.isfinite(m), m, 0.0)  # no key seen yet: every term is e^(−∞) = 0
    with np.errstate(invalid="ignore", over="ignore"):
        factors = table(np.where(np.isfinite(before), rescale * (before - base), -np.inf))  # (..., T)
        terms = table(s - base[..., None])  # (..., T, tile)
    if V is None:
        added = terms.sum(axis=-1)[..., None]  # (..., T, 1)
    else:
        values = np.asarray(V, dtype=float)
        values = values.reshape(*values.shape[:-2], *s.shape[-2:], -1)  # (..., T, tile, d_v)
        added = (terms[..., None, :] @ values)[..., 0, :]  # (..., T, d_v)
    visible = np.isfinite(s).any(axis=-1)[..., None]  # (..., T, 1): the tile has a key to add
    rows, acc = [], np.zeros(added[..., 0, :].shape)
    for t in range(added.shape[-2]):
        new = factors[..., t, None] * acc + added[..., t, :]
        if divide_by is not None:
            new = new / np.asarray(divide_by, dtype=float)[..., t, :]
        acc = write(np.where(visible[..., t, :], new, acc))
        rows.append(acc)
    return np.stack(np.broadcast_arrays(*rows), axis=-2)


def output(l: np.ndarray, o: np.ndarray) -> np.ndarray:
    """O = o_T / ℓ_T: (..., T, 1), (..., T, d_v) -> (..., 1, d_v)."""
    return np.asarray(o, dtype=float)[..., -1:, :] / np.asarray(l, dtype=float)[..., -1:, :]


def online_softmax(s: np.ndarray, V: np.ndarray, tile: int) -> OnlineTrace:
    """s (..., n_k) one row of scores per query, V (..., n_k, d_v); tiles of `tile` keys in order."""
    S = np.asarray(s, dtype=float)[..., None, :]  # (..., 1, n_k)
    m = running_max(S, tile)
    l, o = running_sum(S, m, tile), running_sum(S, m, tile, V)
    return OnlineTrace(m[..., 0], l[..., 0], o, output(l, o))
