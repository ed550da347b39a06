"""The whole forward pass, one part per step: (Q, K, V,) S = Q Kᵀ, S / √d_k, (mask,) A = softmax, O = A V.

Level 1 starts from Q, K, V (d_k = 4); levels 2-3 from X and the three weight matrices (d_model = 2 and 4,
projected down to d_k = 2). Every score is a small whole number (a multiple of ½ at level 3), so the
softmax only needs e^x for a handful of exponents. The given data is built from admissible pieces, not
drawn in batches and filtered: level 1 picks (Q, K) from the table of every pair of 0/1 matrices whose
scores fit and whose guarded mistakes stay apart up to A (enumerated once), and V from its two admissible
values; levels 2-3 draw the weights and then the tokens of X one at a time, each from the rows whose
scores with itself and with the tokens before it fit (the grid and the bound hold by construction; level
2 reads them from a table per weight pair, level 3 computes them for a group of 121 rows sharing their
first two entries). The time budget: level 1 by a bound per table entry (budget.count only where it does
not settle it), level 2 by budget.count's rules on the draw before the pipeline runs, level 3 always fits.
Errors carry forward:
grading recomputes each step from the learner's own earlier parts.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...core import budget, numbers, pipeline
from ...core.contract import HomeStage
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from .distinct import collides as chain_collides

ID = "attention"
ORDER = 70
VERSION = 5  # 5: constructive (issue 14): level-1 (Q, K) from the table of every pair whose scores fit,
# levels 2-3 X token by token from the rows whose scores fit with the weights drawn first (no candidate
# batch, about one draft per exercise); 4: drawn in batches filtered at once with numpy (weights and
# level-1 Q, K from the set of all admissible matrices), S ≠ Sᵀ and unequal scores in a row with two
# visible keys up front, level-1 V of distinct tokens; 3: d_k ≥ 2 at every level (d_k = 4 from Q, K, V;
# X of width 2 → d_k = 2, width 4 → 2), sizes within the time budget (exercises.core.budget); 2: the
# larger misconception catalog redraws variants where two mistakes look alike
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
MAX_TRIES = 200  # pieces drawn before giving up (a draw whose last conditions fail is rare)
# levels whose every variant fits the time budget whatever the draw (tests/test_kinds_attention_constructive.py
# holds budget.count to this bound): ternary weights make every projection term an addition
SURE_WITHIN_BUDGET = {3}


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


def _fits(S: np.ndarray, causal: bool) -> bool:
    """_scores_fit's conditions past the grid and the bound (which the draw guarantees) for one score
    matrix: not all equal, S ≠ Sᵀ, and a query that sees two keys scoring them differently."""
    rows = S.tolist()  # a few cells: plain Python
    n = len(rows)
    if all(rows[i][j] == rows[j][i] for i in range(n) for j in range(i)):
        return False  # symmetric (then also every score could be equal)
    for i in range(1 if causal else 0, n):  # causal: row 0 sees one key
        seen = rows[i][:i + 1] if causal else rows[i]
        if max(seen) > min(seen):
            return True
    return False


# ---------------------------------------------------------------- the admissible pieces, enumerated once


@functools.cache
def _level1_table(causal: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(every 2 × 4 matrix of 0/1 with no zero row or column (79), the indices a·79 + b of the pairs
    (Q, K) = (pool[a], pool[b]) whose scores fit and keep the guarded mistakes apart up to A
    (_level1_apart), and per pair whether its hand work surely fits the
    level's budget whatever V (_level1_seconds_bound)): 6241 score matrices checked once (~5 ms)."""
    n, _, d_k, _ = SIZES[1]
    pool = numbers._pool((n, d_k), (0.0, 1.0), True, True, False)
    S = np.einsum("aik,bjk->abij", pool, pool).reshape(-1, n, n)  # (79·79, 2, 2), whole counts ≤ 4: exact
    fit = _scores_fit(S, 1, causal)
    # the distinct score matrices (a few hundred), told by their cells 0 … d_k as the digits of one number
    codes = S[fit].reshape(-1, n * n).astype(np.int64) @ (d_k + 1) ** np.arange(n * n - 1, -1, -1)
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    fit[fit] = _level1_apart(S[fit][first], causal)[inverse.ravel()]
    pairs = np.flatnonzero(fit)
    sure = _level1_seconds_bound(S[pairs], causal) <= 60 * budget.BUDGET_MINUTES[1]
    for table in (pairs, sure):
        table.setflags(write=False)
    return pool, pairs, sure


