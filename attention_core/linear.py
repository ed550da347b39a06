"""Linear attention: the softmax's e^{q·k} replaced by a product of feature maps φ(q)·φ(k), so the
product can be taken in the other order.

    φ(x) = elu(x) + 1 = x + 1 (x > 0), eˣ (x ≤ 0)        positive, so every weight is positive
    quadratic order:  O_i = Σ_j (φ(q_i)·φ(k_j)) v_j / Σ_j φ(q_i)·φ(k_j)          n² (d_k + d_v) multiplications
    linear order:     KV = φ(K)ᵀ V,  z = φ(K)ᵀ 1,  O_i = φ(q_i) KV / φ(q_i) z      2 n d_k d_v + n d_k
    causal:           S_t = S_{t−1} + φ(k_t) v_tᵀ,  z_t = z_{t−1} + φ(k_t),  O_t = φ(q_t) S_t / φ(q_t) z_t

Axes: n tokens, d_k query/key width, d_v value width; every function also takes a stack (..., n, d).
"""

from __future__ import annotations

import numpy as np


def feature_map(x: np.ndarray) -> np.ndarray:
    """φ(x) = elu(x) + 1, cell by cell."""
    x = np.asarray(x, dtype=float)
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))  # the minimum: no overflow where x > 0


def key_value(phi_K: np.ndarray, V: np.ndarray) -> np.ndarray:
    """KV = φ(K)ᵀ V: every key's feature vector times its value, summed over the tokens."""
    return phi_K.mT @ V  # (d_k, n) @ (n, d_v) -> (d_k, d_v)


def normaliser(phi_K: np.ndarray) -> np.ndarray:
    """z = φ(K)ᵀ 1: the column sums of φ(K), as a column."""
    return phi_K.sum(axis=-2)[..., :, None]  # (d_k, 1)


def linear_order(phi_Q: np.ndarray, KV: np.ndarray, z: np.ndarray) -> np.ndarray:
    """O = φ(Q) KV / φ(Q) z, row by row."""
    return (phi_Q @ KV) / (phi_Q @ z)  # (n, d_v) / (n, 1)


def causal_states(phi_K: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(S, z): S[t] = Σ_{j ≤ t} φ(k_j) v_jᵀ (n, d_k, d_v) and z[t] = Σ_{j ≤ t} φ(k_j) (n, d_k), the running
    state after each token."""
    outer = phi_K[..., :, :, None] * V[..., :, None, :]  # (n, d_k, d_v): φ(k_t) v_tᵀ
    return np.cumsum(outer, axis=-3), np.cumsum(phi_K, axis=-2)


def causal_linear_order(phi_Q: np.ndarray, S: np.ndarray, z: np.ndarray) -> np.ndarray:
    """O_t = φ(q_t) S_t / φ(q_t) z_t from the running states."""
    num = np.einsum("...tk,...tkv->...tv", phi_Q, S)  # (n, d_v)
    return num / (phi_Q * z).sum(axis=-1, keepdims=True)  # (n, d_v) / (n, 1)


def quadratic_order(phi_Q: np.ndarray, phi_K: np.ndarray, V: np.ndarray, causal: bool = False) -> np.ndarray:
    """The same output the softmax way round: the n × n weights φ(q_i)·φ(k_j), each row divided by its sum."""
    W = phi_Q @ phi_K.mT  # (n, n)
    if causal:
        W = np.tril(W)  # token t sees tokens 1 … t
    return (W / W.sum(axis=-1, keepdims=True)) @ V  # (n, d_v)


def multiplications(n: int, d_k: int, d_v: int) -> tuple[int, int]:
    """(quadratic, linear): the multiplications of each order. Quadratic: φ(Q) φ(K)ᵀ and the weights times V;
    linear: φ(K)ᵀ V, φ(Q) KV and φ(Q) z (the sums of z and of the weights' rows are additions)."""
    return n * n * (d_k + d_v), 2 * n * d_k * d_v + n * d_k
