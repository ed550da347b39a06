"""Random hand-friendly matrices. All randomness comes from the injected np.random.Generator."""

from __future__ import annotations

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


def round_half_up(x, places: int) -> float:
    """x rounded to `places` decimals, a tie away from zero, on its decimal digits (2.675 → 2.68):
    how a learner rounds what they write (DESIGN §4). x: a float, an int or a Fraction."""
    return float(decimal_half_up(x, places))


def decimal_half_up(x, places: int):
    """round_half_up as an exact decimal.Decimal (its digits are the text a learner writes)."""
    from decimal import ROUND_HALF_UP, Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 50
        if isinstance(x, Fraction):
            d = Decimal(x.numerator) / Decimal(x.denominator)
        else:
            d = Decimal(repr(float(x)))
        return d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
