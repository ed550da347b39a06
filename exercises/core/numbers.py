"""Random hand-friendly matrices (all randomness comes from the injected np.random.Generator), and the
one half-up rounding every part of the app uses for "round each value you write to d places"."""

from __future__ import annotations

import functools
import math
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

import numpy as np

from attention_core import causal_mask

EXP_PLACES = 3  # places of e^x in the eˣ table: in derivations, and as a careful student reads it


def choice(rng: np.random.Generator, options):
    """One element of `options`, drawn with the generator (keeps Python types)."""
    options = tuple(options)
    return options[int(rng.integers(len(options)))]


def matrix(rng: np.random.Generator, shape: tuple[int, int], values) -> np.ndarray:
    """A matrix whose entries are drawn from `values`."""
    values = np.asarray(values, dtype=float)
    return values[rng.integers(len(values), size=shape)]


def nonzero_matrix(rng: np.random.Generator, shape: tuple[int, int], values) -> np.ndarray:
    """Like `matrix`, redrawn until no row and no column is all zeros (those teach nothing). Without 0
    among `values` the first draw is kept; a single row or column must then be all nonzero."""
    options, has_zero = _options(tuple(values))
    while True:
        M = options[rng.integers(len(options), size=shape)]
        if not has_zero:
            return M
        if 1 in shape:
            if M.all():
                return M
            continue
        nonzero = M != 0
        if nonzero.any(axis=1).all() and nonzero.any(axis=0).all():
            return M


@functools.lru_cache(maxsize=64)
def _options(values: tuple) -> tuple[np.ndarray, bool]:
    """`values` as a read-only float array, and whether 0 is among them (made once per tuple)."""
    options = np.asarray(values, dtype=float)
    options.setflags(write=False)
    return options, bool((options == 0).any())


def matrices(rng: np.random.Generator, count: int, shape: tuple[int, int], values) -> np.ndarray:
    """`count` candidate matrices at once, entries drawn from `values`: (count, *shape). A generator
    draws a batch, keeps the candidates that meet its conditions (vectorised), and takes the first."""
    values = np.asarray(values, dtype=float)
    return values[rng.integers(len(values), size=(count, *shape))]


def no_zero_lines(M: np.ndarray, rows: bool = True, columns: bool = True) -> np.ndarray:
    """Per candidate of a batch (count, r, c): no row (and/or column) all zeros, as `nonzero_matrix` asks."""
    nonzero = M != 0
    ok = np.ones(M.shape[0], dtype=bool)
    if rows:
        ok &= nonzero.any(axis=2).all(axis=1)
    if columns:
        ok &= nonzero.any(axis=1).all(axis=1)
    return ok


def distinct_columns(M: np.ndarray) -> np.ndarray:
    """Per candidate of a batch (count, r, c): every two columns differ."""
    c = M.shape[2]
    ok = np.ones(M.shape[0], dtype=bool)
    for a in range(c):
        for b in range(a + 1, c):
            ok &= (M[:, :, a] != M[:, :, b]).any(axis=1)
    return ok


def distinct_rows(M: np.ndarray) -> np.ndarray:
    """Per candidate of a batch (count, r, c): every two rows differ."""
    return distinct_columns(np.swapaxes(M, 1, 2))


@functools.lru_cache(maxsize=64)
def _pool(shape: tuple[int, int], values: tuple[float, ...], rows: bool, columns: bool, distinct: bool) -> np.ndarray:
    grids = np.meshgrid(*([np.asarray(values, dtype=float)] * (shape[0] * shape[1])), indexing="ij")
    every = np.stack([g.ravel() for g in grids], axis=1).reshape(-1, *shape)  # (values^cells, r, c)
    ok = no_zero_lines(every, rows, columns)
    if distinct:
        ok &= distinct_columns(every)
    every = every[ok]
    every.setflags(write=False)
    return every


def pooled_matrices(rng: np.random.Generator, count: int, shape: tuple[int, int], values, rows: bool = True,
                    columns: bool = True, distinct: bool = False) -> np.ndarray:
    """`count` matrices drawn uniformly from every matrix of `shape` with entries in `values` that has no
    zero row (`rows`), no zero column (`columns`) and, with `distinct`, no two equal columns: drawn
    constructively from that set (enumerated once per process), never drawn and rejected. For small
    shapes only (values^cells matrices)."""
    pool = _pool(tuple(shape), tuple(float(v) for v in values), rows, columns, distinct)
    return pool[rng.integers(len(pool), size=count)]


