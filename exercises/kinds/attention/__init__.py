"""The whole forward pass, one part per step: (Q, K, V,) S = Q Kᵀ, S / √d_k, (mask,) A = softmax, O = A V.

Level 1 starts from Q, K, V (d_k = 4); levels 2-3 from X and the three weight matrices (d_model = 2 and 4,
projected down to d_k = 2). Candidates are drawn in a batch and filtered at once (numpy), keeping
those where every score is a small whole number (a multiple of ½ at level 3), so the softmax only needs
e^x for a handful of exponents. Errors carry forward: grading recomputes each step from the
learner's own earlier parts.
"""

from __future__ import annotations

import numpy as np

from ...core import numbers, pipeline
from ...core.contract import HomeStage
from ...core.draft import Draft, reference_parts
from ...core.levels import spec

ID = "attention"
ORDER = 70
VERSION = 4  # 4: drawn in batches filtered at once with numpy (weights and level-1 Q, K from the set of
# all admissible matrices), S ≠ Sᵀ and unequal scores in a row with two visible keys up front, level-1 V of
# distinct tokens; 3: d_k ≥ 2 at every level (d_k = 4 from Q, K, V; X of width 2 → d_k = 2, width 4 → 2),
# sizes within the time budget (exercises.core.budget); 2: the larger misconception catalog redraws variants
# where two mistakes look alike
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
MAX_BATCHES = 50  # batches looked at before giving up (a batch without a candidate is rare)


# candidates drawn at once per level (about 1 in 30, 10 and 250 meets every condition): the conditions are
# checked on the whole batch with numpy
BATCH = {1: 128, 2: 64, 3: 1024}


def _transposed(M: np.ndarray) -> np.ndarray:
    """Each matrix of a batch (B, r, c) transposed, as a contiguous (B, c, r): a batched matmul with it
    takes numpy's fast path (a strided transpose does not). The values are whole numbers and halves, so
    the products are exact either way."""
    return np.ascontiguousarray(np.swapaxes(M, 1, 2))


def _scores_fit(S: np.ndarray, level: int, causal: bool) -> np.ndarray:
    """Per candidate of a batch of score matrices (count, n, n): small scores on the level's grid, not all
    equal, S ≠ Sᵀ (else Kᵀ Q would look right), and some query that sees two keys scoring them differently
    (else every weight is the plain mean and the scaling or the exponentials change nothing).

    The grid and the bound first, over the whole batch; the other conditions only on the few candidates
    left (the same answer: each condition is decided per candidate)."""
    step = SCORE_STEP[level]
    n = S.shape[1]
    flat = S.reshape(len(S), -1)  # (count, n·n)
    ok = np.abs(flat).max(axis=1) <= MAX_SCORE[level]  # small
    if step != 1.0 or not np.array_equal(flat, np.round(flat)):  # whole scores are on the grid of 1
        kept = np.flatnonzero(ok)
        on = flat[kept] / step
        ok[kept] = numbers.all_along(np.abs(on - np.round(on)) < 1e-9, 1)
    kept = np.flatnonzero(ok)
    if not kept.size:
        return ok
    T = S[kept]  # (left, n, n); a spread max − min > 0 is np.ptp's, without its wrapper
    cells = T.reshape(len(T), -1)
    fit = cells.max(axis=1) - cells.min(axis=1) > 0  # varied
    fit &= np.abs(T - np.swapaxes(T, 1, 2)).max(axis=(1, 2)) > 0  # asymmetric
    visible = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    spread = np.zeros(len(T), dtype=bool)
    for i in range(n):
        if visible[i].sum() >= 2:
            seen = T[:, i, visible[i]]
            spread |= seen.max(axis=1) - seen.min(axis=1) > 0
    ok[kept] = fit & spread
    return ok


def _candidates(rng: np.random.Generator, level: int, causal: bool) -> list[dict[str, np.ndarray]]:
    """A batch of candidate given data for the level, those meeting every condition first-drawn first:
    level 1 Q and K of 0/1 (every score a count of shared ones) and V of the level's values; levels 2-3
    X of the level's values and weights of −1, 0, 1 with distinct columns."""
    n, d, d_k, d_v = SIZES[level]
    batch = BATCH[level]
    if d == 0:
        Q = numbers.pooled_matrices(rng, batch, (n, d_k), (0, 1))  # (B, n, d_k), no zero row or column
        K = numbers.pooled_matrices(rng, batch, (n, d_k), (0, 1))  # (B, n, d_k)
        V = numbers.matrices(rng, batch, (n, d_v), spec(1).values)  # (B, n, d_v)
        S = Q @ _transposed(K)  # (B, n, n)
        ok = numbers.no_zero_lines(V)
        # tokens with different values: equal values make every weighting give the same output
        ok &= numbers.distinct_rows(V) & _scores_fit(S, level, causal)
        return [{"Q": Q[b], "K": K[b], "V": V[b]} for b in np.flatnonzero(ok)]
    X = numbers.matrices(rng, batch, (n, d), spec(level).values)  # (B, n, d)
    # weights with no zero row or column and distinct columns, drawn from the set of all such (B, d, width)
    W = {name: numbers.pooled_matrices(rng, batch, (d, width), WEIGHT_VALUES, distinct=True)
         for name, width in (("W_Q", d_k), ("W_K", d_k), ("W_V", d_v))}
    S = (X @ W["W_Q"]) @ _transposed(X @ W["W_K"])  # (B, n, n)
    ok = numbers.no_zero_lines(X) & _scores_fit(S, level, causal)
    # every token's value nonzero: a weight on a zero value would change nothing in O (looked at only
    # for the candidates left)
    kept = np.flatnonzero(ok)
    kept = kept[numbers.all_along(numbers.any_along(X[kept] @ W["W_V"][kept] != 0, 2), 1)]
    return [{"X": X[b], **{name: M[b] for name, M in W.items()}} for b in kept]


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A forward pass built from a batch of candidates: the first that fits the level's time budget
    (exercises.core.budget). The pipeline runs once per candidate looked at; the engine then keeps the
    catalogued mistakes apart (a variant where two look alike is drawn again)."""
    from ...core import budget

    s = spec(level)
    n, d, d_k, _ = SIZES[level]
    causal = bool(rng.integers(2))
    names = (["scores", "scaled", "masked", "A", "O"] if d == 0
             else ["Q", "K", "V", "scores", "scaled", "masked", "A", "O"])
    if not causal:
        names.remove("masked")
    for _ in range(MAX_BATCHES):
        for given in _candidates(rng, level, causal):
            given.update(d_k=int(d_k), causal=causal)
            env = pipeline.run(given)
            if budget.count(given, names, env).minutes <= budget.BUDGET_MINUTES[level]:
                return Draft(given=given, parts=reference_parts(given, names, s.decimals, env),
                             params={"n": n, "d_k": d_k, "causal": causal}, env=dict(env))
    raise RuntimeError(f"attention: no hand-friendly variant within the time budget in {MAX_BATCHES} batches")


def collides(ex, guards) -> bool:
    """The redraw's question (misconceptions.collides), the mistakes carried down the chain at once."""
    from .distinct import collides as chain_collides

    return chain_collides(ex, guards)


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("whole", r"X \to O")
