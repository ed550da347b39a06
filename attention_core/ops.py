"""The steps of attention, each forward next to its local backward.

Axis letters used in shape comments throughout the package:
    n_q  query tokens (rows of Q, of the score matrix and of O)
    n_k  key tokens (rows of K and V, columns of the score matrix)
    n    tokens of self-attention, where n_q = n_k = n (rows of X; a projection works on any n rows)
    d    d_model, the width of an input row of X
    d_m  width of a memory row of H in cross-attention (d_m = d in the usual transformer)
    d_k  width of a query / key row
    d_v  width of a value row
    h    number of heads
    m    vocabulary size (rows of an embedding table E)
"""

from __future__ import annotations

import functools
import math

import numpy as np

# ---------------------------------------------------------------- projections
# Q = X W  and its gradients  G_W = Xᵀ G_Q,  G_X = G_Q Wᵀ  (any n rows: queries from X, and in
# cross-attention keys and values from a memory H with n_k rows)


def project(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Q = X W (or K, V with their weight matrices)."""
    return X @ W  # (n, d) @ (d, d_k) -> (n, d_k)


def project_backward(X: np.ndarray, W: np.ndarray, G_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (G_W, G_X) for out = X W: G_W = Xᵀ G_out, G_X = G_out Wᵀ."""
    G_W = X.mT @ G_out  # (d, n) @ (n, d_k) -> (d, d_k)
    G_X = G_out @ W.mT  # (n, d_k) @ (d_k, d) -> (n, d)
    return G_W, G_X


# ---------------------------------------------------------------- scores
# S = Q Kᵀ: row i is query i asking, column j is key j being asked


def scores(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    """S = Q Kᵀ."""
    return Q @ K.mT  # (n_q, d_k) @ (d_k, n_k) -> (n_q, n_k)


def scores_backward(Q: np.ndarray, K: np.ndarray, G_S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (G_Q, G_K) for S = Q Kᵀ: G_Q = G_S K, G_K = G_Sᵀ Q."""
    G_Q = G_S @ K  # (n_q, n_k) @ (n_k, d_k) -> (n_q, d_k)
    G_K = G_S.mT @ Q  # (n_k, n_q) @ (n_q, d_k) -> (n_k, d_k)
    return G_Q, G_K


# ---------------------------------------------------------------- scaling
# scaled = S / √d_k keeps the variance of a score near 1 whatever d_k is


def scale(S: np.ndarray, d_k: int) -> np.ndarray:
    """scaled = S / √d_k."""
    return S / math.sqrt(d_k)  # (n_q, n_k)


def scale_backward(G_scaled: np.ndarray, d_k: int) -> np.ndarray:
    """G_S = G_scaled / √d_k (a constant factor passes straight through)."""
    return G_scaled / math.sqrt(d_k)  # (n_q, n_k)


# ---------------------------------------------------------------- causal mask
# future positions get −∞, so their weight is exactly 0. With n_q queries and n_k keys the queries
# are the LAST n_q of the n_k positions (decoding with a KV cache: query i sits at position
# i + n_k − n_q), so key j is hidden from query i when j > i + (n_k − n_q); square: when j > i


def causal_mask(n_q: int, n_k: int | None = None) -> np.ndarray:
    """Boolean (n_q, n_k) matrix, True where a query must not see the key; causal_mask(n) is (n, n).

    Square: strictly above the diagonal. Rectangle: above the diagonal that ends in the bottom-right
    corner, so the last query sees every key. With n_q > n_k the first n_q − n_k rows are all hidden.
    """
    if n_k is None:
        n_k = n_q  # self-attention: as many queries as keys
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=1 + n_k - n_q)  # (n_q, n_k)


@functools.lru_cache(maxsize=256)
def hidden_cells(n_q: int, n_k: int | None = None) -> np.ndarray:
    """causal_mask(n_q, n_k), made once per shape and read-only: for indexing, never to write into (the
    mask steps run it thousands of times a second; causal_mask itself still returns a fresh array)."""
    mask = causal_mask(n_q, n_k)
    mask.setflags(write=False)
    return mask


def apply_mask(scaled: np.ndarray, causal: bool) -> np.ndarray:
    """masked = scaled with −∞ where causal_mask hides a key when causal, else a copy of scaled."""
    masked = np.array(scaled, dtype=float)  # (n_q, n_k)
    if causal:
        masked[..., hidden_cells(*masked.shape[-2:])] = -np.inf
    return masked


def apply_mask_backward(G_masked: np.ndarray, causal: bool) -> np.ndarray:
    """Masked cells are constants, so no gradient flows back through them."""
    G = np.array(G_masked, dtype=float)  # (n_q, n_k)
    if causal:
        G[..., hidden_cells(*G.shape[-2:])] = 0.0
    return G


def padding_mask(pad, causal: bool = False) -> np.ndarray:
    """The additive mask of one padded sequence: (n, n), −∞ where query i may not see key j, else 0.

    pad holds one flag per position (1 = a padding token), as (n,) or as a row (1, n); a stack of rows
    (..., 1, n) gives a stack of masks (..., n, n). Padding hides a KEY from every query (its column);
    with causal=True the future keys (j > i) are hidden too. A query whose every key is hidden has a
    row of −∞ only (see softmax_visible)."""
    pad = np.asarray(pad, dtype=bool)
    flags = pad[..., 0, :] if pad.ndim > 1 else pad  # (..., n)
    n = flags.shape[-1]
    hidden = np.broadcast_to(flags[..., None, :], (*flags.shape[:-1], n, n))  # column j hidden when key j pads
    if causal:
        hidden = hidden | hidden_cells(n)
    return np.where(hidden, -np.inf, 0.0)  # (..., n, n)


# ---------------------------------------------------------------- softmax
# A = softmax over each row: every query spreads a total weight of 1 over the keys


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along `axis`; −∞ entries get weight exactly 0."""
    x = np.asarray(x, dtype=float)
    # subtract the row max: same result (the factor e^{-max} cancels), no overflow
    shifted = x - x.max(axis=axis, keepdims=True)  # the methods: np.max and np.sum's reductions, less overhead
    e = np.exp(shifted)  # exp(−∞) is exactly 0.0
    return e / e.sum(axis=axis, keepdims=True)


def softmax_visible(x: np.ndarray) -> np.ndarray:
    """Row-wise softmax where a row that sees no key at all (every entry −∞) gets weights 0 and not
    NaN: the convention of a fully masked query (it attends to nothing, so its output is 0)."""
    x = np.asarray(x, dtype=float)  # (n_q, n_k)
    empty = np.all(np.isneginf(x), axis=-1)  # (n_q,)
    out = np.zeros(x.shape)
    if (~empty).any():
        out[~empty] = softmax(x[~empty], axis=-1)
    return out


def softmax_backward(A: np.ndarray, G_A: np.ndarray) -> np.ndarray:
    """G_scaled = A ⊙ (G_A − rowsum(A ⊙ G_A)), the softmax Jacobian applied row by row."""
    row_dot = np.sum(A * G_A, axis=-1, keepdims=True)  # (n_q, 1)
    return A * (G_A - row_dot)  # (n_q, n_k); masked cells have A = 0, so 0 exactly


def softmax_backward_loop(A: np.ndarray, G_A: np.ndarray) -> np.ndarray:
    """The same, written as the full Jacobian per row: ∂a_j/∂z_k = a_j (δ_jk − a_k)."""
    G = np.zeros_like(A, dtype=float)  # (n_q, n_k)
    for i, a in enumerate(A):
        J = np.diag(a) - np.outer(a, a)  # (n_k, n_k), symmetric
        G[i] = J @ G_A[i]
    return G


# ---------------------------------------------------------------- weighted sum
# O = A V: output row i is the mix of value rows weighted by query i's attention


def weighted_sum(A: np.ndarray, V: np.ndarray) -> np.ndarray:
    """O = A V."""
    return A @ V  # (n_q, n_k) @ (n_k, d_v) -> (n_q, d_v)


def weighted_sum_backward(A: np.ndarray, V: np.ndarray, G_O: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (G_A, G_V) for O = A V: G_A = G_O Vᵀ, G_V = Aᵀ G_O."""
    G_A = G_O @ V.mT  # (n_q, d_v) @ (d_v, n_k) -> (n_q, n_k)
    G_V = A.mT @ G_O  # (n_k, n_q) @ (n_q, d_v) -> (n_k, d_v)
    return G_A, G_V


# ---------------------------------------------------------------- the softmax Jacobian of one row
# J = ∂a/∂z = diag(a) − aᵀ a for a = softmax(z): J_jk = a_j (δ_jk − a_k). Its largest entry is the
# largest a_j (1 − a_j), at most 1/4: a sharp row (one weight near 1) passes almost no gradient back.


def softmax_jacobian(z: np.ndarray) -> np.ndarray:
    """J = diag(a) − aᵀ a of the softmax a of one row z (1, n) or (n,); (n, n), symmetric."""
    a = softmax(np.asarray(z, dtype=float).ravel())  # (n,)
    return np.diag(a) - np.outer(a, a)  # (n, n)


def softmax_jacobian_loop(z: np.ndarray) -> np.ndarray:
    """The same cell by cell: J_jk = a_j (δ_jk − a_k)."""
    a = softmax(np.asarray(z, dtype=float).ravel())  # (n,)
    n = a.size
    return np.array([[a[j] * ((1.0 if j == k else 0.0) - a[k]) for k in range(n)] for j in range(n)])
