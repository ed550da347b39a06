"""Random hand-friendly matrices (all randomness comes from the injected np.random.Generator), and the
one half-up rounding every part of the app uses for "round each value you write to d places"."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import numpy as np

from attention_core import causal_mask


def choice(rng: np.random.Generator, options):
    """One element of `options`, drawn with the generator (keeps Python types)."""
    options = tuple(options)
    return options[int(rng.integers(len(options)))]


def matrix(rng: np.random.Generator, shape: tuple[int, int], values) -> np.ndarray:
    """A matrix whose entries are drawn from `values`."""
    values = np.asarray(values, dtype=float)
    return values[rng.integers(len(values), size=shape)]


def nonzero_matrix(rng: np.random.Generator, shape: tuple[int, int], values) -> np.ndarray:
    """Like `matrix`, redrawn until no row and no column is all zeros (those teach nothing)."""
    while True:
        M = matrix(rng, shape, values)
        if np.all(np.any(M != 0, axis=1)) and np.all(np.any(M != 0, axis=0)):
            return M


def simple_weights(rng: np.random.Generator, n: int, denominators, causal: bool = False) -> np.ndarray:
    """Attention weights as simple fractions (½, ¼, ⅓ …): rows sum to 1, future cells 0 when causal."""
    A = np.zeros((n, n))
    hidden = causal_mask(n) if causal else np.zeros((n, n), dtype=bool)
    for i in range(n):
        visible = np.flatnonzero(~hidden[i])
        q = int(choice(rng, denominators))
        # split q equal shares among the visible keys: a random composition of q
        counts = np.bincount(rng.integers(len(visible), size=q), minlength=len(visible))
        A[i, visible] = counts / q
    return A


def as_fraction(x: float, max_denominator: int = 12) -> Fraction | None:
    """The simple fraction equal to x (to 1e-9), or None."""
    if not np.isfinite(x):
        return None
    f = Fraction(float(x)).limit_denominator(max_denominator)
    return f if abs(float(f) - x) < 1e-9 else None


def decimals_for(reference: np.ndarray, default: int = 2) -> int:
    """0 (exact integers) when every finite cell is whole, else `default` places."""
    finite = reference[np.isfinite(reference)]
    return 0 if np.allclose(finite, np.round(finite), atol=1e-12) else default


def round_half_up(values, places: int | None):
    """`values` (a number or an array) rounded to `places` decimals the way a person rounds on paper:
    decimal half-up, away from zero (0.125 → 0.13, −0.125 → −0.13, not numpy's half-to-even), read from
    the shortest decimal that prints the float (so 1.005 → 1.01). ±∞ and NaN stay; None leaves the
    values as they are. Returns a float array (a numpy float for a number)."""
    array = np.asarray(values, dtype=float)
    if places is None:
        return array
    scale = 10.0 ** int(places)
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.abs(array) * scale
        result = np.sign(array) * np.floor(scaled + 0.5) / scale  # exact integer / 10^d: the nearest float
        near_half = np.isfinite(scaled) & (np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6)
    # ±∞ and NaN stay, and so does a value too large to have digits at these places
    result = np.where(np.isfinite(array) & (scaled < 2.0**52), result, array)
    if near_half.any():  # a cell on (or a float's breadth from) a half: decide it in decimal
        quantum = Decimal(1).scaleb(-int(places))
        flat, ties = result.reshape(-1), array.reshape(-1)
        for k in np.flatnonzero(near_half.reshape(-1)):
            flat[k] = float(Decimal(repr(float(ties[k]))).quantize(quantum, rounding=ROUND_HALF_UP))
    return result + 0.0  # no −0.0
