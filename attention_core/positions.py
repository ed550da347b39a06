"""Where a token is: rotary position embeddings (RoPE) and sinusoidal encodings.

RoPE rotates each pair (x_{2i}, x_{2i+1}) of a query or key row at position p by the angle p θ_i:

    x'_{2i}   = x_{2i} cos(p θ_i) − x_{2i+1} sin(p θ_i)
    x'_{2i+1} = x_{2i} sin(p θ_i) + x_{2i+1} cos(p θ_i)

so q_p'·k_r' = q_p R((r − p) θ) k_r depends on the positions only through r − p. Angles are in
degrees here (the exercises use a small table: multiples of 30° and 90°).

Sinusoidal encodings (Vaswani et al.): P[p, 2i] = sin(p ω_i), P[p, 2i+1] = cos(p ω_i),
ω_i = 10000^(−2i/d) radians; the input to attention is X + P.

Shapes: n tokens, d = 2m the width of a row (m pairs).
"""

from __future__ import annotations

import numpy as np


def rotation_angles(pos, theta) -> np.ndarray:
    """φ[p, i] = pos[p] θ_i in degrees; (n, m)."""
    return np.outer(np.asarray(pos, dtype=float).ravel(), np.asarray(theta, dtype=float).ravel())


def rope(X, pos, theta) -> np.ndarray:
    """Rotate each pair of columns of X (n, 2m) by pos[p] θ_i degrees; (n, 2m)."""
    X = np.asarray(X, dtype=float)
    phi = np.deg2rad(rotation_angles(pos, theta))  # (n, m)
    c, s = np.cos(phi), np.sin(phi)  # (n, m)
    even, odd = X[:, 0::2], X[:, 1::2]  # (n, m) each
    out = np.empty_like(X)  # (n, 2m)
    out[:, 0::2] = even * c - odd * s
    out[:, 1::2] = even * s + odd * c
    return out


def rope_loop(X, pos, theta) -> np.ndarray:
    """The same, one 2×2 rotation matrix per token and pair: [x', y'] = [[cos, −sin], [sin, cos]] [x, y]."""
    X = np.asarray(X, dtype=float)
    out = np.zeros_like(X)
    for p, row in enumerate(X):
        for i, t in enumerate(np.asarray(theta, dtype=float).ravel()):
            phi = np.deg2rad(float(np.asarray(pos).ravel()[p]) * t)
            R = np.array([[np.cos(phi), -np.sin(phi)], [np.sin(phi), np.cos(phi)]])
            out[p, 2 * i:2 * i + 2] = R @ row[2 * i:2 * i + 2]
    return out


def rope_scores(Q, K, pos, theta) -> np.ndarray:
    """S = rope(Q) rope(K)ᵀ; (n, n)."""
    return rope(Q, pos, theta) @ rope(K, pos, theta).T


def frequencies(d: int, base: float = 10000.0) -> np.ndarray:
    """ω_i = base^(−2i/d) radians for the d/2 pairs; (d/2,)."""
    return base ** (-2.0 * np.arange(d // 2) / d)


def sinusoidal(pos, d: int, base: float = 10000.0) -> np.ndarray:
    """P[p, 2i] = sin(pos_p ω_i), P[p, 2i+1] = cos(pos_p ω_i); (n, d)."""
    angles = np.outer(np.asarray(pos, dtype=float).ravel(), frequencies(d, base))  # (n, d/2)
    P = np.empty((angles.shape[0], d))
    P[:, 0::2], P[:, 1::2] = np.sin(angles), np.cos(angles)
    return P
