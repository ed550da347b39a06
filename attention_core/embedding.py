"""Token embedding lookup: X = E[token_ids], and its gradient G_E."""

from __future__ import annotations

import numpy as np


def embed(token_ids, E) -> np.ndarray:
    """Row i of X is row token_ids[i] of the table E."""
    E = np.asarray(E, dtype=float)  # (m, d)
    ids = np.asarray(token_ids, dtype=int)  # (n,)
    if ids.ndim != 1:
        raise ValueError("token_ids must be a flat list of integers")
    if ids.size and (ids.min() < 0 or ids.max() >= E.shape[0]):
        raise ValueError(f"token ids must lie in 0…{E.shape[0] - 1}, the rows of E")
    return E[ids]  # (n, d)


def embed_backward(token_ids, G_X, vocab_size: int) -> np.ndarray:
    """G_E: each row of G_X is added to the row of its token; a repeated token accumulates."""
    G_X = np.asarray(G_X, dtype=float)  # (n, d)
    ids = np.asarray(token_ids, dtype=int)  # (n,)
    if G_X.ndim != 2 or G_X.shape[0] != ids.size:
        raise ValueError(f"G_X is {'×'.join(map(str, G_X.shape))} but there are {ids.size} token ids: "
                         "G_X needs one row per token")
    G_E = np.zeros((vocab_size, G_X.shape[1]))  # (m, d)
    # np.add.at adds once per occurrence; G_E[ids] += G_X would keep only the last of repeats
    np.add.at(G_E, ids, G_X)
    return G_E


def embed_backward_loop(token_ids, G_X, vocab_size: int) -> np.ndarray:
    """The same gradient as a plain loop over positions."""
    G_X = np.asarray(G_X, dtype=float)
    G_E = np.zeros((vocab_size, G_X.shape[1]))
    for i, tok in enumerate(token_ids):
        G_E[tok] += G_X[i]
    return G_E
