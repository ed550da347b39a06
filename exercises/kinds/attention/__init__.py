"""The whole forward pass, one part per step: (Q, K, V,) S = Q Kᵀ, S / √d_k, (mask,) A = softmax, O = A V.

Level 1 starts from Q, K, V (d_k = 4); levels 2-3 from X and the three weight matrices (d_model = 2 and 3,
projected down to d_k = 2: at level 3 √d_model = √3, d_k = 2 and √d_k = √2 all differ, so dividing by
√d_model is told apart from dividing by d_k). Every score is a small whole number (a multiple of ½ at level 3), so the
softmax needs e^x for a handful of exponents. Errors carry forward: grading recomputes each step from the
learner's own earlier parts.
"""

from __future__ import annotations

import numpy as np

from ...core.contract import HomeStage
from ...core.levels import spec
from ...core.numbers import distinct_columns, matrices, no_zero_lines
from ...core.sampler import Batch
from ...solutions.aids import ExpSeries

ID = "attention"
ORDER = 70
VERSION = 8
LEVELS = (1, 2, 3)
# the eˣ aid: a fixed grid per level covering every exponent the level's problems need (never just those)
EXP_GRID = {1: (ExpSeries(1, 2, 0, 4),), 2: (ExpSeries(1, 2, -4, 4, root=2),), 3: (ExpSeries(1, 4, -12, 12, root=2),)}
# every catalogued mistake that can apply to this kind's parts: the sampler keeps them apart
GUARDS = ("transposed_scores", "no_scaling", "scaled_by_dk", "mask_diagonal", "mask_wrong_triangle",
          "no_mask", "mask_after_softmax", "softmax_columns", "no_exp", "weights_transposed",
          "mask_zero_instead_of_inf", "softmax_no_normalise", "scaled_times_sqrt_dk", "scaled_by_sqrt_d_model")
# not guarded: Q K (no transpose) never conforms (d_k ≠ n); √d_model only applies where d_model ≠ d_k, d_k²

# level: (tokens n, width d_model of X (0: Q, K, V are given), d_k, d_v). Scaling is always asked, so
# d_k ≥ 2 (the division changes something) and d_k ≤ d_model (a projection narrows, as in the notes).
SIZES = {1: (2, 0, 4, 1), 2: (3, 2, 2, 1), 3: (3, 3, 2, 2)}
MAX_SCORE = {1: 4, 2: 4, 3: 6}  # |S| bound: the exponents S/√d_k come from a small set
SCORE_STEP = {1: 1.0, 2: 1.0, 3: 0.5}  # every score is a multiple of this
WEIGHT_VALUES = (-1, 0, 1)  # entries of W_Q, W_K, W_V: projections are sums, not products
BATCH = 64


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of candidates of one shape: Q, K of 0/1 and V at level 1, X and ternary weights above."""
    n, d, d_k, d_v = SIZES[level]
    causal = bool(rng.integers(2))
    values = spec(level).values
    if d == 0:
        given = {"Q": matrices(rng, BATCH, (n, d_k), (0, 1)),  # (B, n, d_k)
                 "K": matrices(rng, BATCH, (n, d_k), (0, 1)),  # (B, n, d_k)
                 "V": matrices(rng, BATCH, (n, d_v), values)}  # (B, n, d_v)
        names = ["scores", "scaled", "masked", "A", "O"]
    else:
        given = {"X": matrices(rng, BATCH, (n, d), values),  # (B, n, d_model)
                 **{w: matrices(rng, BATCH, (d, width), WEIGHT_VALUES)  # (B, d_model, d_k or d_v)
                    for w, width in (("W_Q", d_k), ("W_K", d_k), ("W_V", d_v))}}
        names = ["Q", "K", "V", "scores", "scaled", "masked", "A", "O"]
    stacked = tuple(given)
    if not causal:
        names.remove("masked")
    given.update(d_k=d_k, causal=causal)
    return Batch(given, stacked, names, params={"n": n, "d_k": d_k, "causal": causal},
                 keep=lambda env: _hand_friendly(env, level, causal), decimals=spec(level).decimals)


def _hand_friendly(env, level: int, causal: bool) -> np.ndarray:
    """Per candidate: no zero row or column in the drawn matrices, weights with no zero line and distinct columns, every
    value row nonzero (a weight on a zero value changes nothing in O), and scores that are small, on the
    level's grid, not symmetric (else K Qᵀ would look right), with some query that sees two keys scoring
    them differently (else every weight is the plain mean)."""
    given = ("Q", "K") if "X" not in env else ("X",)
    ok = np.logical_and.reduce([no_zero_lines(env[name]) for name in given])
    if "X" in env:
        for w in ("W_Q", "W_K", "W_V"):
            ok &= no_zero_lines(env[w]) & (distinct_columns(env[w]) if env[w].shape[2] > 1 else True)
    ok &= (env["V"] != 0).any(axis=2).all(axis=1)
    S = env["scores"]  # (B, n, n)
    on_grid = S / SCORE_STEP[level]
    ok &= (np.abs(on_grid - np.round(on_grid)) < 1e-9).all(axis=(1, 2))
    ok &= np.abs(S).max(axis=(1, 2)) <= MAX_SCORE[level]
    ok &= np.abs(S - np.swapaxes(S, 1, 2)).max(axis=(1, 2)) > 0
    seen = np.tril(np.ones(S.shape[1:], dtype=bool)) if causal else np.ones(S.shape[1:], dtype=bool)
    spread = np.where(seen, S, -np.inf).max(axis=2) - np.where(seen, S, np.inf).min(axis=2)  # (B, n)
    return ok & (spread > 0).any(axis=1)


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("whole", r"X \to O")
