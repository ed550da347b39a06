"""Scaled dot-product attention with every intermediate kept, and its backward pass.

    Attention(Q, K, V) = softmax(mask(Q Kᵀ / √d_k)) V
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ops


@dataclass(frozen=True)
class AttentionTrace:
    """Every intermediate of one forward pass (X and the weights are None for a Q, K, V trace)."""

    Q: np.ndarray  # (n, d_k)
    K: np.ndarray  # (n, d_k)
    V: np.ndarray  # (n, d_v)
    scores: np.ndarray  # (n, n)  Q Kᵀ
    scaled: np.ndarray  # (n, n)  scores / √d_k
    masked: np.ndarray  # (n, n)  scaled, −∞ above the diagonal when causal
    A: np.ndarray  # (n, n)  row-wise softmax of masked
    O: np.ndarray  # (n, d_v) A V
    d_k: int
    causal: bool
    X: np.ndarray | None = None  # (n, d)
    W_Q: np.ndarray | None = None  # (d, d_k)
    W_K: np.ndarray | None = None  # (d, d_k)
    W_V: np.ndarray | None = None  # (d, d_v)


@dataclass(frozen=True)
class AttentionGrads:
    """Gradients of a scalar loss with respect to every intermediate, given G_O = ∂L/∂O."""

    G_O: np.ndarray  # (n, d_v)
    G_A: np.ndarray  # (n, n)
    G_V: np.ndarray  # (n, d_v)
    G_scaled: np.ndarray  # (n, n)  gradient w.r.t. the softmax input
    G_scores: np.ndarray  # (n, n)
    G_Q: np.ndarray  # (n, d_k)
    G_K: np.ndarray  # (n, d_k)
    G_W_Q: np.ndarray | None = None  # (d, d_k)
    G_W_K: np.ndarray | None = None  # (d, d_k)
    G_W_V: np.ndarray | None = None  # (d, d_v)
    G_X: np.ndarray | None = None  # (n, d)


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
    if causal and Q.shape[0] != K.shape[0]:
        raise ValueError(f"Q is {Q.shape[0]}×{Q.shape[1]} and K is {K.shape[0]}×{K.shape[1]}: "
                         "a causal mask needs as many queries as keys")
    d_k = Q.shape[1]
    S = ops.scores(Q, K)  # 1. (n, n)
    scaled = ops.scale(S, d_k)  # 2. (n, n)
    masked = ops.apply_mask(scaled, causal)  # 3. (n, n)
    A = ops.softmax(masked, axis=-1)  # 4. (n, n), rows sum to 1
    O = ops.weighted_sum(A, V)  # 5. (n, d_v)
    return AttentionTrace(Q=Q, K=K, V=V, scores=S, scaled=scaled, masked=masked, A=A, O=O,
                          d_k=d_k, causal=causal)


def self_attention(X, W_Q, W_K, W_V, causal: bool = False) -> AttentionTrace:
    """Project X to Q, K, V, then scaled dot-product attention."""
    X = _as_matrix("X", X)
    W_Q, W_K, W_V = _as_matrix("W_Q", W_Q), _as_matrix("W_K", W_K), _as_matrix("W_V", W_V)
    for name, W in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V)):
        if W.shape[0] != X.shape[1]:
            raise ValueError(f"X is {X.shape[0]}×{X.shape[1]} but {name} is {W.shape[0]}×{W.shape[1]}: "
                             f"{name} needs {X.shape[1]} rows")
    Q = ops.project(X, W_Q)  # (n, d_k)
    K = ops.project(X, W_K)  # (n, d_k)
    V = ops.project(X, W_V)  # (n, d_v)
    tr = scaled_dot_product(Q, K, V, causal=causal)
    return AttentionTrace(**{**tr.__dict__, "X": X, "W_Q": W_Q, "W_K": W_K, "W_V": W_V})


def backward(tr: AttentionTrace, G_O) -> AttentionGrads:
    """Backpropagate G_O = ∂L/∂O through every step of the trace, last step first."""
    G_O = _as_matrix("G_O", G_O)
    if G_O.shape != tr.O.shape:
        raise ValueError(f"G_O must have the shape of O, {tr.O.shape[0]}×{tr.O.shape[1]}, "
                         f"but it is {G_O.shape[0]}×{G_O.shape[1]}")
    G_A, G_V = ops.weighted_sum_backward(tr.A, tr.V, G_O)  # 5. (n, n), (n, d_v)
    G_scaled = ops.softmax_backward(tr.A, G_A)  # 4. (n, n)
    G_scaled = ops.apply_mask_backward(G_scaled, tr.causal)  # 3. masked cells: exactly 0
    G_S = ops.scale_backward(G_scaled, tr.d_k)  # 2. (n, n)
    G_Q, G_K = ops.scores_backward(tr.Q, tr.K, G_S)  # 1. (n, d_k) each
    grads = dict(G_O=G_O, G_A=G_A, G_V=G_V, G_scaled=G_scaled, G_scores=G_S, G_Q=G_Q, G_K=G_K)
    if tr.X is not None:
        G_W_Q, G_X_q = ops.project_backward(tr.X, tr.W_Q, G_Q)
        G_W_K, G_X_k = ops.project_backward(tr.X, tr.W_K, G_K)
        G_W_V, G_X_v = ops.project_backward(tr.X, tr.W_V, G_V)
        # X feeds all three projections, so its gradient adds the three paths
        grads.update(G_W_Q=G_W_Q, G_W_K=G_W_K, G_W_V=G_W_V, G_X=G_X_q + G_X_k + G_X_v)
    return AttentionGrads(**grads)
