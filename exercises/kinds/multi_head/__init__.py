"""Multi-head attention: h small heads side by side, concatenated, and (level 3) projected by W_O.

    head_i = softmax(mask(X W_Qi (X W_Ki)ᵀ / √d_k)) X W_Vi        concat = [head_1 | … | head_h]
    out = concat W_O

The pipeline knows one head only, so this kind names its own mistakes: a head computed with one of
the catalogued mistakes (diagnosed per head through the pipeline), heads concatenated out of order.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from itertools import permutations

import numpy as np

from attention_core import MultiHeadTrace, multi_head_attention

from ... import solutions
from ...core import budget, misconceptions, numbers, pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import choice, decimals_for, nonzero_matrix, round_half_up
from ...i18n import msg
from ...rendering import latex as L
from .._shared.aids import softmax_aids
from .._shared.heads import Heads, clash, comparable, like
from .._shared.heads import operations as head_operations
from . import no_head

ID = "multi_head"
ORDER = 80
VERSION = 5  # 5: constructive: per X, every admissible head (the checks and the budget share of 4) enumerated at
# once (_admissible: the scores per distinct W_Q W_Kᵀ, the seconds in separable pieces), the h heads drawn
# uniformly among them, a head whose own mistakes clash drawn again from the same X (with 2 tokens the table
# holds only heads whose mistakes are apart): no batch of 128 candidates per head, no X refused for a batch
# without a fitting head (issue 14);
# 4: each head the first of a batch of candidate weights (drawn from the set of all admissible
# ones) checked at once with numpy, with values nonzero and not all alike, unequal scores in a row with two
# visible keys, a nonzero hidden score, and hand work within its share of the budget (budget.head_seconds);
# 3: d_k = 2 (the scaling inside each head changes something), sizes within the time budget;
# 2: heads whose mistakes clash with each other are redrawn too
LEVELS = (1, 2, 3)
# every catalogued mistake that can change a head's output: the redraw keeps them apart, head by head
GUARDS = ("transposed_scores", "no_scaling", "scaled_by_dk", "mask_diagonal", "mask_wrong_triangle", "no_mask",
          "mask_after_softmax", "softmax_columns", "no_exp", "weights_transposed", "mask_zero_instead_of_inf",
          "softmax_no_normalise", "scaled_times_sqrt_dk", "scaled_by_sqrt_d_model")

# level: (n, heads to draw from, d_k, d_v, values of X, output projection?). From level 2 on d_k = 2 = d_model:
# each head divides by √2, so forgetting the scaling (or dividing by d_k) changes its output. Level 1 is
# about heads side by side and their concatenation: two heads with the scaling too do not fit its 5 minutes
# (exercises.core.budget), so its heads keep d_k = 1. Measured: two heads of d_k = 2 from X (n = 2, d_v = 1) take
# 5.3-8.1 minutes by hand (median 6.9; 0 of 30 draws within 5), and 4.8-7.7 (5-8 % within 5) with X of 0/1
# only: the few that fit are the ones with hardly any exponentials, so level 1 would teach less, not more.
SIZES = {1: (2, (2,), 1, 1, (0, 1, 2), False),
         2: (3, (2,), 2, 1, (-1, 0, 1, 2), False),
         3: (3, (2,), 2, 2, (-1, 0, 1, 2), True)}
D_MODEL = 2
WEIGHT_VALUES = (-1, 0, 1)
MAX_SCORE = 4  # |q_i k_j|: the exponents stay small whole numbers
MAX_TRIES = 2000
REDRAWS = 4  # a clashing head drawn again from the same X at most this often
HEADS_PER_X = 8  # draws of h heads from one X's admissible heads before a new X
# the levels whose first redraw is checked ahead, with the first heads (_apart_draw): where a head's own
# mistakes clash often (level 2, one value column: 25 % of heads); at level 3 (7 %) the h heads alone
# are checked first (_redrawn), a smaller stack. Both draw the same heads and leave the generator alike.
AHEAD_LEVELS = frozenset({2})


def head_names(i: int) -> tuple[str, str, str]:
    return f"W_Q{i}", f"W_K{i}", f"W_V{i}"


def head_count(ex: Exercise) -> int:
    return sum(1 for name in ex.given if name.startswith("W_Q"))


def head_given(given: dict, i: int) -> dict:
    """Head i (1-based) as a single-head pipeline input: X, W_Q, W_K, W_V, d_k, causal."""
    w_q, w_k, w_v = head_names(i)
    return {"X": given["X"], "W_Q": given[w_q], "W_K": given[w_k], "W_V": given[w_v],
            "d_k": int(np.shape(given[w_q])[1]), "causal": bool(given.get("causal", False))}


def _head_mistakes(one_head: dict, mistakes: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """{misconception id: the head output O that mistake gives} for the mistakes that change O,
    among `mistakes` (default: the whole catalog, for diagnosis; the redraw passes GUARDS)."""
    reference = dict(pipeline.run(one_head, until={"O"}))
    found = {}
    for mid in misconceptions.CATALOG if mistakes is None else mistakes:
        if "O" not in pipeline.AFFECTED.get(mid, frozenset()):
            continue
        env = pipeline.run_mistake(one_head, reference, mid, until={"O"})
        if "O" in env.tainted:
            found[mid] = env["O"]
    return found


def _weights(rng: np.random.Generator, shape: tuple[int, int], count: int | None = None) -> np.ndarray:
    """Entries −1, 0, 1 with no all-zero column (a zero row is fine: that input feature is ignored), drawn
    from the set of all such matrices; `count` of them at once (count, *shape) when given."""
    drawn = numbers.pooled_matrices(rng, 1 if count is None else count, shape, WEIGHT_VALUES, rows=False)
    return drawn[0] if count is None else drawn


HEAD_BATCH = 128  # candidate weights of one head drawn at once, checked together with numpy
TABLED_TOKENS = 2  # up to this many tokens the checks are read from tables per X (few X's: at most 4⁴ of them,
# each met again and again); with more (4⁶ X's, hardly one met twice) the batch is checked itself

# The candidates of a batch are rows of the pools of all admissible weights (numbers.pooled_matrices), and
# the pools are small (8 or 64 matrices): with few X's (TABLED_TOKENS) every check of a candidate is made
# once per pool row (and per key × query pair of rows) for an X, met again and again, and read for the
# batch's rows, and so is the hand work (budget.head_seconds in pieces that add up). The same draws from
# the generator, the same first candidate kept as checking the whole batch (tests/test_kinds_heads_fast.py
# holds them equal).


def _pool(shape: tuple[int, int]) -> np.ndarray:
    """Every weight matrix of `shape` _weights draws from (numbers.pooled_matrices' pool, no zero column)."""
    return _pool_of(tuple(shape))


@functools.lru_cache(maxsize=8)
def _pool_of(shape: tuple[int, int]) -> np.ndarray:
    return numbers._pool(shape, tuple(float(v) for v in WEIGHT_VALUES), False, True, False)  # (the same array)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)  # shared by every draw from this X (lru_cache): never written
    return a


@functools.lru_cache(maxsize=1024)
def _table(x: bytes, x_shape: tuple[int, int], d_k: int, d_v: int, causal: bool) -> tuple:
    """For X: (pair_ok (P, P) [key row, query row]: the scores' checks, key_ok (P,), value_ok (P_V,))."""
    X = np.frombuffer(x).reshape(x_shape)
    n = x_shape[0]
    K, V = X @ _pool((D_MODEL, d_k)), X @ _pool((D_MODEL, d_v))  # (P, n, d_k) (= the queries'), (P_V, n, d_v)
    P = len(K)
    flat = K.reshape(P * n, d_k)
    # S[a, b, k, q] = (Q_q K_kᵀ)[a, b], whole numbers, laid out with the cells first (fast reductions)
    S = np.ascontiguousarray((flat @ flat.T).reshape(P, n, P, n).transpose(1, 3, 2, 0))  # (n, n, P_key, P_query)
    pair_ok = (np.abs(S).max(axis=(0, 1)) <= MAX_SCORE) & (np.abs(S - S.transpose(1, 0, 2, 3)).max(axis=(0, 1)) > 1e-9)
    visible = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    pair_ok &= np.any([np.ptp(S[i][visible[i]], axis=0) > 0 for i in range(n) if visible[i].sum() > 1], axis=0)
    if causal:  # a hidden score of 0 makes "mask with 0" the same as no mask
        pair_ok &= (S[~visible] != 0).any(axis=0)
    key_ok = np.ptp(K.reshape(P, -1), axis=1) > 0
    value_ok = np.any(V != 0, axis=2).all(axis=1) & (np.ptp(V, axis=1).max(axis=1) > 0)
    return tuple(_frozen(a) for a in (pair_ok, key_ok, value_ok))


@functools.lru_cache(maxsize=512)
def _seconds_table(x: bytes, x_shape: tuple[int, int], d_k: int, d_v: int, causal: bool) -> tuple:
    """For X, budget.head_seconds in pieces over the pool rows: (projection seconds of each W_Q/W_K row,
    of each W_V row, per key × query pair of rows the seconds from S to the softmax, and per pair and per
    key the products A V take: the nonzero weights and those not ±1 in each key's column; per W_V row and
    key, the nonzero values and those not ±1 in its row). A product's seconds are its terms' (nothing with
    a factor 0, an addition with a factor ±1, else a multiply-add), so A V's add up key by key."""
    X = np.frombuffer(x).reshape(x_shape)
    n = x_shape[0]
    add, mul = budget.RATES["additions"], budget.RATES["multiply_adds"]

    def nonzero(M):
        return np.isfinite(M) & (np.abs(M) > 1e-12)  # budget's rules for a factor 0 …

    def unit(M):
        return np.abs(np.abs(M) - 1.0) < 1e-12  # … and ±1

    def product(left, right):  # (B,) seconds of left[b] @ right[b]
        lz, rz = nonzero(left).astype(float), nonzero(right).astype(float)
        terms = (lz @ rz).sum(axis=(1, 2))
        hard = ((lz * ~unit(left)) @ (rz * ~unit(right))).sum(axis=(1, 2))
        return mul * hard + add * (terms - hard)

    pool_qk, pool_v = _pool((D_MODEL, d_k)), _pool((D_MODEL, d_v))
    P = len(pool_qk)
    own_qk = product(np.broadcast_to(X, (P, *X.shape)), pool_qk)  # (P,)
    own_v = product(np.broadcast_to(X, (len(pool_v), *X.shape)), pool_v)  # (P_V,)
    QK = X @ pool_qk  # (P, n, d_k): the queries' (and the keys') of every row
    Q = np.broadcast_to(QK[None], (P, P, n, d_k)).reshape(P * P, n, d_k)  # pair k·P + q: query row q,
    Kt = np.swapaxes(np.broadcast_to(QK[:, None], (P, P, n, d_k)).reshape(P * P, n, d_k), 1, 2)  # key row k
    S = Q @ Kt  # (P², n, n)
    pair = product(Q, Kt)
    if d_k != 1:
        pair = pair + budget.RATES["divisions"] * nonzero(S).sum(axis=(1, 2))
    visible = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    Z = S / np.sqrt(d_k)
    seen = visible.sum(axis=1)
    rows = seen > 1
    exps = ((np.abs(Z) > 1e-12) & visible).sum(axis=2)  # (P², n)
    pair = pair + (budget.RATES["exponentials"] * exps[:, rows].sum(axis=1)
                   + float(add * (seen[rows] - 1).sum() + budget.RATES["divisions"] * seen[rows].sum()))
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.where(visible, np.exp(Z - Z.max(axis=2, keepdims=True)), 0.0)
        A = e / e.sum(axis=2, keepdims=True)  # (P², n, n), as head_seconds makes it
    weights = nonzero(A)
    V = X @ pool_v  # (P_V, n, d_v)
    values = nonzero(V)
    return tuple(_frozen(np.array(a, dtype=float)) for a in (
        own_qk, own_v, pair, weights.sum(axis=1), (weights & ~unit(A)).sum(axis=1), values.sum(axis=2),
        (values & ~unit(V)).sum(axis=2)))


def _head_seconds(t: tuple, rows_q: np.ndarray, rows_k: np.ndarray, rows_v: np.ndarray) -> np.ndarray:
    """budget.head_seconds of the candidates (pool rows) from _seconds_table: the same seconds."""
    own_qk, own_v, pair, weights, hard_weights, values, hard_values = t
    kq = rows_k * len(own_qk) + rows_q
    terms = (weights[kq] * values[rows_v]).sum(axis=1)  # A V: Σ over keys of (its weights) × (its values)
    hard = (hard_weights[kq] * hard_values[rows_v]).sum(axis=1)
    return own_qk[rows_q] + own_qk[rows_k] + own_v[rows_v] + pair[kq] \
        + (budget.RATES["multiply_adds"] * hard + budget.RATES["additions"] * (terms - hard))


def _checked(X: np.ndarray, W_Q: np.ndarray, W_K: np.ndarray, W_V: np.ndarray, causal: bool,
             seconds: float) -> np.ndarray:
    """The candidates of a batch (B, d, width) that pass _draw_head's checks and fit in `seconds`, in
    order, checked on the batch itself."""
    n = X.shape[0]
    K = X @ W_K  # (B, n, d_k)
    S = (X @ W_Q) @ np.swapaxes(K, 1, 2)  # (B, n, n)
    V = X @ W_V  # (B, n, d_v)
    ok = ((np.abs(S).max(axis=(1, 2)) <= MAX_SCORE) & (np.ptp(K.reshape(len(K), -1), axis=1) > 0)
          & (np.abs(S - np.swapaxes(S, 1, 2)).max(axis=(1, 2)) > 1e-9))
    ok &= np.any(V != 0, axis=2).all(axis=1) & (np.ptp(V, axis=1).max(axis=1) > 0)
    visible = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    ok &= np.any([np.ptp(S[:, i, visible[i]], axis=1) > 0 for i in range(n) if visible[i].sum() > 1], axis=0)
    if causal:
        ok &= (S[:, ~visible] != 0).any(axis=1)
    good = np.flatnonzero(ok)
    if len(good):  # the hand work of the candidates left, at once
        good = good[budget.head_seconds(X, W_Q[good], W_K[good], W_V[good], causal) <= seconds]
    return good


def _draw_head(rng: np.random.Generator, d_k: int, d_v: int, X: np.ndarray, causal: bool,
               seconds: float) -> dict[str, np.ndarray] | None:
    """One head's weights, the first of a batch of candidates with small, not all equal scores (S ≠ Sᵀ,
    else K Qᵀ looks right; keys that differ, else every query spreads evenly; some query that sees two
    keys scoring them differently, else the scaling changes nothing; a nonzero hidden score, else "mask
    with 0" is no mask), every token's value nonzero and not all alike (else a weight changes nothing in
    O), and hand work of at most `seconds` (exercises.core.budget.head_seconds); None when the batch has
    none (X is drawn again)."""
    pool_qk, pool_v = _pool((D_MODEL, d_k)), _pool((D_MODEL, d_v))
    rows_q = rng.integers(len(pool_qk), size=HEAD_BATCH)  # the draws _weights makes: W_Q's batch,
    rows_k = rng.integers(len(pool_qk), size=HEAD_BATCH)  # W_K's,
    rows_v = rng.integers(len(pool_v), size=HEAD_BATCH)  # W_V's
    if X.shape[0] <= TABLED_TOKENS:
        x = np.asarray(X, dtype=float).tobytes()
        pair_ok, key_ok, value_ok = _table(x, X.shape, d_k, d_v, bool(causal))
        good = np.flatnonzero(pair_ok[rows_k, rows_q] & key_ok[rows_k] & value_ok[rows_v])
        if len(good):  # the hand work of the candidates left, from the table of its pieces
            t = _seconds_table(x, X.shape, d_k, d_v, bool(causal))
            good = good[_head_seconds(t, rows_q[good], rows_k[good], rows_v[good]) <= seconds]
    else:
        good = _checked(X, pool_qk[rows_q], pool_qk[rows_k], pool_v[rows_v], causal, seconds)
    if len(good):
        b = good[0]
        return {"W_Q": pool_qk[rows_q[b]].copy(), "W_K": pool_qk[rows_k[b]].copy(), "W_V": pool_v[rows_v[b]].copy()}
    return None


@functools.lru_cache(maxsize=4)
def _score_forms(d_k: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct W_Q W_Kᵀ (U, d, d) over the pool's pairs of rows, and of_pair (P_q, P_k): which one each
    pair makes (a head's scores are X (W_Q W_Kᵀ) Xᵀ). Made once: 64 · 64 pairs, 0.3 ms."""
    pool = _pool((D_MODEL, d_k))
    M = np.einsum("qac,kbc->qkab", pool, pool).reshape(len(pool) ** 2, -1)
    forms, of_pair = np.unique(M, axis=0, return_inverse=True)
    return _frozen(forms.reshape(-1, D_MODEL, D_MODEL)), _frozen(of_pair.reshape(len(pool), len(pool)))


@functools.lru_cache(maxsize=4)
def _score_forms_t(d_k: int) -> tuple[np.ndarray, np.ndarray]:
    """_score_forms(d_k) with the forms flat and transposed (d·d, U), contiguous."""
    forms, of_pair = _score_forms(d_k)
    return _frozen(np.ascontiguousarray(forms.reshape(len(forms), -1).T)), of_pair


@functools.lru_cache(maxsize=256)
def _admissible(x: bytes, x_shape: tuple[int, int], d_k: int, d_v: int, causal: bool, seconds: float) -> tuple:
    """Every head this X admits (W_Q = pool[q], W_K = pool[k], W_V = pool_V[v]): the checks of the batch
    drawn before (_draw_head: scores within MAX_SCORE, S ≠ Sᵀ, keys that differ, some query seeing two keys
    that score differently, a nonzero hidden score when causal, every token's value nonzero and not all
    alike) and budget.head_seconds ≤ `seconds`, for all P·P·P_V heads at once, as (pairs: q·P + k of the
    pairs some W_V fits, ends: the running count of heads up to each pair's, values: the admissible W_V
    rows cheapest first; pair i takes the first ends[i] − ends[i − 1] of them): _admitted's first three."""
    return _admitted(x, x_shape, d_k, d_v, causal, seconds)[:3]


@functools.lru_cache(maxsize=8)
def _pool_counts(shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per row of _pool(shape): its nonzero entries in each input row (P, d), and those not ±1."""
    pool = _pool(shape)
    nonzero = pool != 0
    return (_frozen(nonzero.sum(axis=2).astype(float)),
            _frozen((nonzero & (np.abs(pool) != 1)).sum(axis=2).astype(float)))


@functools.lru_cache(maxsize=8)
def _cells(n: int, causal: bool) -> tuple:
    """Constants of an (n, n) score matrix laid out flat (i·n + j): the transposed cell of each, the first
    cell of its row, the visible cells in rows with two or more visible keys, the hidden cells, and the
    softmax's fixed seconds (per such row: visible − 1 additions, visible divisions); per key, the queries
    that see it, and those in rows with two or more visible keys (the weights not 1)."""
    visible = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    seen = visible.sum(axis=1)
    rows = seen > 1
    i, j = np.divmod(np.arange(n * n), n)
    soft = visible & rows[:, None]
    fixed = float(budget.RATES["additions"] * (seen[rows] - 1).sum() + budget.RATES["divisions"] * seen[rows].sum())
    return (_frozen(j * n + i), _frozen(i * n), _frozen(np.flatnonzero(soft)), _frozen(np.flatnonzero(~visible)),
            fixed, _frozen(visible.sum(axis=0).astype(float)), _frozen(soft.sum(axis=0).astype(float)))


@functools.lru_cache(maxsize=256)
def _admitted(x: bytes, x_shape: tuple[int, int], d_k: int, d_v: int, causal: bool, seconds: float) -> tuple:
    """_admissible's (pairs, ends, values), and what the draw reads besides: every pair's seconds
    (P·P, flat q·P + k: W_Q's and W_K's projections, Q Kᵀ, the divisions by √d_k, the softmax), every W_V
    row's (P_V: its projection and A V), every pool row's X W (P, n, d_k) and X W_V (P_V, n, d_v), and
    where each kept pair's heads start (the running count before it, beside ends). A head's
    budget.head_seconds is its pair's plus its W_V row's. The seconds come apart: W_Q's and W_K's
    projections (Σ_k X's nonzero entries in column k × W's in row k); per (W_Q, W_K) the scores' products
    (column by column: Σ_c nonzero q's × nonzero k's), their divisions by √d_k and the exponentials (per
    distinct W_Q W_Kᵀ: S = X W_Q W_Kᵀ Xᵀ, flat, one product with the X_ia X_jb); per W_V its projection
    and A V, whose weights are nonzero exactly where visible and 1 exactly in a row with one visible key
    (scores this small never underflow). Whole seconds: exact sums in any order."""
    X = np.frombuffer(x).reshape(x_shape)
    n = x_shape[0]
    add, mul, div = budget.RATES["additions"], budget.RATES["multiply_adds"], budget.RATES["divisions"]
    pool_qk, pool_v = _pool((D_MODEL, d_k)), _pool((D_MODEL, d_v))
    P = len(pool_qk)
    transposed, first, soft, hidden, fixed, weights, unlike_one = _cells(n, bool(causal))
    xz = X != 0
    xh = (xz & (np.abs(X) != 1)).sum(axis=0).astype(float)  # (d,): X's entries not ±1 per column,
    xz = xz.sum(axis=0).astype(float)  # and nonzero

    def projection(shape):  # (rows,) seconds of X @ pool[r]: add per term, mul − add more per hard term
        wz, wh = _pool_counts(shape)
        return add * (wz @ xz) + (mul - add) * (wh @ xh)

    V = X @ pool_v  # (P_V, n, d_v)
    vz = V != 0
    value_ok = vz.any(axis=2).all(axis=1) & (V != V[:, :1]).reshape(len(V), -1).any(axis=1)
    vh = (vz & (np.abs(V) != 1)).sum(axis=2).astype(float)
    value = projection((D_MODEL, d_v)) + (add * (vz.sum(axis=2) @ weights) + (mul - add) * (vh @ unlike_one))
    values = np.flatnonzero(value_ok)
    values = values[np.argsort(value[values], kind="stable")]  # the W_V rows, cheapest first
    QK = X @ pool_qk  # (P, n, d_k): every row's queries (and keys)
    if not len(values):
        return _none_admitted(values, value, QK, V)
    forms_t, of_pair = _score_forms_t(d_k)  # S = X (W_Q W_Kᵀ) Xᵀ: per distinct W_Q W_Kᵀ only
    # cell by cell (n·n, U), so that every check reduces along the first axis (fast): S[i·n + j] is Σ_ab
    # X_ia X_jb (W_Q W_Kᵀ)_ab, whole numbers
    S = np.einsum("ia,jb->ijab", X, X).reshape(n * n, D_MODEL * D_MODEL) @ forms_t
    nz = S != 0
    ok = ((np.abs(S) <= MAX_SCORE).all(axis=0) & (S != S[transposed]).any(axis=0)
          & (S[soft] != S[first[soft]]).any(axis=0))  # a query seeing two keys that score differently
    if causal:
        ok &= nz[hidden].any(axis=0)
    forms = budget.RATES["exponentials"] * nz[soft].sum(axis=0)
    if d_k != 1:
        forms = forms + div * nz.sum(axis=0)
    own = projection((D_MODEL, d_k))
    # a head's seconds are at least its pair's form's, W_Q's and W_K's projections, the softmax's fixed
    # ones and the cheapest W_V's (Q Kᵀ's terms ≥ 0): an X whose bound is over `seconds` admits none
    # (most of the X's that admit none at level 2), told before the pairs are made
    if not ok.any():
        return _none_admitted(values, value, QK, V)
    least = fixed + float(value[values[0]]) + float(forms[ok].min())
    if least + 2 * float(own.min()) > seconds:
        return _none_admitted(values, value, QK, V)
    flat_qk = QK.reshape(P, -1)
    ok = ok[of_pair] & (flat_qk != flat_qk[:, :1]).any(axis=1)[None, :]  # (P_q, P_k): and the keys differ
    qz = QK != 0
    tz = qz.sum(axis=1).astype(float)  # (P, d_k): nonzero entries per column, and those not ±1
    th = (qz & (np.abs(QK) != 1)).sum(axis=1).astype(float)
    ones = np.ones(P)
    # Q Kᵀ's terms (queries' row q, keys' row k), both projections, in one product of whole numbers
    left = np.column_stack([tz, th, own, ones])
    right = np.column_stack([add * tz, (mul - add) * th, ones, own])
    terms = left @ right.T  # (P_q, P_k)
    if least + float(terms.min()) > seconds:  # the bound with every pair's own terms: nearly all of the rest
        return _none_admitted(values, value, QK, V)
    pair = (terms + (forms[of_pair] + fixed)).reshape(-1)  # (P·P,)
    pairs = np.flatnonzero(ok)  # q·P + k
    fitting = np.searchsorted(value[values], seconds - pair[pairs], side="right")  # W_V's per pair
    kept = fitting > 0
    ends = np.cumsum(fitting[kept])
    return tuple(_frozen(a) for a in (pairs[kept], ends, values, pair, value, QK, V, ends - fitting[kept]))


def _none_admitted(values: np.ndarray, value: np.ndarray, QK: np.ndarray, V: np.ndarray) -> tuple:
    """_admitted's answer for an X that admits no head, told before its pairs' seconds are made (None)."""
    none = np.zeros(0, dtype=np.intp)
    return tuple(a if a is None else _frozen(a) for a in (none, none.copy(), values, None, value, QK, V, none.copy()))


def _heads_of(table: tuple, draws: np.ndarray, d_k: int, d_v: int) -> list[dict[str, np.ndarray]]:
    """The heads numbered `draws` (each < _admissible's count, table[1][-1]) among the admissible ones, in
    the order of _admissible's flat indices: pair by pair, each pair's fitting W_V rows cheapest first."""
    pairs, ends, values = table
    pool_qk, pool_v = _pool((D_MODEL, d_k)), _pool((D_MODEL, d_v))
    at = np.searchsorted(ends, draws, side="right")
    v = values[draws - np.concatenate(([0], ends))[at]]
    q, k = np.divmod(pairs[at], len(pool_qk))
    return [{"W_Q": pool_qk[a].copy(), "W_K": pool_qk[b].copy(), "W_V": pool_v[c].copy()} for a, b, c in zip(q, k, v)]


def _clashing(heads: Heads) -> np.ndarray:
    """(h,) for each head whether misconceptions.clashes(its O, its GUARDS mistakes) names anything: what
    _mistakes_clash decides for all heads together (heads.clash), head by head: its right output and its
    mistakes' (usable: no NaN) in one list, two of them within misconceptions.GAP of each other in every
    cell (_clashing_before: the output against the mistakes, then the mistakes pair by pair; the same).
    The list is laid out cell by cell (cells, h, 1 + m), so the largest difference of each pair is taken
    along the first axis (a max along a short last one is slow); a NaN in a cell makes that maximum NaN,
    never within the gap, so a mistake not usable clashes with nothing."""
    _, O = heads.mistakes()  # (m, h, n, d_v)
    values = comparable(np.swapaxes(O, 0, 1))  # (h, m, cells), ±∞ as misconceptions.clashes compares it
    h, m = values.shape[:2]
    every = np.empty((values.shape[2], h, m + 1))
    every[:, :, 0] = heads.O.reshape(h, -1).T
    every[:, :, 1:] = values.transpose(2, 0, 1)
    first, second = _pairs(m + 1)
    spread = np.abs(every[:, :, first] - every[:, :, second]).max(axis=0)  # (h, pairs)
    heads.clashing = (spread <= misconceptions.GAP).any(axis=1)
    return heads.clashing


@functools.lru_cache(maxsize=8)
def _pairs(m: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs i < j of a list of m, each once, as two index arrays."""
    return tuple(_frozen(a) for a in np.triu_indices(m, k=1))


def _clashing_before(heads: Heads) -> np.ndarray:
    """_clashing as it was written before (tests/test_kinds_multi_head_fast_paths.py holds the two equal)."""
    _, O = heads.mistakes()  # (m, h, n, d_v)
    values = comparable(np.swapaxes(O, 0, 1))  # (h, m, cells)
    usable = ~np.isnan(values).any(axis=-1)  # (h, m)
    near = (like(values, heads.O.reshape(heads.h, -1), misconceptions.GAP) & usable).any(axis=1)
    pair = np.abs(values[:, :, None, :] - values[:, None, :, :]).max(axis=-1) <= misconceptions.GAP  # (h, m, m)
    return near | np.triu(pair & usable[:, :, None] & usable[:, None, :], k=1).any(axis=(1, 2))


def _stack_heads(X: np.ndarray, drawn: list[dict[str, np.ndarray]], causal: bool) -> Heads:
    return Heads(*(X @ np.stack([w[name] for w in drawn]) for name in ("W_Q", "W_K", "W_V")), causal, X.shape[1])

@functools.lru_cache(maxsize=512)
def _apart_heads(x: bytes, x_shape: tuple[int, int], d_k: int, d_v: int, causal: bool, seconds: float) -> np.ndarray:
    """With few tokens (TABLED_TOKENS: few X's, each met again and again), the heads _admissible keeps whose
    own mistakes are apart (_clashing), as flat indices (q·P + k)·P_V + v: one draw is one head."""
    pairs, ends, values, _, _, QK, V, _ = _admitted(x, x_shape, d_k, d_v, causal, seconds)
    if not len(pairs):
        return _frozen(np.zeros(0, dtype=int))
    flat = _flat_heads(pairs, ends, values, len(V))
    q, k, v = _rows_at(flat, len(QK), len(V))
    return _frozen(flat[~_clashing(Heads(QK[q], QK[k], V[v], causal, x_shape[1]))])


def _flat_heads(pairs: np.ndarray, ends: np.ndarray, values: np.ndarray, per_pair: int) -> np.ndarray:
    """Every head of _admissible's table as flat indices (q·P + k)·P_V + v, in its order: pair by pair,
    each pair's fitting W_V rows cheapest first."""
    counts = np.diff(ends, prepend=0)
    starts = np.repeat(ends - counts, counts)
    return np.repeat(pairs, counts) * per_pair + values[np.arange(ends[-1]) - starts]


def _rows_at(flat: np.ndarray, P: int, P_V: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pool rows (W_Q's, W_K's, W_V's) of heads given as flat indices (q·P + k)·P_V + v."""
    qk, v = np.divmod(flat, P_V)
    q, k = np.divmod(qk, P)
    return q, k, v


def _rows_of(admitted: tuple, draws: np.ndarray, P: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pool rows (W_Q's, W_K's, W_V's) of the heads numbered `draws` among _admitted's: the heads
    _heads_of gives, as rows."""
    pairs, ends, values, starts = admitted[0], admitted[1], admitted[2], admitted[7]
    at = np.searchsorted(ends, draws, side="right")
    v = values[draws - starts[at]]
    q, k = np.divmod(pairs[at], P)
    return q, k, v


def _apart_draw(rng: np.random.Generator, admitted: tuple, h: int, causal: bool):
    """h heads among _admitted's, each uniform, a head whose own mistakes clash (_clashing) drawn again, at
    most REDRAWS times: (q, k, v, their O and A with clashing) or None. The draws and decisions of
    _redrawn (tests/test_kinds_multi_head_fast_paths.py holds them equal), with the first redraw's heads
    checked together with the first h: the generator's next draw of each size 1 … h is made ahead (its
    state put back after each), every head in one stack, each head's clashes its own (as _clashing
    decides them: head by head)."""
    count, P, QK, V = admitted[1][-1], len(admitted[5]), admitted[5], admitted[6]
    q, k, v = _rows_of(admitted, rng.integers(count, size=h), P)
    state = rng.bit_generator.state
    ahead = []
    for size in range(1, h + 1):  # what the first redraw draws, for each count of clashing heads
        ahead.append(rng.integers(count, size=size))
        rng.bit_generator.state = state
    rows = [np.concatenate([r, e]) for r, e in zip((q, k, v), _rows_of(admitted, np.concatenate(ahead), P))]
    stack = Heads(QK[rows[0]], QK[rows[1]], V[rows[2]], causal, D_MODEL)
    flags = _clashing(stack)
    clashing, at = flags[:h].copy(), np.arange(h)  # the current heads' clashes, and where they sit in stack
    for attempt in range(REDRAWS):
        bad = np.flatnonzero(clashing)
        if not len(bad):
            return q, k, v, (stack if len(stack.O) == h else _Picked(stack, at))
        if attempt == 0:  # the draw made ahead, made for real (the same numbers)
            rng.integers(count, size=len(bad))
            chosen = h + len(bad) * (len(bad) - 1) // 2 + np.arange(len(bad))  # the draw of that size
            q[bad], k[bad], v[bad] = rows[0][chosen], rows[1][chosen], rows[2][chosen]
            clashing[bad], at[bad] = flags[chosen], chosen
        else:
            q[bad], k[bad], v[bad] = _rows_of(admitted, rng.integers(count, size=len(bad)), P)
            if attempt < REDRAWS - 1:
                stack = Heads(QK[q], QK[k], V[v], causal, D_MODEL)
                clashing, at = _clashing(stack).copy(), np.arange(h)
    return None


class _Picked:
    """Heads picked from a stack: how many, their O and A (each head's own, as a stack of them alone
    gives), and no clash (they were drawn apart)."""

    def __init__(self, stack: Heads, at: np.ndarray):
        self.h, self.O, self.A = len(at), stack.O[at], stack.A[at]
        self.clashing = np.zeros(len(at), dtype=bool)


def _redrawn(rng: np.random.Generator, admitted: tuple, h: int, causal: bool):
    """_apart_draw head by head: each check a stack of the current h heads (as _draft drew before, and as
    it draws at the levels not in AHEAD_LEVELS)."""
    count, P, QK, V = admitted[1][-1], len(admitted[5]), admitted[5], admitted[6]
    q, k, v = _rows_of(admitted, rng.integers(count, size=h), P)
    for _ in range(REDRAWS):
        heads = Heads(QK[q], QK[k], V[v], causal, D_MODEL)
        bad = np.flatnonzero(_clashing(heads))
        if not len(bad):
            return q, k, v, heads
        q[bad], k[bad], v[bad] = _rows_of(admitted, rng.integers(count, size=len(bad)), P)
    return None


def _seconds_fast(admitted: tuple, q: np.ndarray, k: np.ndarray, v: np.ndarray, given: dict, parts) -> float:
    """_operations(given, parts).seconds for heads of pool rows q, k, v of X's _admitted table: each
    head's pair and W_V seconds (budget.head_seconds), the cells of every part, and concat · W_O."""
    pair, value = admitted[3], admitted[4]
    seconds = (float(pair[q * len(admitted[5]) + k].sum() + value[v].sum())
               + budget.RATES["cells"] * sum(math.prod(p.shape) for p in parts))
    if "W_O" in given:
        concat = next(p.reference for p in parts if p.name == "concat")
        seconds += budget.product_operations(concat, given["W_O"]).seconds
    return seconds


def _heads_at(flat: np.ndarray, d_k: int, d_v: int) -> list[dict[str, np.ndarray]]:
    """The heads of flat indices (q·P + k)·P_V + v."""
    pool_qk, pool_v = _pool((D_MODEL, d_k)), _pool((D_MODEL, d_v))
    qk, v = np.divmod(flat, len(pool_v))
    q, k = np.divmod(qk, len(pool_qk))
    return [{"W_Q": pool_qk[a].copy(), "W_K": pool_qk[b].copy(), "W_V": pool_v[c].copy()} for a, b, c in zip(q, k, v)]


def _differ(matrices: list[np.ndarray]) -> bool:
    return not any(np.allclose(a, b) for k, a in enumerate(matrices) for b in matrices[k + 1:])


def _differ_fast(matrices: list[np.ndarray]) -> bool:
    """_differ(matrices): np.allclose's test (|a − b| ≤ 1e-8 + 1e-5 |b| in every cell) written out for
    finite arrays, np.allclose itself otherwise."""
    for k, a in enumerate(matrices):
        for b in matrices[k + 1:]:
            if not (np.isfinite(a).all() and np.isfinite(b).all()):
                if np.allclose(a, b):
                    return False
            elif (np.abs(a - b) <= 1e-8 + 1e-5 * np.abs(b)).all():
                return False
    return True


def _all_zero(a: np.ndarray) -> bool:
    """np.allclose(a, 0): every |a| ≤ 1e-8 (np.allclose itself when a holds a non-finite value)."""
    if not np.isfinite(a).all():
        return bool(np.allclose(a, 0))
    return bool((np.abs(a) <= 1e-8).all())


def _distinguishable(given: dict, h: int, weights: list[np.ndarray], outputs: list[np.ndarray]) -> bool:
    """Heads attend differently and output differently, and no catalogued mistake gives a head's
    right output."""
    if not (_differ(weights) and _differ(outputs)):
        return False
    # every mistake apart from the head's right output and from each other (misconceptions.clashes)
    return not any(misconceptions.clashes(outputs[i - 1], _head_mistakes(head_given(given, i), GUARDS))
                   for i in range(1, h + 1))


def _stacked(given: dict, h: int) -> Heads:
    """Every head's forward pass at once (_shared.heads): the floats the pipeline gives each head."""
    X = np.asarray(given["X"], dtype=float)
    W_Q, W_K, W_V = (np.stack([np.asarray(given[head_names(i)[k]], dtype=float) for i in range(1, h + 1)])
                     for k in range(3))  # (h, d, width) each
    return Heads(X @ W_Q, X @ W_K, X @ W_V, bool(given.get("causal", False)), X.shape[1])


def _mistakes_clash(given: dict, heads: Heads, outputs: list[np.ndarray]) -> bool:
    """Whether misconceptions.clashes(outputs[i], _head_mistakes(head_given(given, i + 1), GUARDS)) names
    anything for some head: every GUARDS mistake of every head at once (tests/test_kinds_heads_fast.py
    hold the two equal); read from `heads.clashing` when _clashing decided it (or the heads came from
    the table of heads whose mistakes are apart)."""
    known = getattr(heads, "clashing", None)
    if known is not None:
        return bool(known.any())
    ids, O = heads.mistakes()  # (m, h, n, d_v): the GUARDS the pipeline makes here, in its catalog order
    reference = np.stack([np.asarray(o, dtype=float).reshape(-1) for o in outputs])  # (h, cells)
    return clash(comparable(np.swapaxes(O, 0, 1)), reference, misconceptions.GAP)


def _operations_fast(given: dict, parts, heads: Heads):
    """_operations(given, parts), counted from the stacked heads (_shared.heads.operations)."""
    h = heads.h
    X = np.asarray(given["X"], dtype=float)
    W = [np.stack([np.asarray(given[head_names(i)[k]], dtype=float) for i in range(1, h + 1)]) for k in range(3)]
    total = head_operations(heads, [(X, w) for w in W], sum(int(np.prod(p.shape)) for p in parts))
    if "W_O" in given:
        concat = next(p.reference for p in parts if p.name == "concat")
        total = total + budget.product_operations(concat, given["W_O"])
    return total


def _trace(given: dict, h: int) -> MultiHeadTrace:
    weights = [[given[head_names(i)[k]] for i in range(1, h + 1)] for k in range(3)]  # W_Q…, W_K…, W_V…
    return multi_head_attention(given["X"], *weights, W_O=given.get("W_O"), causal=given["causal"])


def generate(rng: np.random.Generator, level: int) -> Draft:
    """Heads that fit the level's time budget and keep every catalogued mistake apart (_draft)."""
    return _draft(rng, level)


@functools.lru_cache(maxsize=16)
def _asked(part_names: tuple[str, ...], guards: tuple[str, ...]) -> bool:
    """Whether some of `guards` leads to a part of these names (pipeline.AFFECTED): the mistakes
    misconceptions.collides asks of an exercise."""
    wanted = set(part_names)
    return any(pipeline.AFFECTED.get(mid, frozenset()) & wanted for mid in guards)


def collides(ex: Exercise, guards: tuple[str, ...]) -> bool:
    """misconceptions.collides(ex, guards): the pipeline's mistakes lead to none of this kind's parts (O1 …
    O_h, concat, out are the kind's own: _draft keeps every head's mistakes apart itself), so it asks none
    and finds no clash; asked whenever some guard would lead to a part."""
    return misconceptions.collides(ex, guards) if _asked(tuple(ex.part_names), tuple(guards)) else False


def _operations(given: dict, parts) -> object:
    """Each head's pipeline to O by hand, the cells of every asked part, and concat · W_O."""
    h = sum(1 for name in given if name.startswith("W_Q"))
    total = budget.Operations(cells=sum(int(np.prod(p.shape)) for p in parts))
    for i in range(1, h + 1):
        total = total + budget.count(head_given(given, i), ["O"], written=())
    if "W_O" in given:
        concat = next(p.reference for p in parts if p.name == "concat")
        total = total + budget.product_operations(concat, given["W_O"])
    return total


def operations(ex: Exercise):
    """The hand work of `ex` (exercises.core.budget): the pipeline does not run several heads."""
    return _operations(ex.given, ex.parts)


def _draft(rng: np.random.Generator, level: int) -> Draft:
    n, heads, d_k, d_v, x_values, projected = SIZES[level]
    h = choice(rng, heads)
    causal = bool(rng.integers(2))
    per_head = _share(level, h)  # (W_O is checked exactly below)
    table = None
    tabled = n <= TABLED_TOKENS
    limit = budget.BUDGET_MINUTES[level]
    none = _no_head(level, causal, per_head)
    every = _every_x(level, causal, per_head) if tabled else {}
    for tries in range(MAX_TRIES):
        if table is None or tries % HEADS_PER_X == 0:  # a new X (one that admits no head at once)
            X = nonzero_matrix(rng, (n, D_MODEL), x_values)  # (n, d)
            if none is not None and none[_x_index(X, x_values)]:  # known to admit none (_admitted's answer)
                table = None
                continue
            key = (np.asarray(X, dtype=float).tobytes(), X.shape, d_k, d_v, causal, per_head)
            admitted, table = every.get(key[0]) or (_admitted(*key), None)
            P, P_V, QK, V = len(admitted[5]), len(admitted[6]), admitted[5], admitted[6]
            if table is None:
                table = _apart_heads(*key) if tabled else admitted
            if not len(table if tabled else table[0]):
                table = None
                continue
        # h heads at once, each uniform among every head X admits within its share of the budget whose own
        # mistakes are apart (_clashing): with few tokens from the table of those, with more a head whose
        # mistakes clash is drawn again from the same X (at most REDRAWS times); each head as its pool rows
        # (q, k, v), its Q, K and V read from the table's X W (the same whole numbers as X @ W)
        if tabled:
            q, k, v = _rows_at(table[rng.integers(len(table), size=h)], P, P_V)
            heads = Heads(QK[q], QK[k], V[v], causal, D_MODEL)
            heads.clashing = np.zeros(h, dtype=bool)  # apart by the table (_apart_heads)
        else:
            drawn = (_apart_draw if level in AHEAD_LEVELS else _redrawn)(rng, table, h, causal)
            if drawn is None:
                continue
            q, k, v, heads = drawn
        pool_qk, pool_v = _pool((D_MODEL, d_k)), _pool((D_MODEL, d_v))
        given: dict = {"X": X}
        for i in range(h):
            given.update(zip(head_names(i + 1), (pool_qk[q[i]].copy(), pool_qk[k[i]].copy(), pool_v[v[i]].copy())))
        if projected:
            given["W_O"] = _weights(rng, (h * d_v, D_MODEL))  # (h·d_v, d)
        given.update(d_k=d_k, causal=causal)
        # the heads' forward pass from the stacked heads: multi_head_attention's floats (the kind's tests
        # hold them equal), without running it again
        outputs = list(heads.O)  # h × (n, d_v)
        concat = np.concatenate(outputs, axis=1)  # (n, h·d_v)
        tr = MultiHeadTrace(heads=(), concat=concat, W_O=given.get("W_O"),
                            out=concat @ given["W_O"] if projected else concat)
        if _all_zero(tr.out) or not (_differ_fast(list(heads.A)) and _differ_fast(outputs)):
            continue
        parts = _parts(tr, level, outputs)
        # the same decision as _operations(…) within the budget (_seconds_fast: the seconds of the table's
        # heads) and _distinguishable(…), every head at once (the heads' own mistakes were decided head by
        # head above: _mistakes_clash reads that)
        if (_seconds_fast(admitted, q, k, v, given, parts) / 60.0 <= limit
                and not _mistakes_clash(given, heads, outputs)):
            return Draft(given=given, parts=parts, params={"n": n, "h": h, "d_k": d_k, "d_v": d_v, "width": h * d_v})
    raise RuntimeError(f"multi_head: no distinguishable heads within the time budget in {MAX_TRIES} draws")


def _share(level: int, h: int) -> float:
    """A head's share of the level's budget (seconds): the budget after the cells written, shared evenly."""
    n, _, _, d_v, _, projected = SIZES[level]
    cells = n * d_v * h * 2 + (n * D_MODEL if projected else 0)  # O_1 … O_h, concat, out
    return (budget.BUDGET_MINUTES[level] * 60 - budget.RATES["cells"] * cells) / h


@functools.cache
def _every_x(level: int, causal: bool, seconds: float) -> dict[bytes, tuple]:
    """With few tokens (TABLED_TOKENS: level 1's 56 X's, 112 with the mask), every X's _admitted and
    _apart_heads, made at once on the level's first draft (about 90 ms, once per process) and kept:
    each draft then reads its X's tables (else the first drafts of a process would make them one by
    one, about 1 ms each, and an lru cache could drop them). By X's bytes, as _draft keys them."""
    n, _, d_k, d_v, _, _ = SIZES[level]
    tables = {}
    every = _every_matrix(level)
    for X in every[numbers.no_zero_lines(every)]:  # what nonzero_matrix draws
        key = (X.tobytes(), X.shape, d_k, d_v, causal, seconds)
        tables[key[0]] = (_admitted(*key), _apart_heads(*key))
    return tables


def _every_matrix(level: int) -> np.ndarray:
    """Every X of the level's shape with entries from its values, (count, n, d) in _x_index order."""
    n, _, _, _, x_values, _ = SIZES[level]
    values = np.asarray(x_values, dtype=float)
    digits = np.unravel_index(np.arange(len(values) ** (n * D_MODEL)), (len(values),) * (n * D_MODEL), order="F")
    return values[np.stack(digits, axis=1)].reshape(-1, n, D_MODEL)  # the first entry's digit lowest


def _x_index(X: np.ndarray, x_values: tuple) -> int:
    """X's place among all matrices of its shape with entries from x_values (sorted, as SIZES gives them):
    its entries, row by row, as the digits (each value's place in x_values) of a number in base
    len(x_values), the first lowest."""
    digits = np.searchsorted(np.asarray(x_values, dtype=float), X.reshape(-1))
    return int(digits @ (len(x_values) ** np.arange(X.size)))


def no_head_table(level: int, causal: bool) -> np.ndarray:
    """For every X of the level (_x_index order), whether it admits no head within a head's share of the
    budget (_admitted): what no_head.py stores. Takes a few seconds (every X's table)."""
    n, heads, d_k, d_v, _, _ = SIZES[level]
    (h,) = heads
    seconds = _share(level, h)
    return np.array([not len(_admitted.__wrapped__(X.tobytes(), (n, D_MODEL), d_k, d_v, causal, seconds)[0])
                     for X in _every_matrix(level)])


def print_no_head_tables() -> None:
    """no_head.py's TABLES, printed as the file holds them (after a change to level 2)."""
    for level, causal in ((2, False), (2, True)):
        text = np.packbits(no_head_table(level, causal), bitorder="little").tobytes().hex()
        print(f"    ({level}, {causal}): (")
        for start in range(0, len(text), 96):
            print(f'        "{text[start:start + 96]}"')
        print("    ),")


@functools.lru_cache(maxsize=8)
def _no_head(level: int, causal: bool, seconds: float) -> np.ndarray | None:
    """no_head.py's table for the level, or None (a level without one, or another budget share: then every
    X's table is made)."""
    stored = no_head.TABLES.get((level, causal))
    if stored is None or seconds != _share(level, SIZES[level][1][0]):
        return None
    bits = np.unpackbits(np.frombuffer(bytes.fromhex(stored), dtype=np.uint8), bitorder="little")
    return _frozen(bits[:len(SIZES[level][4]) ** (SIZES[level][0] * D_MODEL)].astype(bool))


def _parts(tr: MultiHeadTrace, level: int, outputs: list[np.ndarray] | None = None) -> list[Part]:
    """The parts of the trace; `outputs`: the heads' O when tr holds no heads."""
    references = {f"O{i}": o for i, o in enumerate(outputs or [hd.O for hd in tr.heads], start=1)}
    references["concat"] = tr.concat  # (n, h·d_v)
    if SIZES[level][5]:
        references["out"] = tr.out  # (n, d)
    decimals = spec(level).decimals
    return [Part(name=name, shape=ref.shape, reference=ref, decimals=decimals_for(ref, decimals))
            for name, ref in references.items()]


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """The statement with mask(·) in each head's formula only when the heads are causal (issue 19)."""
    return ("kind.multi_head.prompt_causal",) if ex.given.get("causal") else ("kind.multi_head.prompt",)


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """A head computed with a catalogued mistake, or the heads concatenated in the wrong order."""
    tolerance = max(part.tolerance, misconceptions.DIAGNOSIS_TOLERANCE)
    h = head_count(ex)
    if part.name.startswith("O") and part.name[1:].isdigit():
        for mid, alt in _head_mistakes(head_given(ex.given, int(part.name[1:]))).items():
            if misconceptions.matches(value, alt, tolerance):
                return mid
    if part.name == "concat":
        heads = [ex.part(f"O{i}").reference for i in range(1, h + 1)]
        for order in permutations(range(h)):
            if list(order) != sorted(order):
                swapped = np.concatenate([heads[k] for k in order], axis=1)  # (n, h·d_v)
                if misconceptions.matches(value, swapped, tolerance):
                    return "concat_order"
    return None


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """The values a learner carries forward (the grader's candidates): each head's O through its own
    head's pipeline unless the learner gave it, concat from the O's unless given, out = concat · W_O
    unless given; every computed value rounded half-up to `rounding` places (None: exact)."""
    env = dict(values)
    h = head_count(ex)
    for i in range(1, h + 1):
        if f"O{i}" not in env:
            env[f"O{i}"] = pipeline.run(head_given(ex.given, i), until={"O"}, rounding=rounding)["O"]
    if "concat" not in env:
        env["concat"] = np.concatenate([env[f"O{i}"] for i in range(1, h + 1)], axis=1)  # (n, h·d_v)
    if "W_O" in ex.given and "out" not in env:
        with np.errstate(invalid="ignore", over="ignore"):  # a learner's ∞ or huge entries
            env["out"] = round_half_up(env["concat"] @ ex.given["W_O"], rounding)  # (n, d)
    return env


# ---------------------------------------------------------------- worked solution

CONCAT = r"\mathrm{concat}"


def solve(ex: Exercise) -> list[solutions.Step]:
    """Each head through the pipeline (its symbols tagged Q^{(i)} …), then the concatenation and W_O."""
    h = head_count(ex)
    steps: list[solutions.Step] = []
    head_outputs = []
    for i in range(1, h + 1):
        part = ex.part(f"O{i}")
        for step in solutions.pipeline_steps(head_given(ex.given, i), ["O"], places={"O": part.decimals},
                                             values={"O": part.reference}, tag=str(i)):
            name = part.name if step.name == "O" else f"{step.name}{i}"
            steps.append(replace(step, name=name, title=msg("solution.multi_head.head", head=i, step=step.title)))
        head_outputs.append(steps[-1])
    steps.append(_concat_step(ex, head_outputs))
    if "out" in ex.part_names:
        steps.append(_out_step(ex, steps[-1]))
    return steps


def _concat_step(ex: Exercise, heads: list[solutions.Step]) -> solutions.Step:
    part = ex.part("concat")
    d_v = heads[0].shape[1]
    symbols = [L.symbol("O", str(i)) for i in range(1, len(heads) + 1)]
    exact = [[c for head in heads for c in head.exact_cells[r]] for r in range(part.shape[0])]

    def derive(i: int, j: int) -> solutions.CellDerivation:
        k, c = divmod(j, d_v)  # column j of the concatenation is column c of head k + 1
        latex = L.chain(L.cell(CONCAT, i, j), L.cell(symbols[k], i, c), L.decimal(part.reference[i, j], part.decimals))
        return solutions.CellDerivation(latex, msg("solution.multi_head.concat_cell", head=k + 1, column=c + 1))

    return solutions.make_step("concat", msg("solution.multi_head.concat"), part.reference, part.decimals,
                               symbol=CONCAT, formula=L.bmatrix([symbols]), exact_cells=exact,
                               note=msg("solution.multi_head.concat_note", width=part.shape[1]), derive=derive)


def _out_step(ex: Exercise, concat: solutions.Step) -> solutions.Step:
    """Y = concat W_O, from the heads' outputs as written (to the part's decimals), exact where short."""
    part, W_O = ex.part("out"), ex.given["W_O"]
    C = concat.value  # (n, h·d_v)
    shown = [[_shown(concat, i, k) for k in range(C.shape[1])] for i in range(C.shape[0])]  # (n, h·d_v)
    weights = [[solutions.number(L.number(x), float(x)) for x in row] for row in W_O]  # (h·d_v, d)
    rounded = any(c.rounded for row in shown for c in row)
    rel = L.APPROX if rounded else "="
    work = [("", rel, f"{L.bmatrix([[c.text for c in row] for row in shown])} {L.matrix_exact(W_O)}")]
    subs = solutions.records.work_substitutions(shown, weights, part.decimals)
    exact = [[L.short(L.to_exact(x)) for x in row] for row in part.reference]  # (n, d) short exact forms

    def derive(i: int, j: int) -> solutions.CellDerivation:
        pairs = [(shown[i][k], weights[k][j]) for k in range(C.shape[1])]
        latex, sub = solutions.worked_chain(
            L.cell("Y", i, j), exact[i][j], part.reference[i, j], part.decimals,
            L.total([L.product(a.text, b.text) for a, b in pairs]), "sum", pairs,
            rf"\sum_{{k}} {L.entry(CONCAT, f'{L.index(i)}k')} (W_O)_{{k{L.index(j)}}}")
        note = msg("solution.cell.rounded_inputs", places=part.decimals) if sub.exact_beside else None
        return solutions.CellDerivation(latex, note, (sub,))

    return solutions.make_step("out", msg("solution.multi_head.out"), part.reference, part.decimals, symbol="Y",
                               formula=rf"{CONCAT} \, W_O", work=work, exact_cells=exact, derive=derive,
                               work_substitutions=subs)


def _shown(step: solutions.Step, i: int, j: int) -> solutions.Number:
    """A cell of an earlier part as a learner carries it: as written to the part's decimals (a whole
    number stays whole; 2/3 is carried as 0.67)."""
    text = step.decimals[i][j]
    x = float(step.value[i, j])
    if float(x).is_integer():
        return solutions.number(str(int(x)))
    return solutions.number(text, None, not L.is_exact_decimal(text, x))


def aids(ex: Exercise) -> solutions.Aids:
    """e^x for every exponent in any head's softmax, and √d_k."""
    heads = [head_given(ex.given, i) for i in range(1, head_count(ex) + 1)]
    return softmax_aids(ex, heads, L.sqrt_dk(int(ex.given["d_k"])))


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"[\,\mathrm{head}_1 \mid \dots \mid \mathrm{head}_h\,]\,W_O")
SHEET = SheetSection("forward", (
    Formula(r"[[\mathrm{head}_i | n | d_v]] = \operatorname{Attention}(X W_Q^{(i)},\ X W_K^{(i)},\ X W_V^{(i)}), "
            r"\qquad i = 1, \dots, h", "formulas.multi_head.heads"),
    Formula(r"[[C | n | h d_v]] = [\,\mathrm{head}_1 \mid \dots \mid \mathrm{head}_h\,], \qquad "
            r"[[\mathrm{out} | n | d_{\mathrm{out}}]] = C\,[[W_O | h d_v | d_{\mathrm{out}}]]",
            "formulas.multi_head.concat"),
))
