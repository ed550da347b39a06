"""Exact arithmetic on object arrays: a sympy number per cell, or None where no exact form is kept.

The step registry (exercises.core.steps) states each step's exact rule with these; the worked solutions
(exercises.solutions) keep an exact cell only where it agrees with the reference value. A product
with an exact 0 factor is exactly 0 even when the other factor is unknown.
"""

from __future__ import annotations

import numpy as np
import sympy


def xmul(a, b):
    """An exact product; 0 when either factor is exactly 0, None when a factor is unknown."""
    if (a is not None and a.is_zero) or (b is not None and b.is_zero):
        return sympy.Integer(0)
    if a is None or b is None:
        return None
    return a * b


def xsum(terms):
    """An exact sum, or None when a term is unknown."""
    return None if any(t is None for t in terms) else sympy.Add(*terms)


def xmatmul(Lx: np.ndarray, Rx: np.ndarray) -> np.ndarray:
    """L R cell by cell: (n, m) @ (m, p) -> (n, p)."""
    out = np.empty((Lx.shape[0], Rx.shape[1]), dtype=object)  # (n, p)
    for i in range(Lx.shape[0]):
        for j in range(Rx.shape[1]):
            out[i, j] = xsum([xmul(Lx[i, k], Rx[k, j]) for k in range(Lx.shape[1])])
    return out


def xscale(M: np.ndarray, d_k) -> np.ndarray:
    """M / √d_k (every cell unknown when d_k is)."""
    root = sympy.sqrt(d_k) if d_k is not None else None
    return np.vectorize(lambda x: None if x is None or root is None else x / root, otypes=[object])(M)


def xsoftmax(Z: np.ndarray) -> np.ndarray:
    """Row-wise softmax, keeping only rational weights (1, ½, 0 …): e^{a}/(…) forms are the A step's own."""
    out = np.empty(Z.shape, dtype=object)
    for i, row in enumerate(Z):
        if any(z is None for z in row):
            out[i] = [sympy.Integer(0) if z == -sympy.oo else None for z in row]
            continue
        exps = [sympy.exp(z) for z in row]  # e^{-oo} is 0
        denominator = sympy.Add(*exps)
        for j, e in enumerate(exps):
            w = e / denominator if denominator != 0 else None
            out[i, j] = w if w is not None and w.is_Rational else None
    return out


def xrow_dot(Ax: np.ndarray, GAx: np.ndarray, i: int):
    """r_i = Σ_k A_ik (G_A)_ik exactly, or None."""
    return xsum([xmul(Ax[i, k], GAx[i, k]) for k in range(Ax.shape[1])])


def xsoftmax_backward(Ax: np.ndarray, GAx: np.ndarray) -> np.ndarray:
    """A ⊙ (G_A − r 1ᵀ) cell by cell."""
    out = np.empty(Ax.shape, dtype=object)
    for i in range(Ax.shape[0]):
        r = xrow_dot(Ax, GAx, i)
        for j in range(Ax.shape[1]):
            inner = None if r is None or GAx[i, j] is None else GAx[i, j] - r
            out[i, j] = xmul(Ax[i, j], inner)
    return out


def xadd(*Ms: np.ndarray) -> np.ndarray:
    """The cell-wise sum of same-shaped exact matrices."""
    return np.vectorize(lambda *cells: xsum(list(cells)), otypes=[object])(*Ms)


def upper(M: np.ndarray, fill) -> np.ndarray:
    """A copy of M with the cells above the diagonal (the causal mask) set to `fill`."""
    out = M.copy()
    out[np.triu(np.ones(out.shape, dtype=bool), k=1)] = fill
    return out
