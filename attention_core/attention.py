"""Scaled dot-product attention with every intermediate kept, and its backward pass.

    Attention(Q, K, V) = softmax(mask(Q Kᵀ / √d_k)) V

n_q queries attend to n_k keys (axis letters in ops.py): self-attention is the square case
n_q = n_k = n with Q, K, V all from X; cross-attention takes Q from X and K, V from a memory H.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ops


@dataclass(frozen=True)
class AttentionTrace:
    """Every intermediate of one forward pass (X and the weights are None for a Q, K, V trace;
    H is the memory of a cross-attention trace, None for self-attention)."""

    Q: np.ndarray  # (n_q, d_k)
    K: np.ndarray  # (n_k, d_k)
    V: np.ndarray  # (n_k, d_v)
    scores: np.ndarray  # (n_q, n_k)  Q Kᵀ
    scaled: np.ndarray  # (n_q, n_k)  scores / √d_k
    masked: np.ndarray  # (n_q, n_k)  scaled, −∞ where causal_mask hides a key when causal
    A: np.ndarray  # (n_q, n_k)  row-wise softmax of masked
    O: np.ndarray  # (n_q, d_v) A V
    d_k: int
    causal: bool
    X: np.ndarray | None = None  # (n_q, d)  the queries' input (self-attention: also the keys')
    W_Q: np.ndarray | None = None  # (d, d_k)
    W_K: np.ndarray | None = None  # (d, d_k), or (d_m, d_k) in cross-attention
    W_V: np.ndarray | None = None  # (d, d_v), or (d_m, d_v) in cross-attention
    H: np.ndarray | None = None  # (n_k, d_m)  the memory keys and values come from (cross-attention)


@dataclass(frozen=True)
class AttentionGrads:
    """Gradients of a scalar loss with respect to every intermediate, given G_O = ∂L/∂O.

    Self-attention: G_X adds the query, key and value paths and G_H is None. Cross-attention: G_X is
    the query path only, and G_H = G_K W_Kᵀ + G_V W_Vᵀ is the memory's gradient (keys and values).
    """

    G_O: np.ndarray  # (n_q, d_v)
    G_A: np.ndarray  # (n_q, n_k)
    G_V: np.ndarray  # (n_k, d_v)
    G_scaled: np.ndarray  # (n_q, n_k)  gradient w.r.t. the softmax input
    G_scores: np.ndarray  # (n_q, n_k)
    G_Q: np.ndarray  # (n_q, d_k)
    G_K: np.ndarray  # (n_k, d_k)
    G_W_Q: np.ndarray | None = None  # (d, d_k)   Xᵀ G_Q
    G_W_K: np.ndarray | None = None  # (d, d_k)   Xᵀ G_K, or (d_m, d_k) Hᵀ G_K in cross-attention
    G_W_V: np.ndarray | None = None  # (d, d_v)   Xᵀ G_V, or (d_m, d_v) Hᵀ G_V in cross-attention
    G_X: np.ndarray | None = None  # (n_q, d)
    G_H: np.ndarray | None = None  # (n_k, d_m)  cross-attention only


def _as_matrix(name: str, M) -> np.ndarray:
    M = np.asarray(M, dtype=float)
    if M.ndim != 2:
        raise ValueError(f"{name} must be a matrix (2-D), got {M.ndim}-D")
    return M


def scaled_dot_product(Q, K, V, causal: bool = False) -> AttentionTrace:
    """softmax(mask(Q Kᵀ / √d_k)) V, keeping every step."""
    Q, K, V = _as_matrix("Q", Q), _as_matrix("K", K), _as_matrix("V", V)
    if Q.shape[1] != K.shape[1]:
        raise ValueError(f"Q is {Q.shape[0]}×{Q.shape[1]} and K is {K.shape[0]}×{K.shape[1]}: "
                         "their rows must have the same width d_k")
    if K.shape[0] != V.shape[0]:
        raise ValueError(f"K is {K.shape[0]}×{K.shape[1]} and V is {V.shape[0]}×{V.shape[1]}: "
                         "one value row per key")
    if causal and Q.shape[0] > K.shape[0]:
        # the queries are the last n_q of the n_k positions; with more queries than keys the first
        # rows would see no key at all, and a softmax over nothing is undefined
        raise ValueError(f"Q is {Q.shape[0]}×{Q.shape[1]} and K is {K.shape[0]}×{K.shape[1]}: "
                         "a causal mask needs at least as many keys as queries")
    d_k = Q.shape[1]
    S = ops.scores(Q, K)  # 1. (n_q, n_k)
    scaled = ops.scale(S, d_k)  # 2. (n_q, n_k)
    masked = ops.apply_mask(scaled, causal)  # 3. (n_q, n_k)
    A = ops.softmax(masked, axis=-1)  # 4. (n_q, n_k), rows sum to 1
    O = ops.weighted_sum(A, V)  # 5. (n_q, d_v)
    return AttentionTrace(Q=Q, K=K, V=V, scores=S, scaled=scaled, masked=masked, A=A, O=O,
                          d_k=d_k, causal=causal)


def _check_projection(input_name: str, M: np.ndarray, name: str, W: np.ndarray) -> None:
    if W.shape[0] != M.shape[1]:
        raise ValueError(f"{input_name} is {M.shape[0]}×{M.shape[1]} but {name} is {W.shape[0]}×{W.shape[1]}: "
                         f"{name} needs {M.shape[1]} rows")


def self_attention(X, W_Q, W_K, W_V, causal: bool = False) -> AttentionTrace:
    """Project X to Q, K, V, then scaled dot-product attention."""
    X = _as_matrix("X", X)
    W_Q, W_K, W_V = _as_matrix("W_Q", W_Q), _as_matrix("W_K", W_K), _as_matrix("W_V", W_V)
    for name, W in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V)):
        _check_projection("X", X, name, W)
    Q = ops.project(X, W_Q)  # (n, d_k)
    K = ops.project(X, W_K)  # (n, d_k)
    V = ops.project(X, W_V)  # (n, d_v)
    tr = scaled_dot_product(Q, K, V, causal=causal)
    return AttentionTrace(**{**tr.__dict__, "X": X, "W_Q": W_Q, "W_K": W_K, "W_V": W_V})


def cross_attention(X, H, W_Q, W_K, W_V, causal: bool = False) -> AttentionTrace:
    """Queries from X, keys and values from a memory H: Q = X W_Q, K = H W_K, V = H W_V, then attention.

    causal=True follows the decoding convention of ops.causal_mask (needs n_q ≤ n_k)."""
    X, H = _as_matrix("X", X), _as_matrix("H", H)
    W_Q, W_K, W_V = _as_matrix("W_Q", W_Q), _as_matrix("W_K", W_K), _as_matrix("W_V", W_V)
    _check_projection("X", X, "W_Q", W_Q)
    _check_projection("H", H, "W_K", W_K)
    _check_projection("H", H, "W_V", W_V)
    Q = ops.project(X, W_Q)  # (n_q, d) @ (d, d_k) -> (n_q, d_k)
    K = ops.project(H, W_K)  # (n_k, d_m) @ (d_m, d_k) -> (n_k, d_k)
    V = ops.project(H, W_V)  # (n_k, d_m) @ (d_m, d_v) -> (n_k, d_v)
    tr = scaled_dot_product(Q, K, V, causal=causal)
    return AttentionTrace(**{**tr.__dict__, "X": X, "H": H, "W_Q": W_Q, "W_K": W_K, "W_V": W_V})


def backward(tr: AttentionTrace, G_O) -> AttentionGrads:
    """Backpropagate G_O = ∂L/∂O through every step of the trace, last step first."""
    G_O = _as_matrix("G_O", G_O)
    if G_O.shape != tr.O.shape:
        raise ValueError(f"G_O must have the shape of O, {tr.O.shape[0]}×{tr.O.shape[1]}, "
                         f"but it is {G_O.shape[0]}×{G_O.shape[1]}")
    G_A, G_V = ops.weighted_sum_backward(tr.A, tr.V, G_O)  # 5. (n_q, n_k), (n_k, d_v)
    G_scaled = ops.softmax_backward(tr.A, G_A)  # 4. (n_q, n_k)
    G_scaled = ops.apply_mask_backward(G_scaled, tr.causal)  # 3. masked cells: exactly 0
    G_S = ops.scale_backward(G_scaled, tr.d_k)  # 2. (n_q, n_k)
    G_Q, G_K = ops.scores_backward(tr.Q, tr.K, G_S)  # 1. (n_q, d_k), (n_k, d_k)
    grads = dict(G_O=G_O, G_A=G_A, G_V=G_V, G_scaled=G_scaled, G_scores=G_S, G_Q=G_Q, G_K=G_K)
    if tr.X is None:
        return AttentionGrads(**grads)
    memory = tr.X if tr.H is None else tr.H  # (n_k, d_m): H, or X itself in self-attention (d_m = d)
    G_W_Q, G_X_q = ops.project_backward(tr.X, tr.W_Q, G_Q)  # (d, d_k), (n_q, d)
    G_W_K, G_M_k = ops.project_backward(memory, tr.W_K, G_K)  # (d_m, d_k), (n_k, d_m)
    G_W_V, G_M_v = ops.project_backward(memory, tr.W_V, G_V)  # (d_m, d_v), (n_k, d_m)
    grads.update(G_W_Q=G_W_Q, G_W_K=G_W_K, G_W_V=G_W_V)
    if tr.H is None:
        # X feeds all three projections, so its gradient adds the three paths
        grads.update(G_X=G_X_q + G_M_k + G_M_v)  # (n, d)
    else:
        # X feeds only the queries; H feeds keys and values, so its gradient adds those two paths
        grads.update(G_X=G_X_q, G_H=G_M_k + G_M_v)  # (n_q, d), (n_k, d_m)
    return AttentionGrads(**grads)
