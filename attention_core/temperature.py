"""Temperature and logit soft-capping: two ways to reshape a row of scores before the softmax.

    a = softmax(s / τ)                 # τ → 0: all weight on the largest score; τ → ∞: uniform weights
    s_capped = c · tanh(s / c)         # every score squeezed into (−c, c); small scores nearly unchanged

Dividing by √d_k is a temperature τ = √d_k. Axes: any leading stack, n scores along the last axis.
"""

from __future__ import annotations

import numpy as np

from .ops import softmax, softmax_backward


def softmax_temperature(s: np.ndarray, tau: float) -> np.ndarray:
    """softmax(s / τ) along the last axis."""
    if tau <= 0:
        raise ValueError(f"the temperature must be positive, not {tau}")
    return softmax(np.asarray(s, dtype=float) / tau)  # (..., n)


def softmax_temperature_backward(a: np.ndarray, g_a: np.ndarray, tau: float) -> np.ndarray:
    """∂L/∂s from ∂L/∂a: the softmax's gradient, divided by τ on the way back."""
    return softmax_backward(a, g_a) / tau


def soft_cap(s: np.ndarray, cap: float) -> np.ndarray:
    """c · tanh(s / c): close to s where |s| ≪ c, never past ±c."""
    if cap <= 0:
        raise ValueError(f"the cap must be positive, not {cap}")
    return cap * np.tanh(np.asarray(s, dtype=float) / cap)


def soft_cap_backward(s: np.ndarray, g: np.ndarray, cap: float) -> np.ndarray:
    """d/ds c·tanh(s/c) = 1 − tanh²(s/c), times the incoming gradient."""
    return (1.0 - np.tanh(np.asarray(s, dtype=float) / cap) ** 2) * g