def simple_weights(rng: np.random.Generator, n: int, denominators, causal: bool = False) -> np.ndarray:
    """Attention weights as simple fractions that a softmax can give: row i is c / Σc for whole counts
    c ≥ 1 on the keys the row sees (the softmax of the scores ln c), and exactly 0 where the causal mask
    hides a key. A row over v keys has q ≥ v shares, q one of `denominators` or their doubles that
    divides 12 (denominators 1, 2: halves and quarters; 2, 3, 4: also sixths; never fifths)."""
    shares = sorted({int(m * d) for d in denominators for m in (1, 2) if 12 % int(m * d) == 0})
    A = np.zeros((n, n))  # (n, n)
    hidden = causal_mask(n) if causal else np.zeros((n, n), dtype=bool)
    for i in range(n):
        visible = np.flatnonzero(~hidden[i])
        v = len(visible)
        q = int(choice(rng, [d for d in shares if d >= v]))
        # one share per visible key, the q − v others spread at random: every visible weight is positive
        counts = 1 + np.bincount(rng.integers(v, size=q - v), minlength=v)
        A[i, visible] = counts / q
    return A


def softmax_counts(A: np.ndarray, max_denominator: int = 12) -> np.ndarray:
    """The smallest whole counts c with A = c / rowsum(c) row by row (0 where A is 0): A is the
    row-wise softmax of the scores ln c, ln 0 = −∞ being a masked score."""
    counts = np.zeros(np.shape(A), dtype=int)  # (n_q, n_k)
    for i, row in enumerate(np.asarray(A, dtype=float)):
        shares = [Fraction(float(a)).limit_denominator(max_denominator) for a in row]
        q = math.lcm(*(f.denominator for f in shares))
        whole = [int(f * q) for f in shares]
        g = math.gcd(*whole)
        counts[i] = [w // g for w in whole]
    return counts


def as_fraction(x: float, max_denominator: int = 12) -> Fraction | None:
    """The simple fraction equal to x (to 1e-9), or None."""
    if not np.isfinite(x):
        return None
    f = Fraction(float(x)).limit_denominator(max_denominator)
    return f if abs(float(f) - x) < 1e-9 else None


def decimals_for(reference: np.ndarray, default: int = 2) -> int:
    """0 (exact integers) when every finite cell is whole, else `default` places."""
    finite = reference[np.isfinite(reference)]
    whole = np.round(finite)
    return 0 if bool(np.all(np.abs(finite - whole) <= 1e-12 + 1e-5 * np.abs(whole))) else default


def decimal_half_up(x, places: int) -> Decimal:
    """x rounded to `places` decimals as an exact Decimal (its digits are the text a learner writes):
    a tie away from zero, on the shortest decimal that prints the float (2.675 → 2.68, 1.005 → 1.01,
    −0.125 → −0.13), not numpy's half-to-even on binary values. x: a float, an int or a Fraction."""
    with localcontext() as ctx:
        ctx.prec = 50
        d = Decimal(x.numerator) / Decimal(x.denominator) if isinstance(x, Fraction) else Decimal(repr(float(x)))
        return d.quantize(Decimal(1).scaleb(-int(places)), rounding=ROUND_HALF_UP)


def round_half_up(values, places: int | None):
    """`values` rounded the way a person rounds on paper, DESIGN §4: decimal half-up, away from zero
    (0.125 → 0.13, −0.125 → −0.13, not numpy's half-to-even), read from the shortest decimal that
    prints the float (1.005 → 1.01). A number (int, float, Fraction) gives a float, anything else a
    float array. ±∞ and NaN stay; places=None leaves the values as they are. `places` may also be the
    writer of a careful student's reach (exercises.core.reach.Reach): every written value passes here."""
    if hasattr(places, "write"):
        return places.write(values)
    if isinstance(values, Fraction):
        return float(values) if places is None else float(decimal_half_up(values, places))
    scalar = isinstance(values, (int, float, np.integer, np.floating)) and not isinstance(values, bool)
    result = _round_half_up_array(values, places)
    return float(result) if scalar else result


def _round_half_up_array(values, places: int | None) -> np.ndarray:
    """round_half_up for an array: numpy for most cells, decimal for the ones at a half."""
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