GAP = 0.0101  # misconceptions.separation of a part graded to 2 decimals (or exactly, as the scores)


def _level1_apart(S: np.ndarray, causal: bool) -> np.ndarray:
    """Per score matrix of a batch (count, 2, 2) of level 1 (d_k = 4): whether the guarded mistakes' values
    up to A (the scores, the scaled and masked scores, the weights; not O, which V decides) are apart
    from the right ones and from each other, the engine's redraw question asked of all pairs at once
    (the same mistakes as the step registry's, written for a batch). Only a filter of the table: the
    engine's own check on each exercise decides, so a variant this keeps and the check refuses is drawn
    again (level 1 had a third of its drafts refused, two thirds of them already at A)."""
    n = S.shape[1]
    hidden = np.triu(np.ones((n, n), dtype=bool), k=1)
    T = np.swapaxes(S, 1, 2)

    def masked(Z, cells=hidden, fill=-np.inf):
        Z = np.array(Z, dtype=float)
        if causal:
            Z[:, cells] = fill
        return Z

    def rows(Z, axis=-1):
        with np.errstate(invalid="ignore"):
            e = np.exp(Z - Z.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)

    Z = S / 2.0
    M = masked(Z)
    scaled = [T / 2.0, S * 1.0, S / 4.0, S * 2.0]  # transposed_scores, no_scaling, scaled_by_dk, ×√d_k
    parts = [(S, [T]), (Z, scaled)]
    carried = [masked(z) for z in scaled]
    if causal:
        ones = np.ones((n, n), dtype=bool)
        wrong = [Z, masked(Z, np.triu(ones)), masked(Z, np.tril(ones, -1)),
                 masked(Z, hidden, 0.0)]  # no_mask, mask_diagonal, mask_wrong_triangle, mask_zero_instead_of_inf
        carried += wrong
        parts.append((M, carried))
    finite = np.where(np.isfinite(M), M, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = [rows(z) for z in carried] + [rows(M, 1), finite / finite.sum(axis=2, keepdims=True), np.exp(M)]
    if causal:
        late = rows(Z)
        late[:, hidden] = 0.0
        weights.append(late)  # mask_after_softmax
    parts.append((rows(M), weights))
    apart = np.ones(len(S), dtype=bool)
    for reference, values in parts:
        block = np.stack([reference, *values], axis=1).reshape(len(S), len(values) + 1, -1)  # (B, k + 1, cells)
        writable = ~np.isnan(block).any(axis=2) & ~np.isposinf(block).any(axis=2)
        block = np.where(np.isneginf(block), -1e15, block)
        with np.errstate(invalid="ignore"):
            widest = np.abs(block[:, :, None, :] - block[:, None, :, :]).max(axis=3)  # (B, k + 1, k + 1)
        close = (widest <= GAP) & writable[:, :, None] & writable[:, None, :]
        apart &= close.sum(axis=(1, 2)) == writable.sum(axis=1)  # only each value with itself
    return apart


def _level1_seconds_bound(S: np.ndarray, causal: bool) -> np.ndarray:
    """Per score matrix of a batch (count, 2, 2) of level 1 (Q, K of 0/1, d_k = 4, V of 1 and 2): at least
    the seconds budget.count gives for any V (tests/test_kinds_attention_constructive.py holds it to the
    count). Q Kᵀ: a term 1·1 per shared one, an addition each (the sum of S); S/2: a division per nonzero
    score; the softmax of a row seeing more than one key: an exponential per nonzero visible score, its
    sum's additions, a division per weight; A V: a multiply-add at most per visible weight; 5 s per cell
    written."""
    n = S.shape[1]
    rates = budget.RATES
    visible = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    worked = visible.sum(axis=1) > 1  # the rows whose softmax is work
    nonzero = S != 0
    seconds = rates["additions"] * S.sum(axis=(1, 2)) + rates["divisions"] * nonzero.sum(axis=(1, 2))
    seconds = seconds + rates["exponentials"] * (nonzero & visible)[:, worked].sum(axis=(1, 2))
    seen = visible.sum(axis=1)[worked]
    seconds = seconds + rates["additions"] * (seen - 1).sum() + rates["divisions"] * seen.sum()
    seconds = seconds + rates["multiply_adds"] * visible.sum()  # A V with d_v = 1
    cells = 4 * n * n + n * SIZES[1][3] - (0 if causal else n * n)  # scores, scaled, (masked,) A; O
    return seconds + rates["cells"] * cells


@functools.cache
def _values_table(level: int) -> np.ndarray:
    """Level 1's V: every n × d_v matrix of the level's values with no zero line and distinct tokens (equal
    values make every weighting give the same output): [1; 2] and [2; 1]."""
    n, _, _, d_v = SIZES[level]
    pool = numbers._pool((n, d_v), tuple(float(v) for v in spec(level).values), True, True, False)
    pool = pool[numbers.distinct_rows(pool)]
    pool.setflags(write=False)
    return pool


GROUPS = {2: 1, 3: 121}  # token rows by their first entries: level 3 draws the first two, then the last two


@functools.cache
def _rows(level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every token row of width d_model with entries of the level's values (5² at level 2, 11⁴ = 14641 at
    level 3, the zero row included), in GROUPS[level] groups of the rows sharing their first entries
    ((G, N, d): level 3's 121 groups of 121 rows), the same rows as columns in float32 ((G, d, N): one
    small product gives a group's queries and keys; halves and their small sums and products are exact
    in float32), and which rows are not zero ((G, N))."""
    d = SIZES[level][1]
    values = np.asarray(spec(level).values, dtype=float)
    grids = np.meshgrid(*([values] * d), indexing="ij")
    rows = np.stack([g.ravel() for g in grids], axis=1).reshape(GROUPS[level], -1, d)  # first entries first
    columns = np.ascontiguousarray(np.swapaxes(rows, 1, 2), dtype=np.float32)
    nonzero = (rows != 0).any(axis=2)
    for table in (rows, columns, nonzero):
        table.setflags(write=False)
    return rows, columns, nonzero


@functools.cache
def _weights(level: int, width: int) -> np.ndarray:
    """Every d_model × width matrix of −1, 0, 1 with no zero row or column and distinct columns."""
    return numbers._pool((SIZES[level][1], width), tuple(float(v) for v in WEIGHT_VALUES), True, True, True)


@functools.cache
def _weight_pairs(level: int) -> np.ndarray | None:
    """Level 2: the indices a·P + b of the pairs (W_Q, W_K) = (pool[a], pool[b]) whose W_Q W_Kᵀ is not
    symmetric (else every S = X W_Q W_Kᵀ Xᵀ is: 712 of the 2704 pairs); None at level 3 (4048² pairs,
    few of them symmetric: the draw's last check refuses those)."""
    if level != 2:
        return None
    W = _weights(level, SIZES[level][2])
    M = np.einsum("aik,bjk->abij", W, W)  # (P, P, d, d)
    pairs = np.flatnonzero((M != np.swapaxes(M, 2, 3)).any(axis=(2, 3)).ravel())
    pairs.setflags(write=False)
    return pairs


# ---------------------------------------------------------------- the draws


def _draw_level1(rng: np.random.Generator, causal: bool) -> tuple[dict[str, np.ndarray], bool]:
    """Level 1's Q, K (a pair of the table) and V, and whether they surely fit the budget."""
    pool, pairs, sure = _level1_table(causal)
    pick = int(rng.integers(len(pairs)))
    index = int(pairs[pick])
    values = _values_table(1)
    V = values[rng.integers(len(values))]
    return {"Q": np.array(pool[index // len(pool)]), "K": np.array(pool[index % len(pool)]), "V": np.array(V)}, \
        bool(sure[pick])


@functools.cache
def _level2_scores() -> np.ndarray:
    """Level 2: per pair of _weight_pairs(2) and per two of its 25 token rows (i, j), the score of query i
    with key j ((1992, 25, 25) small whole numbers as int8, ~1.2 MB, ~10 ms once): the token draw then
    only reads it."""
    rows = _rows(2)[0][0]  # (25, 2)
    W = _weights(2, SIZES[2][2])
    pairs = _weight_pairs(2)
    projected = np.einsum("nd,wdk->wnk", rows, W)  # (P, 25, d_k): every row's query (or key) by weights
    S = projected[pairs // len(W)] @ np.swapaxes(projected[pairs % len(W)], 1, 2)  # (pairs, 25, 25), whole
    S = S.astype(np.int8)  # |S| ≤ 2·2·2·2 = 16
    S.setflags(write=False)
    return S


@functools.cache
def _level2_fits() -> np.ndarray:
    """_level2_scores() within level 2's bound (whole numbers: on the grid), read-only booleans (~1.2 MB)."""
    fits = np.abs(_level2_scores()) <= MAX_SCORE[2]
    fits.setflags(write=False)
    return fits


@functools.cache
def _level2_valued() -> np.ndarray:
    """Per level-2 W_V (four) and token row (25): the row is nonzero and its value under W_V is too."""
    rows, _, nonzero = _rows(2)
    valued = nonzero[0] & ((rows[0] @ _weights(2, SIZES[2][3])) != 0).any(axis=2)  # (4, 25)
    valued.setflags(write=False)
    return valued


def _on_grid(s: np.ndarray, level: int) -> np.ndarray:
    """Per score (a sum of products of halves, exact in float32): within the level's bound and on its grid."""
    ok = np.abs(s) <= MAX_SCORE[level]
    if SCORE_STEP[level] != 1.0:
        on = s * (1.0 / SCORE_STEP[level])  # exact: the step is ½
        ok &= on == np.rint(on)
    return ok


def _draw_tokens(rng: np.random.Generator, level: int, W_Q: np.ndarray, W_K: np.ndarray) -> np.ndarray | None:
    """The n tokens of X one at a time: a group of rows (their first entries), then a row of it whose
    scores with itself and with every token before it (both ways) fit the level's grid and bound (a group
    without such a row is drawn again); None when none is found."""
    n = SIZES[level][0]
    rows, columns, nonzero = _rows(level)
    WT = np.concatenate([W_Q, W_K], axis=1).T.astype(np.float32)  # (2 d_k, d)
    X = np.empty((n, rows.shape[2]))
    before: list[tuple[float, float, float, float]] = []  # the query and key of each token drawn (d_k = 2)
    for _token in range(n):
        tries = (u for _ in range(len(rows) // 4) for u in rng.random((16, 2)).tolist())  # 16 at a time
        for u in tries:  # a group, then a row of it (a group without one is rare)
            group = int(u[0] * len(rows))
            q0, q1, k0, k1 = WT @ columns[group]  # (N,) each: the group's queries and keys
            ok = nonzero[group] & _on_grid(q0 * k0 + q1 * k1, level)  # its score with itself
            for a0, a1, b0, b1 in before:  # its scores with every token before it, both ways
                ok &= _on_grid(q0 * b0 + q1 * b1, level) & _on_grid(k0 * a0 + k1 * a1, level)
            left = np.flatnonzero(ok)
            if left.size:
                r = int(left[int(u[1] * len(left))])
                X[len(before)] = rows[group, r]
                before.append((float(q0[r]), float(q1[r]), float(k0[r]), float(k1[r])))
                break
        else:
            return None
    return X


def _draw_projected(rng: np.random.Generator, level: int, causal: bool) -> dict[str, np.ndarray] | None:
    """Levels 2-3: W_Q and W_K drawn from every admissible matrix, then the n tokens of X one at a time,
    each from the rows whose scores with itself and with every token before it (both ways) are on the
    level's grid and within its bound (level 2: and a nonzero value under the W_V drawn first); level 3's
    W_V then from those that give every token a nonzero value. None when a condition on the whole draw
    fails (no zero column of X, S ≠ Sᵀ, a row of unequal visible scores)."""
    n, _, d_k, d_v = SIZES[level]
    W = _weights(level, d_k)
    pairs = _weight_pairs(level)
    u = rng.random(2 * n + 2).tolist()  # the uniform draws of this try, at once (each pick is ⌊u·m⌋ of m)
    if pairs is None:
        W_Q, W_K = W[int(u[0] * len(W))], W[int(u[1] * len(W))]
    else:
        pair = int(u[0] * len(pairs))
        index = int(pairs[pair])
        W_Q, W_K = W[index // len(W)], W[index % len(W)]
    rows, columns, nonzero = _rows(level)
    if pairs is not None:  # level 2: the scores of every two rows, read from the table
        scores, fits = _level2_scores()[pair], _level2_fits()[pair]  # (25, 25)
        W_Vs = _weights(level, d_v)  # four: ±1, ±1
        v = int(u[2 + n] * len(W_Vs))
        W_V = W_Vs[v]  # first, then only tokens whose value it makes nonzero
        ok = _level2_valued()[v] & np.diagonal(fits)  # and whose score with itself fits
        chosen = []
        zero = None  # the rows scoring 0 with a token chosen, either way
        for token in range(n):
            left = np.flatnonzero(ok)
            if not left.size:
                return None
            if chosen and not causal:
                # without a mask every score is an exponential to look up: a token that scores 0 (e⁰ = 1)
                # with one before it when there is one, so that the nine fit the time budget more often
                scoring_zero = np.flatnonzero(ok & zero)
                left = scoring_zero if scoring_zero.size else left
            r = int(left[int(u[2 + token] * len(left))])
            chosen.append(r)
            ok = ok & fits[:, r] & fits[r, :]  # its scores with this token, both ways
            if not causal and token < n - 1:
                with_r = (scores[:, r] == 0) | (scores[r] == 0)
                zero = with_r if zero is None else zero | with_r
        X = np.array(rows[0, chosen])  # (n, d)
        S = scores[chosen][:, chosen]  # X W_Q (X W_K)ᵀ: the table's whole numbers, exactly
    else:
        X = _draw_tokens(rng, level, W_Q, W_K)
        if X is None:
            return None
        S = None
    if not all(any(column) for column in X.T.tolist()):
        return None  # a zero column: a feature no token has
    if not _fits((X @ W_Q) @ (X @ W_K).T if S is None else S, causal):
        return None
    given = {"X": X, "W_Q": np.array(W_Q), "W_K": np.array(W_K)}
    if pairs is not None:
        return {**given, "W_V": np.array(W_V)}
    W_V_all = _weights(level, d_v)
    for pick in [u[2 + n]] + rng.random(7).tolist():  # nearly every W_V gives each token a nonzero value
        W_V = W_V_all[int(pick * len(W_V_all))]
        if all(any(value) for value in (X @ W_V).tolist()):
            return {**given, "W_V": np.array(W_V)}
    return None


def _terms(values) -> tuple[int, int]:
    """(nonzero, nonzero and not ±1) among `values`: budget's factor tests, value by value."""
    nonzero = hard = 0
    for x in values:
        size = abs(x)
        if size > 1e-12 and size != math.inf:
            nonzero += 1
            if not abs(size - 1.0) < 1e-12:
                hard += 1
    return nonzero, hard


def _product_seconds(left: list, right: list) -> float:
    """budget.product_operations(left, right) in seconds, on lists of rows: per inner index k, a term per
    nonzero pair, a multiply-add where neither factor is ±1, an addition otherwise."""
    terms = hard = 0
    for column, row in zip(zip(*left), right):
        t1, h1 = _terms(column)
        t2, h2 = _terms(row)
        terms += t1 * t2
        hard += h1 * h2
    return budget.RATES["multiply_adds"] * hard + budget.RATES["additions"] * (terms - hard)


@functools.cache
def _level2_rows() -> tuple[dict, dict]:
    """Level 2's pieces of _projected_seconds, once: the index of each token row (in _rows(2)'s order) by its
    entries, and two tables, one per width (W_Q's and W_K's d_k, W_V's d_v), of each weight matrix of that
    width (_weights(2, width), by its bytes) and token row: (the seconds of the row's projection, per column
    of it: nonzero, nonzero and not ±1). A projection's terms add up row by row (the row's nonzero entries
    meet the weights' nonzero rows), and so its seconds."""
    rows = _rows(2)[0][0]  # (25, 2)
    index = {tuple(row): i for i, row in enumerate(rows.tolist())}
    tables = tuple({W.tobytes(): [(_product_seconds([row], W.tolist()), *_counts(row @ W)) for row in rows]
                    for W in _weights(2, width)} for width in (SIZES[2][2], SIZES[2][3]))
    return index, tables


def _counts(values) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per value: (nonzero, nonzero and not ±1), as two tuples of 0/1 (_terms' tests, value by value)."""
    pieces = [_terms([x]) for x in np.asarray(values).tolist()]
    return tuple(t for t, _ in pieces), tuple(h for _, h in pieces)


def _level2_seconds(given: dict, names: list[str]) -> float | None:
    """_projected_seconds of a level-2 draw from _level2_rows' pieces, or None for a draw of other sizes or
    values than level 2's (X 3 × 2 of its rows, W_Q, W_K 2 × 2 and W_V 2 × 1 of its weights): the same
    sums of the same whole numbers of seconds in another order, so the same float. Per token its three
    projections and its part of A V (_level2_fixed); Q Kᵀ from the nonzero and not ±1 entries of each column
    of Q and K; per nonzero score a division, and an exponential where its row sees more than one key; the
    softmax's sums and divisions, and 5 s per cell, by the sizes alone."""
    X, causal, d_k = given["X"], given["causal"], given["d_k"]
    n, d_model, _, d_v = SIZES[2]
    W_Q, W_K, W_V = given["W_Q"], given["W_K"], given["W_V"]
    if (X.shape != (n, d_model) or d_k != SIZES[2][2] or W_Q.shape != (d_model, d_k) or W_K.shape != W_Q.shape
            or W_V.shape != (d_model, d_v)):
        return None  # not a level-2 draw's sizes (the tables are keyed by bytes alone)
    index, (projections, value_projections) = _level2_rows()
    try:
        a, b, c = (index[tuple(row)] for row in X.tolist())
        q, k, v = projections[W_Q.tobytes()], projections[W_K.tobytes()], value_projections[W_V.tobytes()]
    except KeyError:
        return None
    add, mul, div, exp = (budget.RATES[name] for name in ("additions", "multiply_adds", "divisions", "exponentials"))
    exponentiated, fixed, seen_by = _level2_fixed(bool(causal), tuple(names))
    seconds = fixed + q[a][0] + q[b][0] + q[c][0] + k[a][0] + k[b][0] + k[c][0] + v[a][0] + v[b][0] + v[c][0]
    qa, qb, qc, ka, kb, kc = q[a], q[b], q[c], k[a], k[b], k[c]
    for col in range(SIZES[2][2]):  # Q Kᵀ: the terms of column col of Q with column col of K
        terms = (qa[1][col] + qb[1][col] + qc[1][col]) * (ka[1][col] + kb[1][col] + kc[1][col])
        hard = (qa[2][col] + qb[2][col] + qc[2][col]) * (ka[2][col] + kb[2][col] + kc[2][col])
        seconds += mul * hard + add * (terms - hard)
    cells = ((X @ W_Q) @ (X @ W_K).T).ravel().tolist()
    seconds += div * sum(1 for z in cells if z != 0) + exp * sum(1 for at in exponentiated if cells[at] != 0)
    for (weights, unlike_one), r in zip(seen_by, (a, b, c)):  # A V: each key's value, once per query seeing it
        terms, hard = sum(v[r][1]), sum(v[r][2])
        seconds += mul * unlike_one * hard + add * (weights * terms - unlike_one * hard)
    return seconds


@functools.cache
def _level2_fixed(causal: bool, names: tuple[str, ...]) -> tuple:
    """_level2_seconds' pieces by the mask and the parts alone: the flat cells whose score is exponentiated
    (visible in a row that sees more than one key), the seconds fixed by the sizes (each such row's sum and
    divisions, 5 s per cell written), and per key (how many queries see it, how many of those see more
    than one key: their weight is not 1)."""
    n, _, d_k, d_v = SIZES[2]
    visible = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    seen = visible.sum(axis=1)
    worked = seen > 1
    fixed = float(budget.RATES["additions"] * (seen[worked] - 1).sum() + budget.RATES["divisions"] * seen[worked].sum())
    fixed += _cell_seconds(n, n * d_k, n * d_v, names)
    exponentiated = tuple(int(i) for i in np.flatnonzero(visible & worked[:, None]))
    seen_by = tuple((int(visible[:, j].sum()), int((visible[:, j] & worked).sum())) for j in range(n))
    return exponentiated, fixed, seen_by


def _projected_seconds(given: dict, names: list[str]) -> float:
    """budget.count(given, names).seconds of a level-2 or -3 draw without running the pipeline, from level
    2's tables where they hold it (_level2_seconds), else from the values themselves (_seconds_of)."""
    seconds = _level2_seconds(given, names)
    return _seconds_of(given, names) if seconds is None else seconds


def _seconds_of(given: dict, names: list[str]) -> float:
    """budget.count(given, names).seconds of a level-2 or -3 draw without running the pipeline (the same
    rules on the same values: tests/test_kinds_attention_constructive.py holds it to the count): the three
    projections, Q Kᵀ, a division per nonzero score, the softmax of each row that sees more than one key
    (an exponential per nonzero visible score, its sum's additions, a division per weight), A V, whose
    weights are nonzero where a key is visible and ±1 only in a row that sees a single key (every score
    here is within a few units of the others), and 5 s per cell written."""
    X, causal, d_k = given["X"], given["causal"], int(given["d_k"])
    rows = X.tolist()
    Q, K, V = (X @ given[name] for name in ("W_Q", "W_K", "W_V"))
    seconds = sum(_product_seconds(rows, given[name].tolist()) for name in ("W_Q", "W_K", "W_V"))
    S = Q @ K.T
    seconds += _product_seconds(Q.tolist(), K.T.tolist())
    n = len(rows)
    rates = budget.RATES
    scores = S.tolist()
    if d_k != 1:
        seconds += rates["divisions"] * sum(_terms(row)[0] for row in scores)
    weights = []
    for i, row in enumerate(scores):
        seen = row[:i + 1] if causal else row
        if len(seen) > 1:
            seconds += (rates["exponentials"] * _terms([z / math.sqrt(d_k) for z in seen])[0]
                        + rates["additions"] * (len(seen) - 1) + rates["divisions"] * len(seen))
            weights.append([0.5] * len(seen) + [0.0] * (n - len(seen)))  # nonzero, not ±1
        else:
            weights.append([1.0] + [0.0] * (n - 1))
    seconds += _product_seconds(weights, V.tolist())
    return seconds + _cell_seconds(n, Q.size, V.size, names)


def _cell_seconds(n: int, projected: int, valued: int, names) -> float:
    """5 s per cell written of the parts `names` (n tokens; Q and K of `projected` cells, V and O of
    `valued`; every score matrix n × n)."""
    sizes = {"Q": projected, "K": projected, "V": valued, "scores": n * n, "scaled": n * n, "masked": n * n,
             "A": n * n, "O": valued}
    return budget.RATES["cells"] * sum(sizes[name] for name in names)


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A forward pass built from admissible pieces (see the module's docstring), within the level's time
    budget (exercises.core.budget); the engine then keeps the catalogued mistakes apart (a variant where
    two look alike is drawn again)."""
    s = spec(level)
    n, d, d_k, _ = SIZES[level]
    causal = bool(rng.integers(2))
    names = (["scores", "scaled", "masked", "A", "O"] if d == 0
             else ["Q", "K", "V", "scores", "scaled", "masked", "A", "O"])
    if not causal:
        names.remove("masked")
    for _ in range(MAX_TRIES):
        if d == 0:
            given, sure = _draw_level1(rng, causal)
        else:
            given, sure = _draw_projected(rng, level, causal), level in SURE_WITHIN_BUDGET
            if given is None:
                continue
        given.update(d_k=int(d_k), causal=causal)
        if d and not sure:  # levels 2-3: decided before the pipeline runs
            if _projected_seconds(given, names) > 60 * budget.BUDGET_MINUTES[level]:
                continue
            sure = True
        env = pipeline.run(given)
        if sure or budget.count(given, names, env).minutes <= budget.BUDGET_MINUTES[level]:
            return Draft(given=given, parts=reference_parts(given, names, s.decimals, env),
                         params={"n": n, "d_k": d_k, "causal": causal}, env=dict(env))
    raise RuntimeError(f"attention: no hand-friendly variant within the time budget in {MAX_TRIES} draws")


def collides(ex, guards) -> bool:
    """The redraw's question (misconceptions.collides), the mistakes carried down the chain at once."""
    return chain_collides(ex, guards)


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("whole", r"X \to O")
