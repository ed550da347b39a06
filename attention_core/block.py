"""The pre-norm attention block: normalise each token's row, attend, add the input back.

    LayerNorm(x) = γ ⊙ (x − μ) / σ + β,   μ = mean of the row, σ² = its mean squared deviation (÷ d, not d − 1)
    RMSNorm(x)   = γ ⊙ x / rms(x),        rms(x)² = the row's mean square
    pre-norm:    Y = X + Attention(Norm(X))          (the residual stream is never normalised)
    post-norm:   Y = Norm(X + Attention(X))          (the original Transformer's order)

The statistics run along each row (one token's d features); no ε is added (the exercises' rows never
have σ = 0). Axes: n tokens, d = d_model; every function also takes a stack (..., n, d).
"""

from __future__ import annotations

import numpy as np

from .ops import apply_mask, scale, scores, softmax, weighted_sum


def layer_norm(X: np.ndarray, gamma: np.ndarray, beta: np.ndarray, axis: int = -1, ddof: int = 0) -> np.ndarray:
    """γ ⊙ (x − μ) / σ + β over `axis` (-1: each row); `ddof` 1 divides the variance by d − 1."""
    X = np.asarray(X, dtype=float)  # (n, d)
    mu = X.mean(axis=axis, keepdims=True)  # (n, 1)
    sigma = np.sqrt(((X - mu) ** 2).sum(axis=axis, keepdims=True) / (X.shape[axis] - ddof))  # (n, 1)
    return gamma * (X - mu) / sigma + beta  # (n, d); γ, β (1, d) broadcast over the rows


def rms_norm(X: np.ndarray, gamma: np.ndarray, axis: int = -1, ddof: int = 0) -> np.ndarray:
    """γ ⊙ x / rms(x) over `axis`; no mean is subtracted."""
    X = np.asarray(X, dtype=float)  # (n, d)
    rms = np.sqrt((X ** 2).sum(axis=axis, keepdims=True) / (X.shape[axis] - ddof))  # (n, 1)
    return gamma * X / rms  # (n, d)


def norm(X: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None = None, axis: int = -1,
         ddof: int = 0) -> np.ndarray:
    """LayerNorm with a β, RMSNorm without one."""
    return rms_norm(X, gamma, axis, ddof) if beta is None else layer_norm(X, gamma, beta, axis, ddof)


def attention(X: np.ndarray, W_Q: np.ndarray, W_K: np.ndarray, W_V: np.ndarray, d_k: int,
              causal: bool) -> np.ndarray:
    """softmax(mask(X W_Q (X W_K)ᵀ / √d_k)) X W_V, on a stack too."""
    A = softmax(apply_mask(scale(scores(X @ W_Q, X @ W_K), d_k), causal))  # (n, n)
    return weighted_sum(A, X @ W_V)  # (n, d_v)


def pre_norm_block(X, gamma, beta, W_Q, W_K, W_V, d_k: int, causal: bool) -> np.ndarray:
    """Y = X + Attention(Norm(X)): the block of GPT-2 and after (d_v = d so that the sum is defined)."""
    return np.asarray(X, dtype=float) + attention(norm(X, gamma, beta), W_Q, W_K, W_V, d_k, causal)  # (n, d)


def post_norm_block(X, gamma, beta, W_Q, W_K, W_V, d_k: int, causal: bool) -> np.ndarray:
    """Y = Norm(X + Attention(X)): the original Transformer's order."""
    X = np.asarray(X, dtype=float)
    return norm(X + attention(X, W_Q, W_K, W_V, d_k, causal), gamma, beta)  # (n, d)
