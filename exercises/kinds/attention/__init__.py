"""The whole forward pass, one part per step: (Q, K, V,) S = Q Kᵀ, S / √d_k, (mask,) A = softmax, O = A V.

Level 1 starts from Q, K, V (d_k = 4); levels 2-3 from X and the three weight matrices (d_model = 2 and 4,
projected down to d_k = 2). Numbers are redrawn
until every score is a small whole number (a multiple of ½ at level 3), so the softmax only needs
e^x for a handful of exponents. Errors carry forward: grading recomputes each step from the
learner's own earlier parts.
"""

from __future__ import annotations

import numpy as np

from attention_core import ops

from ...core.contract import HomeStage
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.numbers import nonzero_matrix

ID = "attention"
ORDER = 70
VERSION = 3  # 3: d_k ≥ 2 at every level (d_k = 4 from Q, K, V; X of width 2 → d_k = 2, width 4 → 2), sizes
# within the time budget (exercises.core.budget); 2: the larger misconception catalog redraws variants where two
# mistakes look alike
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("transposed_scores", "no_scaling", "scaled_by_dk", "mask_diagonal", "mask_wrong_triangle",
          "no_mask", "mask_after_softmax", "softmax_columns", "no_exp", "weights_transposed",
          "mask_zero_instead_of_inf", "softmax_no_normalise", "scaled_times_sqrt_dk")
# not guarded: Q K (no transpose) never conforms (d_k ≠ n); √d_model is never apart from d_k and d_k²

# level: (tokens n, width d_model of X (0: Q, K, V are given), d_k, d_v). Scaling is always asked, so
# d_k ≥ 2 (the division changes something) and d_k ≤ d_model (a projection narrows, as in the notes:
# d_model = 4 → d_k = 2); √4 = 2 is whole, √2 is the one irrational root (the eˣ aid lists its exponents).
SIZES = {1: (2, 0, 4, 1), 2: (3, 2, 2, 1), 3: (3, 4, 2, 2)}
MAX_SCORE = {1: 4, 2: 4, 3: 6}  # |S| bound: the exponents S/√d_k come from a small set
SCORE_STEP = {1: 1.0, 2: 1.0, 3: 0.5}  # every score is a multiple of this
WEIGHT_VALUES = (-1, 0, 1)  # entries of W_Q, W_K, W_V at levels 2-3: projections are sums, not products
MAX_TRIES = 2000


def _hand_friendly(S: np.ndarray, level: int) -> bool:
    """Small scores on a coarse grid, and not all equal (a uniform A teaches nothing)."""
    step = SCORE_STEP[level]
    on_grid = np.allclose(S / step, np.round(S / step))
    return bool(on_grid and np.abs(S).max() <= MAX_SCORE[level] and np.ptp(S) > 0)


def _from_qkv(rng: np.random.Generator, n: int, d_k: int, d_v: int) -> dict[str, np.ndarray]:
    """Level 1: Q and K of 0/1 (every score a count of shared ones, 0 … d_k), V of 0, 1, 2."""
    while True:
        Q = nonzero_matrix(rng, (n, d_k), (0, 1))  # (n, d_k)
        K = nonzero_matrix(rng, (n, d_k), (0, 1))  # (n, d_k)
        if _hand_friendly(ops.scores(Q, K), 1):
            return {"Q": Q, "K": K, "V": nonzero_matrix(rng, (n, d_v), spec(1).values)}  # V (n, d_v)


def _from_x(rng: np.random.Generator, level: int, n: int, d: int, d_k: int, d_v: int) -> dict[str, np.ndarray]:
    """Levels 2-3: X from the level's values, weights of −1, 0, 1."""
    x_values = spec(level).values
    for _ in range(MAX_TRIES):
        X = nonzero_matrix(rng, (n, d), x_values)  # (n, d)
        W_Q = _distinct_columns(rng, (d, d_k))  # (d, d_k)
        W_K = _distinct_columns(rng, (d, d_k))  # (d, d_k)
        S = ops.scores(ops.project(X, W_Q), ops.project(X, W_K))  # (n, n)
        W_V = _distinct_columns(rng, (d, d_v))  # (d, d_v)
        # every token's value nonzero: a weight on a zero value would change nothing in O
        if _hand_friendly(S, level) and np.all(np.any(ops.project(X, W_V) != 0, axis=1)):
            return {"X": X, "W_Q": W_Q, "W_K": W_K, "W_V": W_V}
    raise RuntimeError(f"attention: no hand-friendly scores in {MAX_TRIES} draws")


def _distinct_columns(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """A weight matrix whose columns differ, so the columns of its projection differ too."""
    while True:
        W = nonzero_matrix(rng, shape, WEIGHT_VALUES)
        if len({tuple(col) for col in W.T}) == shape[1]:
            return W


def _draft(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    n, d, d_k, d_v = SIZES[level]
    causal = bool(rng.integers(2))
    if d == 0:
        given: dict = _from_qkv(rng, n, d_k, d_v)
        names = ["scores", "scaled", "masked", "A", "O"]
    else:
        given = _from_x(rng, level, n, d, d_k, d_v)
        names = ["Q", "K", "V", "scores", "scaled", "masked", "A", "O"]
    given.update(d_k=int(d_k), causal=causal)
    if not causal:
        names.remove("masked")
    params = {"n": n, "d_k": d_k, "causal": causal}
    return Draft(given=given, parts=reference_parts(given, names, s.decimals), params=params)


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A forward pass that fits the level's time budget (drawn again in the rare case it does not)."""
    from ...core import budget

    return budget.draw_within_budget(_draft, rng, level, ID, MAX_TRIES)


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("whole", r"X \to O")
