"""Grouped-query attention (GQA) and multi-query attention (MQA): h query heads share g K/V heads.

    K_j = X W_Kj,  V_j = X W_Vj                      once per group j = 1 … g
    O_i = softmax(mask(Q_i K_jᵀ / √d_k)) V_j,  Q_i = X W_Qi,  j = group(i) = ⌊(i − 1) / (h/g)⌋ + 1
    concat = [O_1 | … | O_h],   cache_floats = g (d_k + d_v)   (multi-head: h (d_k + d_v))

Conventions (stated in the prompt): causal at every level (GQA is a decoder's way to shrink its KV
cache: token t sees tokens 1 … t); heads are numbered from 1 and consecutive heads share a group
(0-based internally: attention_core.grouped.group_of). Level 1 is multi-query (g = 1, h = 2), levels
2 and 3 grouped (h = 4, g = 2; level 3 with d_k = 2, so the scaling by √d_k matters).

No pipeline step makes these parts (O1 … Oh, concat, cache_floats), so GUARDS is empty and the kind
keeps its own mistakes apart (generate): each head computed with a catalogued mistake (through the
pipeline, head by head, as in multi_head), a head paired with the wrong group (i mod g), the right
keys but group 1's values (K shared out to the heads, V not), the heads concatenated out of order,
and the cache counted as for multi-head attention or for the keys alone.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from itertools import permutations

import numpy as np

from attention_core.grouped import group_of, grouped_query_attention, kv_cache_floats

from ... import solutions
from ...core import budget, misconceptions, numbers, pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import decimals_for, round_half_up
from ...i18n import msg
from ...rendering import latex as L
from .._shared.aids import softmax_aids
from .._shared.hand import own_diagnosis
from .._shared.heads import ColumnTable, Heads, clash, comparable, like, softmax_rows
from .._shared.heads import operations as head_operations

ID = "gqa"
ORDER = 82  # after multi_head (80): the same heads, sharing their keys and values; before rope (84)
VERSION = 3  # 3: each head's two own mistakes (the dealt-out group's keys and values, group 1's values) kept apart
# as the head is picked (issue 14's fifth pass) changes levels 2-3's exercises (7 and 6 of seeds 0-29);
# 2: constructive (issue 14): X among the admissible ones, each group's W_K and W_V and each head's
# W_Q chosen among the rows that keep every check (a head's own mistakes read from a table over its scores and
# value columns, _shared.heads.ColumnTable), so about one draft is made per exercise; only what pairs the
# heads (the wrong group, group 1's values, the order of the heads) is checked on the whole draft
LEVELS = (1, 2, 3)
GUARDS = ()  # no pipeline step makes these parts: the kind keeps its own mistakes apart (generate)


@dataclass(frozen=True)
class Size:
    n: int  # tokens
    h: int  # query heads
    g: int  # key/value groups (g divides h)
    d_k: int
    d_v: int
    x_values: tuple[int, ...]  # entries of X


SIZES = {1: Size(n=2, h=2, g=1, d_k=1, d_v=1, x_values=(0, 1, 2)),  # multi-query: one K/V head
         2: Size(n=2, h=4, g=2, d_k=1, d_v=1, x_values=(-1, 0, 1, 2)),
         3: Size(n=2, h=4, g=2, d_k=2, d_v=2, x_values=(-1, 0, 1, 2))}  # d_v = d_k: 2 g d_k cached
D_MODEL = 2
CAUSAL = True  # every level: a decoder's attention (the KV cache is what GQA shrinks)
WEIGHT_VALUES = (-1, 0, 1)  # projections are sums, not products
MAX_SCORE = 3  # |q · k|: the exponents stay small
MAX_TRIES = 4000
# the catalogued mistakes that can change one head's output (the pipeline makes them, head by head)
HEAD_MISTAKES = ("transposed_scores", "no_scaling", "scaled_by_dk", "mask_diagonal", "mask_wrong_triangle",
                 "no_mask", "mask_after_softmax", "softmax_columns", "no_exp", "weights_transposed",
                 "mask_zero_instead_of_inf", "softmax_no_normalise", "scaled_times_sqrt_dk", "scaled_by_sqrt_d_model")


# ---------------------------------------------------------------- names and heads


def sizes_of(given: dict) -> tuple[int, int]:
    """(h, g): the query heads and the K/V groups of an exercise's given data."""
    h = sum(1 for name in given if name.startswith("W_Q") and name[3:].isdigit())
    return h, int(given["groups"])


def group(i: int, h: int, g: int) -> int:
    """The 1-based group of the 1-based head i (attention_core's rule, shown 1-based)."""
    return group_of(i - 1, h, g) + 1


def _kv(given: dict, j: int) -> tuple[np.ndarray, np.ndarray]:
    """Group j's (1-based) K = X W_Kj (n, d_k) and V = X W_Vj (n, d_v)."""
    X = np.asarray(given["X"], dtype=float)
    return X @ np.asarray(given[f"W_K{j}"], dtype=float), X @ np.asarray(given[f"W_V{j}"], dtype=float)


def head_given(given: dict, i: int, k_group: int | None = None, v_group: int | None = None) -> dict:
    """Head i (1-based) as a single-head pipeline input: X, W_Q, and its group's K and V as given values
    (computed once per group); `k_group`/`v_group` put another group's K or V in (the mistakes)."""
    h, g = sizes_of(given)
    right = group(i, h, g)
    K, _ = _kv(given, right if k_group is None else k_group)
    _, V = _kv(given, right if v_group is None else v_group)
    return {"X": given["X"], "W_Q": given[f"W_Q{i}"], "K": K, "V": V, "d_k": int(given["d_k"]),
            "causal": bool(given["causal"])}


def _trace(given: dict):
    h, g = sizes_of(given)
    return grouped_query_attention(given["X"], [given[f"W_Q{i}"] for i in range(1, h + 1)],
                                   [given[f"W_K{j}"] for j in range(1, g + 1)],
                                   [given[f"W_V{j}"] for j in range(1, g + 1)], causal=bool(given["causal"]))


def references_of(given: dict) -> dict[str, np.ndarray]:
    """O1 … Oh, concat and cache_floats, through attention_core."""
    tr = _trace(given)
    h, g = sizes_of(given)
    refs = {f"O{i}": hd.O for i, hd in enumerate(tr.heads, start=1)}
    refs["concat"] = tr.concat  # (n, h·d_v)
    d_k, d_v = tr.K[0].shape[1], tr.V[0].shape[1]
    refs["cache_floats"] = np.array([[kv_cache_floats(g, d_k, d_v)]], dtype=float)  # (1, 1)
    return refs


# ---------------------------------------------------------------- mistakes


def _pipeline_mistakes(one_head: dict, reference: np.ndarray) -> dict[str, np.ndarray]:
    """{catalogued mistake: the head output it gives} for the HEAD_MISTAKES that change O."""
    env = dict(pipeline.run(one_head, until={"O"}))
    found = {}
    for mid in HEAD_MISTAKES:
        if "O" not in pipeline.AFFECTED.get(mid, frozenset()):
            continue
        wrong = pipeline.run_mistake(one_head, env, mid, until={"O"})
        if "O" in wrong.tainted and np.shape(wrong["O"]) == np.shape(reference):
            found[mid] = np.asarray(wrong["O"], dtype=float)
    return found


def head_mistakes(given: dict, i: int) -> dict[str, np.ndarray]:
    """{mistake id: what it gives for head i's O}: the kind's own (a wrong group) and the catalogued ones."""
    h, g = sizes_of(given)
    right = group(i, h, g)
    found: dict[str, np.ndarray] = {}
    interleaved = (i - 1) % g + 1  # head i paired with group i mod g (0-based): heads dealt out in turn
    if interleaved != right:
        found["gqa_wrong_group"] = pipeline.run(head_given(given, i, interleaved, interleaved), until={"O"})["O"]
    if right != 1:  # K shared out to the heads, V not: every head reads group 1's values
        found["gqa_v_not_shared"] = pipeline.run(head_given(given, i, v_group=1), until={"O"})["O"]
    reference = pipeline.run(head_given(given, i), until={"O"})["O"]
    found.update(_pipeline_mistakes(head_given(given, i), reference))
    return found


def _concat_orders(given: dict, heads: list[np.ndarray]) -> list[np.ndarray]:
    """The concatenations of the right head outputs in every other order."""
    h = len(heads)
    return [np.concatenate([heads[k] for k in order], axis=1) for order in permutations(range(h))
            if list(order) != list(range(h))]


def cache_mistakes(given: dict) -> dict[str, np.ndarray]:
    """{mistake id: the cache_floats it gives}."""
    h, g = sizes_of(given)
    d_k = int(np.shape(given["W_K1"])[1])
    d_v = int(np.shape(given["W_V1"])[1])
    return {"gqa_cache_full_heads": np.array([[kv_cache_floats(h, d_k, d_v)]], dtype=float),
            "gqa_cache_keys_only": np.array([[g * d_k]], dtype=float)}


def mistakes_of(given: dict, name: str) -> dict[str, np.ndarray]:
    """{mistake id: what it gives for part `name`} (for concat: one of the wrong orders; see diagnose)."""
    if name.startswith("O") and name[1:].isdigit():
        return head_mistakes(given, int(name[1:]))
    if name == "cache_floats":
        return cache_mistakes(given)
    return {}


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """A head computed with a wrong group or a catalogued mistake, the heads out of order, a wrong cache count."""
    if part.name == "concat":
        tolerance = max(part.tolerance, misconceptions.DIAGNOSIS_TOLERANCE)
        h, _ = sizes_of(ex.given)
        heads = [ex.part(f"O{i}").reference for i in range(1, h + 1)]
        if any(misconceptions.matches(value, wrong, tolerance) for wrong in _concat_orders(ex.given, heads)):
            return "concat_order"
        return None
    memo = ex.__dict__.setdefault("_memo", {}).setdefault("gqa_mistakes", {})  # exercises are immutable
    if part.name not in memo:
        memo[part.name] = mistakes_of(ex.given, part.name)
    return own_diagnosis(part, value, memo[part.name])


def collides(ex: Exercise, guards: tuple[str, ...]) -> bool:
    """misconceptions.collides(ex, guards): with no guards (this kind's: generate keeps its mistakes apart),
    no mistake is asked, never."""
    return misconceptions.collides(ex, guards) if guards else False


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """The values a learner carries forward: each head's O through its own pipeline (with its group's K
    and V) unless given, concat from the O's unless given, cache_floats from g, d_k, d_v."""
    env = dict(values)
    h, _ = sizes_of(ex.given)
    for i in range(1, h + 1):
        if f"O{i}" not in env:
            env[f"O{i}"] = pipeline.run(head_given(ex.given, i), until={"O"}, rounding=rounding)["O"]
    if "concat" not in env:
        env["concat"] = np.concatenate([np.atleast_2d(env[f"O{i}"]) for i in range(1, h + 1)], axis=1)
    env.setdefault("cache_floats", ex.part("cache_floats").reference)
    return env


# ---------------------------------------------------------------- generation


def _columns_differ(M: np.ndarray) -> np.ndarray:
    """(…,) whether no two columns of each M[…] (…, n, width) are equal: a repeated column is work that
    teaches nothing (a value's second column the copy of its first)."""
    width = M.shape[-1]
    ok = np.ones(M.shape[:-2], dtype=bool)
    for a in range(width):
        for b in range(a + 1, width):
            ok &= np.abs(M[..., a] - M[..., b]).max(axis=-1) > 0
    return ok


def _pool(shape: tuple[int, int]) -> np.ndarray:
    """Every weight matrix of `shape` (entries WEIGHT_VALUES, no zero column: numbers.pooled_matrices' pool)."""
    return numbers._pool(tuple(shape), tuple(float(v) for v in WEIGHT_VALUES), False, True, False)


# ---------------------------------------------------------------- the constructive draw
# Every piece is chosen from those already known to be admissible (issue 14): X among every admissible
# X, each group's (W_K, W_V) among the pairs whose keys differ between tokens, whose values are nonzero
# and not alike, and which are unlike every earlier group's (and its negative), each head's W_Q among the
# rows whose scores are small, not symmetric, hide a nonzero score, score the last query's keys unequally
# and whose catalogued mistakes stay apart from the answer, from the careful student's and from each other
# (read from _shared.heads.ColumnTable: a head's checks depend on its scores and its value columns
# alone). What is left to check on the whole draft is what pairs the heads: a head read with the wrong
# group, group 1's values, the heads out of order; it fails rarely (about 1.0 draft per exercise).


def _codes(M: np.ndarray, bound: int) -> np.ndarray:
    """Whole-number cells of M (…, cells), |cell| ≤ bound, numbered exactly as digits in base 2·bound + 1."""
    base = 2 * bound + 1
    return ((np.rint(M).astype(np.int64) + bound) * base ** np.arange(M.shape[-1])).sum(axis=-1)


@dataclass(frozen=True)
class _Level:
    """Everything a level draws from, enumerated once (_level): x indexes X, k/q rows of the W_K/W_Q
    pool, v rows of the W_V pool."""

    X: np.ndarray  # (NX, n, d): every X of the level's values with no zero row or column
    pool_k: np.ndarray  # (P, d, d_k) (also W_Q's)
    pool_v: np.ndarray  # (P_V, d, d_v)
    K: np.ndarray  # (NX, P, n, d_k): X W for every row (the keys', and the queries')
    V: np.ndarray  # (NX, P_V, n, d_v)
    good: np.ndarray  # (NX, P, P_V): a group's admissible (W_K, W_V), with enough heads (_good_groups)
    value_ok: np.ndarray  # (NX, P_V): every token's value nonzero, not all alike, no column repeated
    codes_k: np.ndarray  # (2, NX, P): X W numbered by its cells (_codes), and −X W (keys, or queries)
    codes_v: np.ndarray  # (2, NX, P_V)
    scores: np.ndarray  # (NX, P, P) [x, key row, query row]: the scores' row in `heads`, −1 where the
    # head's scores are not admissible (too large, symmetric, no hidden score, the last query's even)
    columns: np.ndarray  # (NX, P_V, d_v): each value column's column in `heads` (−1: value not admissible)
    heads: ColumnTable  # every admissible scores × every value column
    usable: np.ndarray  # (U,): the x's with admissible groups
    weights: np.ndarray  # (U,): cumulative, each x's good groups (an X with more variants drawn more often)


def _enumerate_x(size: Size) -> np.ndarray:
    from itertools import product

    X = np.array(list(product(size.x_values, repeat=size.n * D_MODEL)), dtype=float).reshape(-1, size.n, D_MODEL)
    nonzero = X != 0
    return X[nonzero.any(axis=2).all(axis=1) & nonzero.any(axis=1).all(axis=1)]


def _signed_codes(M: np.ndarray, bound: int) -> np.ndarray:
    """(2, NX, P): M[x, p] (whole numbers) numbered exactly by its cells, and −M[x, p]: M[x, p] = M[x, r]
    in every cell when their first codes are equal, M[x, p] = −M[x, r] when p's first is r's second."""
    flat = M.reshape(*M.shape[:2], -1)
    return np.stack([_codes(flat, bound), _codes(-flat, bound)])


def same(codes: np.ndarray, x: int, r: int) -> np.ndarray:
    """(P,): the rows equal to row r for X number x (from _signed_codes)."""
    return codes[0, x] == codes[0, x, r]


def alike(codes: np.ndarray, x: int, r: int) -> np.ndarray:
    """(P,): the rows equal to row r or to its negative."""
    return (codes[0, x] == codes[0, x, r]) | (codes[0, x] == codes[1, x, r])


@functools.lru_cache(maxsize=4)
def _level(level: int) -> _Level:
    """The level's tables, built once per process (CPU time on a loaded 2-core machine, load 5: level 1
    about 6 ms and 0.1 MB (with _seconds, about 18 ms), level 2 about 20-25 ms and 0.3 MB, level 3 about
    100-115 ms and 5.6 MB (still over the 30 ms aim: most of it the ColumnTable of its 5408 heads and the
    (X, W_K, W_Q) scores table); the size is held by tests/test_kinds_gqa_constructive.py)."""
    size = SIZES[level]
    n, d_v = size.n, size.d_v
    X = _enumerate_x(size)
    pool_k, pool_v = _pool((D_MODEL, size.d_k)), _pool((D_MODEL, size.d_v))
    K, V = X[:, None] @ pool_k[None], X[:, None] @ pool_v[None]  # (NX, P, n, d_k), (NX, P_V, n, d_v)
    NX, P = K.shape[:2]
    bound = int(np.abs(X).max()) * D_MODEL  # |x · w| with |w| ≤ 1
    # (cell by cell: numpy's reductions over axes of two are slow) the keys not all one number, the values
    # nonzero in every token and not alike in every token, no column repeated
    key_ok = np.zeros((NX, P), dtype=bool)
    for cell in K.reshape(NX, P, -1).T[1:]:
        key_ok |= cell.T != K[:, :, 0, 0]
    key_ok &= _columns_differ(K)
    value_ok = np.ones(V.shape[:2], dtype=bool)
    spread = np.zeros(V.shape[:2], dtype=bool)
    for t in range(n):
        value_ok &= np.logical_or.reduce([V[:, :, t, c] != 0 for c in range(d_v)])
        if t:
            spread |= np.logical_or.reduce([V[:, :, t, c] != V[:, :, 0, c] for c in range(d_v)])
    value_ok &= spread & _columns_differ(V)
    # S[a][b][x, r, q] = (Q_q K_rᵀ)[a, b]: query a of row q against key b of row r, in small whole numbers
    # (|X W| ≤ bound: exact, each cell a few elementwise products), for one key row r per orbit only: the
    # scores of (W_Q, W_K g) are those of (W_Q gᵀ, W_K) for a signed permutation g of the columns (_orbits)
    reps, rep_of, qmap = _orbits(pool_k)
    whole = np.rint(K).astype(np.int16)
    keys = [[np.ascontiguousarray(whole[:, reps][:, :, None, b, d]) for d in range(size.d_k)] for b in range(n)]
    queries = [[np.ascontiguousarray(whole[:, None, :, a, d]) for d in range(size.d_k)] for a in range(n)]
    S = [[sum(keys[b][d] * queries[a][d] for d in range(size.d_k)) for b in range(n)] for a in range(n)]
    cells = [(a, b) for a in range(n) for b in range(n)]
    shape = S[0][0].shape  # (NX, R, P)
    ok = np.ones(shape, dtype=bool)
    asymmetric = np.zeros(shape, dtype=bool)
    hidden = np.zeros(shape, dtype=bool)
    last = np.zeros(shape, dtype=bool)
    for a, b in cells:
        ok &= np.abs(S[a][b]) <= MAX_SCORE
        if a < b:
            asymmetric |= S[a][b] != S[b][a]
            hidden |= S[a][b] != 0  # (causal: the cells above the diagonal are hidden)
        if a == n - 1 and b > 0:
            last |= S[a][b] != S[a][0]  # the last query scores its keys differently
    ok &= asymmetric & last
    if CAUSAL:
        ok &= hidden
    # the scores numbered by their cells as digits (base 2·MAX_SCORE + 1; −1: not admissible), then by their
    # rank among those met (np.unique's numbering, without a sort: the codes are few)
    base = 2 * MAX_SCORE + 1
    codes = np.zeros(shape, dtype=np.int16)  # (base^(n²) = 2401 for n = 2)
    for a, b in cells:
        codes += (np.clip(S[a][b], -MAX_SCORE, MAX_SCORE) + MAX_SCORE) * np.int16(base ** (a * n + b))
    codes[~ok] = -1
    one = np.empty(base ** (n * n) + 1, dtype=np.int64)
    one[codes] = np.arange(codes.size).reshape(shape)  # a cell (x, r, q) with each code (any one: a head's
    # values depend on its scores alone)
    codes = codes[:, rep_of[:, None], qmap]  # (NX, P, P) [x, k, q]: every key row from its orbit's
    codes[~_columns_differ(K)[:, None, :].repeat(P, axis=1)] = -1  # (the queries' columns: no score's matter)
    query_ok = codes >= 0
    met = np.zeros((NX, base ** (n * n) + 1), dtype=bool)  # [x, code]: the scores X meets (the last: none)
    met[np.arange(NX)[:, None, None], codes] = True
    present = met[:, :-1].any(axis=0)
    rank = np.append(np.cumsum(present) - 1, -1).astype(np.int16)  # (rank[−1]: not admissible)
    scores = rank[codes]  # (at most (2·MAX_SCORE + 1)^(n²) scores)
    found = np.flatnonzero(present)
    s_met = met[:, found]
    x_, r_, q_ = np.unravel_index(one[found], shape)  # one head with each admissible scores
    k_ = reps[r_]
    column_codes = _codes(np.swapaxes(V, 2, 3), bound)  # (NX, P_V, d_v)
    kept, col_inverse = np.unique(column_codes[value_ok], return_inverse=True)
    columns = np.full((NX, len(pool_v), d_v), -1, dtype=np.int16)
    columns[value_ok] = col_inverse.reshape(-1, d_v)
    base = 2 * bound + 1
    column_values = (kept[:, None] // base ** np.arange(n)) % base - bound  # (nC, n): the columns decoded
    # the (scores, column) pairs some X meets: its admissible scores × its admissible values' columns
    c_met = np.zeros((NX, len(kept)), dtype=bool)
    c_met[np.repeat(np.nonzero(value_ok)[0], d_v), col_inverse.reshape(-1)] = 1
    pairs = np.argwhere(s_met.T.astype(float) @ c_met.astype(float) > 0)  # (counts: exact in floats)
    heads = ColumnTable(K[x_, q_], K[x_, k_], column_values.astype(float), pairs, CAUSAL, D_MODEL,
                        (_separation(0), _separation(spec(level).decimals)), careful=True)
    codes_k, codes_v = _signed_codes(K, bound), _signed_codes(V, bound)
    good = _good_groups(size, key_ok, value_ok, query_ok, scores, columns, heads)
    count = good.reshape(NX, -1).sum(axis=1)
    usable = np.flatnonzero([bool(count[x]) if size.g == 1 or count[x] > 512 or not count[x] else  # (_groups_fit's)
                             _groups_fit(size, good[x], lambda x=x: (_alike_all(codes_k, x), _alike_all(codes_v, x)))
                             for x in range(NX)])
    weights = np.cumsum(good[usable].sum(axis=(1, 2)), dtype=float)
    tables = [K, V, good, value_ok, codes_k, codes_v, scores, columns, usable, weights]
    for a in tables:
        a.setflags(write=False)
    return _Level(X, pool_k, pool_v, *tables[:8], heads, *tables[8:])


def _orbits(pool: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pool (P, d, d_k) under the signed permutations g of its columns (the pool holds W g for each
    W): (R,) one row per orbit, (P,) each row's orbit (its position in the first), and (P, P) qmap[k, q] the
    row W_q gᵀ where W_k = W_r g (r: k's orbit's row), so that W_q W_kᵀ = W_qmap[k, q] W_rᵀ."""
    from itertools import product

    P, d, d_k = pool.shape
    digits = 3 ** np.arange(d * d_k)

    def code(W):  # (…, d, d_k) of −1, 0, 1 → (…,) its number
        return (np.rint(W).astype(np.int64).reshape(*W.shape[:-2], -1) + 1) @ digits

    index = np.full(3 ** (d * d_k), -1)
    index[code(pool)] = np.arange(P)
    signed = [np.eye(d_k)[list(order)] * np.array(signs)[:, None] for order in permutations(range(d_k))
              for signs in product((1.0, -1.0), repeat=d_k)]  # g: row i of g is ± row order[i] of I
    image = np.stack([index[code(pool @ g)] for g in signed])  # (G, P): the row of W g
    back = np.stack([index[code(pool @ g.T)] for g in signed])  # (G, P): the row of W gᵀ
    assert (image >= 0).all() and (back >= 0).all()  # (the pool holds W g for each W)
    reps: list[int] = []
    rep_of = np.full(P, -1)
    qmap = np.zeros((P, P), dtype=np.int64)
    for r in range(P):
        if rep_of[r] >= 0:
            continue
        reps.append(r)
        for e in range(len(signed)):
            k = image[e, r]
            if rep_of[k] < 0:
                rep_of[k], qmap[k] = len(reps) - 1, back[e]
    return np.array(reps), rep_of, qmap


def _alike_all(codes: np.ndarray, x: int) -> np.ndarray:
    """(P, P): alike(codes, x, r) for every row r."""
    own, negated = codes[0, x], codes[1, x]
    return (own[:, None] == own[None, :]) | (own[None, :] == negated[:, None])


SMALL = 4096  # pools of W_K × W_V × W_Q rows up to this size have their groups' heads counted ahead


def _good_groups(size: Size, key_ok, value_ok, query_ok, scores, columns, heads: ColumnTable) -> np.ndarray:
    """(NX, P, P_V): the keys differ between tokens (no column repeated), the values are nonzero and not
    alike, some query makes admissible scores, and (for small pools: SMALL) two of the query rows whose
    head keeps its mistakes apart give outputs apart (the group's two heads; size.h / size.g ≤ 2)."""
    assert size.h // size.g <= 2
    good = key_ok[:, :, None] & value_ok[:, None, :] & query_ok.any(axis=2)[:, :, None]
    NX, P, P_V = good.shape
    if P * P * P_V > SMALL:
        return good  # (too many to count ahead: a draw tries another group instead, _draw)
    x, k, v = np.nonzero(good)
    s = scores[x, k]  # (G, P): every query row's scores with this key
    b = heads.index[np.maximum(s, 0)[:, :, None], columns[x, v][:, None, :]]  # (G, P, d_v)
    fits = (s >= 0) & ~heads.head_clashes_at(b.reshape(-1, b.shape[2]), True).reshape(s.shape)  # (G, P)
    O = heads.O[b]  # (G, P, d_v, n)
    high = np.where(fits[:, :, None, None], O, -np.inf).max(axis=1)
    low = np.where(fits[:, :, None, None], O, np.inf).min(axis=1)
    good[x, k, v] = (high - low > max(heads.gaps)).any(axis=(1, 2))
    return good


def _groups_fit(size: Size, good: np.ndarray, alikes) -> bool:
    """Whether size.g good groups exist whose keys and values are unlike each other's (g ≤ 2; alikes():
    (P, P) and (P_V, P_V), which keys and which values are alike)."""
    assert size.g <= 2
    pairs = np.argwhere(good)
    if size.g == 1 or not len(pairs) or len(pairs) > 512:  # (so many: surely, else a draw starts again)
        return bool(len(pairs))
    alike_k, alike_v = alikes()
    k, v = pairs[:, 0], pairs[:, 1]
    return bool((~alike_k[k][:, k] & ~alike_v[v][:, v]).any())


def _pick(rng: np.random.Generator, ok: np.ndarray) -> int | None:
    """A uniformly chosen index where `ok` holds (flattened), None when none does."""
    where = np.flatnonzero(ok)
    return int(where[rng.integers(len(where))]) if len(where) else None


GROUP_TRIES = 12  # a group's (W_K, W_V) chosen again, the pairs tried left out, before the draft starts again


def _draw(rng: np.random.Generator, level: int) -> tuple[int, list[tuple[int, int]], list[int]] | None:
    """(x, [(k, v) per group], [q per head]): every piece chosen among the admissible ones (_Level),
    every head's own mistakes apart (its ColumnTable bits), its queries unlike its group's other heads'
    and its output apart from every earlier head's (else two heads could be swapped unseen), and a head
    with both of the kind's own mistakes (read with the dealt-out group, read with group 1's values) where
    the two give outputs apart (what _cross_apart refused most: about 1 draft in 5 at levels 2-3 before,
    now about 1 in 20 at level 2, fewer at 3); None when the groups tried admit too few heads."""
    lv, size = _level(level), SIZES[level]
    t = lv.heads
    x = int(lv.usable[np.searchsorted(lv.weights, rng.random() * lv.weights[-1], side="right")])
    g, share = size.g, size.h // size.g
    apart = max(t.gaps)  # the concatenation's gap, whichever it is
    groups: list[tuple[int, int]] = []
    heads: list[int] = []
    outputs: list[np.ndarray] = []  # (d_v, n) each: the heads' outputs so far, by column
    ok = lv.good[x]  # (P, P_V)
    for j in range(g):
        for k, v in groups:
            ok = ok & ~alike(lv.codes_k, x, k)[:, None] & ~alike(lv.codes_v, x, v)[None, :]
        for _ in range(GROUP_TRIES):
            kv = _pick(rng, ok)
            if kv is None:
                return None
            k, v = divmod(kv, ok.shape[1])
            rows = np.flatnonzero(lv.scores[x, k] >= 0)  # the query rows whose scores are admissible
            s = lv.scores[x, k, rows]
            b = t.index[s[:, None], lv.columns[x, v][None, :]]  # (R, d_v)
            fits = ~t.head_clashes_at(b, True)
            O = t.O[b]  # (R, d_v, n)
            own = [None] * share  # per place in the group: its two own mistakes apart, where both are known
            for p in range(share * bool(j)):
                i = j * share + p
                if i % g < j:  # gqa_wrong_group (a group chosen already) against gqa_v_not_shared (group 1's
                    # values): what _cross_apart refuses most
                    w_k, w_v = groups[i % g]
                    Z = (lv.K[x, rows] @ lv.K[x, w_k].T) / math.sqrt(size.d_k)
                    Z[:, _hidden(size.n)] = -np.inf
                    spread = np.abs(softmax_rows(Z) @ lv.V[x, w_v] - t.A[s] @ lv.V[x, groups[0][1]])
                    own[p] = spread.reshape(len(rows), -1).max(axis=1) > apart
            chosen = []
            for p in range(share):
                for o in outputs + [O[c] for c in chosen]:
                    fits &= np.abs(O - o).max(axis=(1, 2)) > apart
                c = _pick(rng, fits if own[p] is None else fits & own[p])
                if c is None:
                    break
                chosen.append(c)
                fits &= ~same(lv.codes_k, x, rows[c])[rows]  # the group's heads query differently
            if len(chosen) == share:
                break
            ok = ok.copy()
            ok[k, v] = False
        else:
            return None
        groups.append((k, v))
        heads += [int(rows[c]) for c in chosen]
        outputs += [O[c] for c in chosen]
    return x, groups, heads


def _given(lv: _Level, size: Size, x: int, groups: list[tuple[int, int]], heads: list[int]) -> dict:
    given: dict = {"X": lv.X[x].copy()}
    given.update({f"W_Q{i}": lv.pool_k[q].copy() for i, q in enumerate(heads, start=1)})  # (d, d_k) each
    given.update({f"W_K{j}": lv.pool_k[k].copy() for j, (k, _) in enumerate(groups, start=1)})  # (d, d_k)
    given.update({f"W_V{j}": lv.pool_v[v].copy() for j, (_, v) in enumerate(groups, start=1)})  # (d, d_v)
    given.update(groups=size.g, d_k=size.d_k, causal=CAUSAL)
    return given


class _Drawn:
    """A draft's heads read from the level's tables: every head's scores row s, its group's value columns,
    and from them its weights, output, careful value and catalogued mistakes (h, …)."""

    def __init__(self, level: int, x: int, groups: list[tuple[int, int]], heads: list[int]):
        lv, size = _level(level), SIZES[level]
        self.level, self.x, self.groups, self.heads, self.size = level, x, groups, heads, size
        self.right = [group(i, size.h, size.g) - 1 for i in range(1, size.h + 1)]  # 0-based group of each head
        self.s = np.array([lv.scores[x, groups[j][0], q] for q, j in zip(heads, self.right)])  # (h,)
        self.cols = np.array([lv.columns[x, groups[j][1]] for j in self.right])  # (h, d_v)
        t = lv.heads
        self.A = t.A[self.s]  # (h, n, n)
        self.V = np.stack([lv.V[x, groups[j][1]] for j in self.right])  # (h, n, d_v)
        self.O = self.A @ self.V  # (h, n, d_v): the stacked heads' floats (as _Forward, as references_of)
        self.b = t.index[self.s[:, None], self.cols]  # (h, d_v): each head's columns in the table
        self.whole = t.whole[self.b].all(axis=1)  # (h,)

    def own_clash(self) -> bool:
        """Whether some head's catalogued mistakes clash (what _draw has kept apart)."""
        return bool(_level(self.level).heads.head_clashes(self.s, self.cols, True).any())


@functools.lru_cache(maxsize=4)
def _own_mistakes(h: int, g: int) -> tuple[list[int], list[int], list[int], np.ndarray, np.ndarray]:
    """Which heads (0-based) have the kind's own mistakes: (heads read with the dealt-out group, that
    group, heads read with group 1's values, the owner of each extra in that order (wrong groups first),
    pairs[e, e'] (e < e'): two extras of one head)."""
    right = [group_of(i, h, g) for i in range(h)]
    wrong = [i for i in range(h) if i % g != right[i]]
    later = [i for i in range(h) if right[i] != 0]
    owner = np.array(wrong + later, dtype=int)
    pairs = np.triu(owner[:, None] == owner[None, :], k=1)
    return wrong, [i % g for i in wrong], later, owner, pairs


def _cross_apart(d: _Drawn) -> bool:
    """What _apart_fast decides beyond each head's own catalogued mistakes: the kind's own mistakes (a
    head with the dealt-out group's keys and values, a head with group 1's values) apart from the head's
    answer, its careful value, its catalogued mistakes and each other, and no other order of the heads'
    outputs (or of the careful ones) their concatenation. (Every head's extras at once: one batch each.)"""
    lv, size = _level(d.level), d.size
    t = lv.heads
    h, g = size.h, size.g
    gaps = t.gaps  # (a whole head's, any other's)
    careful = np.swapaxes(t.careful[d.b], 1, 2)  # (h, n, d_v)
    wrong, dealt, later, owner, pairs = _own_mistakes(h, g)
    if len(owner):
        extra = []
        if wrong:  # gqa_wrong_group: head i with group i mod g's keys and values
            Kx, Vx = lv.K[d.x], lv.V[d.x]
            Q = Kx[[d.heads[i] for i in wrong]]  # (w, n, d_k)
            keys = Kx[[d.groups[j][0] for j in dealt]]
            Z = (Q @ np.swapaxes(keys, 1, 2)) / math.sqrt(size.d_k)
            Z[:, _hidden(Z.shape[-1])] = -np.inf
            extra.append(softmax_rows(Z) @ Vx[[d.groups[j][1] for j in dealt]])
        if later:  # gqa_v_not_shared: the right keys, group 1's values
            extra.append(d.A[later] @ lv.V[d.x, d.groups[0][1]])
        E = np.concatenate(extra) if len(extra) > 1 else extra[0]  # (e, n, d_v)
        gap = np.where(d.whole[owner], gaps[0], gaps[1])  # (e,)
        alts = t.alts[d.b[owner]]  # (e, d_v, M, n)
        with np.errstate(invalid="ignore"):  # (NaN: a mistake no one can write, never near)
            near = np.abs(E - d.O[owner]).max(axis=(1, 2)) <= gap
            near |= np.abs(E - careful[owner]).max(axis=(1, 2)) <= gap
            # alts[e, c, m, a] against E[e, a, c]: the largest over the cells of every mistake m
            near |= (np.abs(alts - np.swapaxes(E, 1, 2)[:, :, None, :]).max(axis=(1, 3)) <= gap[:, None]).any(axis=1)
        if near.any():
            return False
        if (pairs & (np.abs(E[:, None] - E[None, :]).max(axis=(2, 3)) <= gap[:, None])).any():
            return False
    gap = gaps[0] if d.whole.all() else gaps[1]  # the concatenation's: whole when every head is
    off = ~np.eye(h, dtype=bool)
    for target in (d.O, careful):  # block b of the concatenation is head b's output
        same = np.abs(d.O[:, None] - target[None, :]).max(axis=(2, 3)) <= gap  # [a, b]
        if not (same & off).any():
            continue  # only the heads' own order gives the concatenation
        same = same.tolist()
        if any(all(same[order[k]][k] for k in range(h)) for order in permutations(range(h))
               if list(order) != list(range(h))):
            return False
    return True


@functools.lru_cache(maxsize=8)
def _hidden(n: int) -> np.ndarray:
    """(n, n): the cells a causal mask hides (above the diagonal)."""
    hidden = np.triu(np.ones((n, n), dtype=bool), k=1)
    hidden.setflags(write=False)
    return hidden


def _apart(given: dict, parts: list[Part]) -> bool:
    """Every part's mistakes differ from its answer, from what a careful student who rounds gets, and
    from each other (to 2 decimals too); the heads' outputs differ, so every wrong order is told apart.
    Through the pipeline, head by head: the rule _apart_fast (what generate asks) is held to."""
    stand_in = Exercise(kind=ID, seed=0, level=1, version=VERSION, given=given, parts=tuple(parts))
    heads = [p for p in parts if p.name.startswith("O")]
    alts: dict[str, dict[str, np.ndarray]] = {}
    for p in heads + [stand_in.part("cache_floats")]:  # against its answer first: the first clash ends it
        alts[p.name] = mistakes_of(given, p.name)
        if misconceptions.clashes(p.reference, alts[p.name], misconceptions.separation(p)):
            return False
    careful = chain(stand_in, {}, 2)  # the dearer check last
    if any(misconceptions.clashes(careful[name], found, misconceptions.separation(stand_in.part(name)))
           for name, found in alts.items()):
        return False
    concat = stand_in.part("concat")
    gap = misconceptions.separation(concat)
    return all(misconceptions.apart(wrong, target, gap) for target in (concat.reference, careful["concat"])
               for wrong in _concat_orders(given, [p.reference for p in heads]))


# ---------------------------------------------------------------- the same checks, all heads at once
# _apart asks the pipeline for every head's mistakes one by one (h × 14 runs, then h rounded runs) and
# _operations counts through it head by head. The checks below compute the same values with numpy for
# every head and every mistake at once, and decide as _apart and _operations do (tests/test_kinds_heads_fast.py
# holds them equal over many drafts, the rejected ones too).


class _Forward:
    """Every head's forward pass at once, stacked (h, …): the values references_of and the pipeline give
    (the same numpy operations, so the same floats: tests/test_kinds_heads_fast.py holds them equal)."""

    def __init__(self, given: dict):
        h, g = sizes_of(given)
        X = np.asarray(given["X"], dtype=float)
        self.h, self.g, self.X = h, g, X
        self.Ks = [X @ np.asarray(given[f"W_K{j}"], dtype=float) for j in range(1, g + 1)]  # as _kv
        self.Vs = [X @ np.asarray(given[f"W_V{j}"], dtype=float) for j in range(1, g + 1)]
        self.W_Q = np.stack([np.asarray(given[f"W_Q{i}"], dtype=float) for i in range(1, h + 1)])  # (h, d, d_k)
        self.right = [group(i, h, g) - 1 for i in range(1, h + 1)]  # 0-based group of each head
        self.heads = heads = Heads(X @ self.W_Q, np.stack([self.Ks[j] for j in self.right]),
                                   np.stack([self.Vs[j] for j in self.right]), bool(given["causal"]), X.shape[1])
        self.Q, self.K, self.V, self.S, self.masked, self.A, self.O = (heads.Q, heads.K, heads.V, heads.S,
                                                                       heads.masked, heads.A, heads.O)
        self.d_k = heads.d_k


def _head_alternatives(given: dict, fw: _Forward | None = None) -> tuple[list[str], np.ndarray]:
    """The ids of head_mistakes, and (h, m, n·d_v) what each of those m mistakes gives for every head's O
    (NaN where a mistake is not made for that head, or gives a value no one can write), comparable as
    misconceptions.clashes compares them (±∞ as its stand-in)."""
    fw = fw or _Forward(given)
    ids, O = fw.heads.mistakes()  # (m, h, n, d_v)
    wrong = np.full((1, *fw.V.shape), np.nan)  # gqa_wrong_group: head i with group i mod g's keys and values
    later = wrong.copy()  # gqa_v_not_shared: the right keys, group 1's values
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(1, fw.h + 1):
            right, dealt = fw.right[i - 1] + 1, (i - 1) % fw.g + 1
            if dealt != right:
                scores = fw.heads.mask((fw.Q[i - 1] @ fw.Ks[dealt - 1].T) / math.sqrt(fw.d_k))
                wrong[0, i - 1] = softmax_rows(scores) @ fw.Vs[dealt - 1]
            if right != 1:
                later[0, i - 1] = fw.A[i - 1] @ fw.Vs[0]
    O = np.swapaxes(np.concatenate([O, wrong, later]), 0, 1)  # (h, m, n, d_v)
    return [*ids, "gqa_wrong_group", "gqa_v_not_shared"], comparable(O)


def _careful(given: dict, fw: _Forward | None = None) -> np.ndarray:
    """(h, n, d_v): each head's O as chain(…, rounding=2) gives it (every step rounded, as the pipeline)."""
    fw = fw or _Forward(given)

    def r(M):
        return round_half_up(M, 2)

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # Q and S are whole numbers (X and the weights are): rounding them changes at most a zero's sign,
        # which nothing after them sees (the O's are rounded, and 0.0 and −0.0 round alike)
        masked = r(fw.heads.mask(r(fw.S / math.sqrt(fw.d_k))))
        return r(r(softmax_rows(masked)) @ fw.V)


@functools.lru_cache(maxsize=64)
def _cache_clashes(h: int, g: int, d_k: int, d_v: int, decimals: int) -> bool:
    """Whether the cache count's mistakes clash (they depend on the sizes alone)."""
    given = {"groups": g, **{f"W_Q{i}": None for i in range(1, h + 1)}, "W_K1": np.zeros((D_MODEL, d_k)),
             "W_V1": np.zeros((D_MODEL, d_v))}
    reference = np.array([[kv_cache_floats(g, d_k, d_v)]], dtype=float)
    cache = Part(name="cache_floats", shape=(1, 1), reference=reference, decimals=decimals_for(reference, decimals))
    return bool(misconceptions.clashes(reference, cache_mistakes(given), misconceptions.separation(cache)))


@functools.lru_cache(maxsize=16)
def _separation(decimals: int) -> float:
    """misconceptions.separation of a part graded to `decimals` places."""
    return misconceptions.separation(Part(name="O1", shape=(1, 1), reference=np.zeros((1, 1)), decimals=decimals))


def _apart_fast(given: dict, level: int, fw: _Forward | None = None) -> bool:
    """_apart's decision on the parts _parts(given, level) makes, from every head's mistakes at once (and
    the references computed here: the same values)."""
    fw = fw or _Forward(given)
    h = fw.h
    decimals = spec(level).decimals
    if _cache_clashes(h, fw.g, fw.d_k, fw.V.shape[2], decimals):
        return False  # (the rounded chain carries the cache's reference: this is its only check)
    # numbers.decimals_for of every head's O at once: 0 when every finite cell is whole
    finite = np.isfinite(fw.O)
    whole = np.round(np.where(finite, fw.O, 0.0))
    close = np.abs(np.where(finite, fw.O, 0.0) - whole) <= 1e-12 + 1e-5 * np.abs(whole)
    whole_heads = close.all(axis=(1, 2)).tolist()  # (h,)
    gap = np.array([_separation(0 if w else decimals) for w in whole_heads])
    _, alts = _head_alternatives(given, fw)  # (h, m, c)
    if clash(alts, fw.O.reshape(h, -1), gap):
        return False
    careful = _careful(given, fw)  # (clashes against it: the pairs are the same as just checked)
    if (like(alts, careful.reshape(h, -1), gap) & ~np.isnan(alts).any(axis=-1)).any():
        return False
    gap = _separation(0 if all(whole_heads) else decimals)  # the concatenation's: whole when every head is
    for target in (fw.O, careful):  # block b of the concatenation is head b's output
        # same[a, b]: head a's right output matches block b of the target in every cell
        same = misconceptions.cell_matches(fw.O[:, None], target[None, :], gap).all(axis=(2, 3)).tolist()
        if any(all(same[order[k]][k] for k in range(h)) for order in permutations(range(h))
               if list(order) != list(range(h))):
            return False
    return True


def _operations_fast(given: dict, parts: list[Part], fw: _Forward):
    """_operations(given, parts), counted from the stacked heads (_shared.heads.operations): K and V once
    per group, each head from X W_Q to O, every cell written."""
    W_K = np.stack([np.asarray(given[f"W_K{j}"], dtype=float) for j in range(1, fw.g + 1)])
    W_V = np.stack([np.asarray(given[f"W_V{j}"], dtype=float) for j in range(1, fw.g + 1)])
    return head_operations(fw.heads, [(fw.X, W_K), (fw.X, W_V), (fw.X, fw.W_Q)],
                           sum(int(np.prod(p.shape)) for p in parts))


def _parts(given: dict, level: int) -> list[Part]:
    decimals = spec(level).decimals
    return [Part(name=name, shape=ref.shape, reference=ref, decimals=decimals_for(ref, decimals))
            for name, ref in references_of(given).items()]


def _params(given: dict) -> dict:
    h, g = sizes_of(given)
    share = h // g
    d_k, d_v = int(np.shape(given["W_K1"])[1]), int(np.shape(given["W_V1"])[1])
    heads = [", ".join(str(i) for i in range(1, h + 1) if group(i, h, g) == j) for j in range(1, g + 1)]
    return {"n": int(np.shape(given["X"])[0]), "h": h, "g": g, "share": share, "d_k": d_k, "d_v": d_v,
            "width": h * d_v, "heads_of_groups": "; ".join(f"{hs} → {j}" for j, hs in enumerate(heads, start=1)),
            "mha_floats": kv_cache_floats(h, d_k, d_v)}


@functools.lru_cache(maxsize=4)
def worst_minutes(level: int) -> float:
    """An upper bound of any draft's hand work at `level` (what _operations counts, at most): the
    projections are additions (the weights are −1, 0, 1), every score a full product, a division per
    score when d_k ≠ 1, every visible key of a row with two or more an exponential, an addition and a
    division, every visible weight but the first query's (exactly 1) a multiply-add per value column."""
    size = SIZES[level]
    n, h, g, d_k, d_v = size.n, size.h, size.g, size.d_k, size.d_v
    seen = np.arange(1, n + 1) if CAUSAL else np.full(n, n)
    rows = seen[seen > 1]
    worst = budget.Operations(
        multiply_adds=h * (n * n * d_k + int(rows.sum()) * d_v),
        additions=n * D_MODEL * (g * (d_k + d_v) + h * d_k)
        + h * (int((rows - 1).sum()) + int((seen == 1).sum()) * d_v),
        exponentials=h * int(rows.sum()), divisions=h * (int(rows.sum()) + (n * n if d_k != 1 else 0)),
        cells=2 * h * n * d_v + 1)
    return worst.minutes


@functools.lru_cache(maxsize=4)
def _seconds(level: int) -> tuple[np.ndarray, np.ndarray]:
    """For a level whose worst case does not fit its budget: (NX, P, P_V) the seconds of a group's K = X W_K
    and V = X W_V, and (NX, P, P_V, P) [x, k, v, q] a head's from Q = X W_Q to O with that group's K and V
    (budget.head_seconds without the group's two products): what _operations counts, in pieces."""
    lv = _level(level)
    NX, P, P_V = lv.good.shape

    def product(W):  # (NX, rows) budget.product_operations(X, W[row]).seconds: per term, 0, ±1 or other
        lz = (lv.X != 0).astype(float)[:, None]  # (NX, 1, n, d)
        rz, hard_r = (W != 0).astype(float)[None], ((W != 0) & (np.abs(W) != 1)).astype(float)[None]
        terms = (lz @ rz).sum(axis=(2, 3))
        hard = ((lz * ((lv.X != 0) & (np.abs(lv.X) != 1))[:, None]) @ hard_r).sum(axis=(2, 3))
        return budget.RATES["multiply_adds"] * hard + budget.RATES["additions"] * (terms - hard)

    own_k, own_v = product(lv.pool_k), product(lv.pool_v)  # (NX, P), (NX, P_V)
    # a head from its Q to its O: Q = X W_Q, S = Q Kᵀ, the scaling, the softmax rows, A V (head_seconds' rules)
    n, d_k = lv.K.shape[2], lv.K.shape[3]
    Q, K, V = lv.K[:, None, None, :], lv.K[:, :, None, None], lv.V[:, None, :, None]  # [x, k, v, q] broadcast

    def terms(left, right):  # left @ right's seconds, per term as product_operations counts it
        lz, rz = (left != 0).astype(float), (right != 0).astype(float)
        lh, rh = lz * (np.abs(left) != 1), rz * (np.abs(right) != 1)
        all_, hard = (lz @ rz).sum(axis=(-2, -1)), (lh @ rh).sum(axis=(-2, -1))
        return budget.RATES["multiply_adds"] * hard + budget.RATES["additions"] * (all_ - hard)

    Kt = np.swapaxes(K, -1, -2)
    S = Q @ Kt  # (NX, P, 1, P, n, n)
    head = own_k[:, None, None, :] + terms(Q, Kt)  # Q's projection (W_Q is a W_K pool row) and the scores
    if d_k != 1:
        head = head + budget.RATES["divisions"] * (np.abs(S) > 1e-12).sum(axis=(-2, -1))
    visible = np.tril(np.ones((n, n), dtype=bool))
    seen = visible.sum(axis=1)
    rows = seen > 1
    Z = S / np.sqrt(d_k)
    exps = ((np.abs(Z) > 1e-12) & visible).sum(axis=-1)[..., rows].sum(axis=-1)
    head = head + budget.RATES["exponentials"] * exps + float(budget.RATES["additions"] * (seen[rows] - 1).sum()
                                                            + budget.RATES["divisions"] * seen[rows].sum())
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.where(visible, np.exp(Z - Z.max(axis=-1, keepdims=True)), 0.0)
        A = e / e.sum(axis=-1, keepdims=True)
    head = head + terms(A, V)  # (NX, P, P_V, P)
    head = np.ascontiguousarray(np.broadcast_to(head, (NX, P, P_V, P)))
    group = own_k[:, :, None] + own_v[:, None, :]
    for a in (head, group):
        a.setflags(write=False)
    return group, head


def _fits(level: int, x: int, groups: list[tuple[int, int]], heads: list[int]) -> bool:
    """_operations(…).minutes within the level's budget, from the _seconds tables (or the worst case)."""
    if worst_minutes(level) <= budget.BUDGET_MINUTES[level]:
        return True
    size = SIZES[level]
    group, head = _seconds(level)
    cells = 2 * size.h * size.n * size.d_v + 1  # O1 … Oh, concat, cache_floats
    seconds = sum(float(group[x, k, v]) for k, v in groups) + budget.RATES["cells"] * cells
    for i, q in enumerate(heads, start=1):
        k, v = groups[group_of(i - 1, size.h, size.g)]
        seconds += float(head[x, k, v, q])
    return seconds / 60.0 <= budget.BUDGET_MINUTES[level]


def generate(rng: np.random.Generator, level: int) -> Draft:
    """Heads that differ, groups that differ, every mistake apart, within the level's time budget: each
    piece chosen among the admissible ones (_draw), then what pairs the heads checked (_cross_apart)."""
    size = SIZES[level]
    lv = _level(level)
    for _ in range(MAX_TRIES):
        drawn = _draw(rng, level)
        if drawn is None or not _fits(level, *drawn):
            continue
        d = _Drawn(level, *drawn)
        if not _cross_apart(d):
            continue
        given = _given(lv, size, *drawn)
        return Draft(given=given, parts=_parts_of(d, given, level), params=_params(given))
    raise RuntimeError(f"gqa: no variant within the time budget in {MAX_TRIES} draws")


def _parts_of(d: _Drawn, given: dict, level: int) -> list[Part]:
    """_parts(given, level) from the drawn heads' outputs (the same floats as references_of)."""
    decimals = spec(level).decimals
    refs = {f"O{i}": d.O[i - 1] for i in range(1, d.size.h + 1)}
    refs["concat"] = np.concatenate(list(d.O), axis=1)
    refs["cache_floats"] = np.array([[kv_cache_floats(d.size.g, d.size.d_k, d.size.d_v)]], dtype=float)
    return [Part(name=name, shape=ref.shape, reference=ref, decimals=decimals_for(ref, decimals))
            for name, ref in refs.items()]


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """Multi-query (one K/V head) or grouped; then the cache question."""
    _, g = sizes_of(ex.given)
    return ("kind.gqa.prompt_mqa" if g == 1 else "kind.gqa.prompt", "kind.gqa.prompt_cache")


# ---------------------------------------------------------------- time by hand


def _operations(given: dict, parts) -> object:
    """K and V once per group, each head's pipeline from Q to O with its group's K and V, every cell written."""
    h, g = sizes_of(given)
    total = budget.Operations(cells=sum(int(np.prod(p.shape)) for p in parts))
    for j in range(1, g + 1):
        total = total + budget.count({"X": given["X"], "W_K": given[f"W_K{j}"], "W_V": given[f"W_V{j}"]},
                                     ["K", "V"], written=())
    for i in range(1, h + 1):
        total = total + budget.count(head_given(given, i), ["O"], written=())
    return total


def operations(ex: Exercise):
    """The hand work of `ex` (exercises.core.budget): the pipeline does not run several heads."""
    return _operations(ex.given, ex.parts)


# ---------------------------------------------------------------- worked solution

CONCAT = r"\mathrm{concat}"


def group_symbol(name: str, j: int) -> str:
    """K^{[j]}, V^{[j]}: group j's keys and values (square brackets: a head's own values carry (i))."""
    return f"{name}^{{[{j}]}}"


def _group_symbols(j: int) -> dict[str, str]:
    return {"K": group_symbol("K", j), "V": group_symbol("V", j), "W_K": L.symbol(f"W_K{j}"),
            "W_V": L.symbol(f"W_V{j}")}


def _group_steps(ex: Exercise, j: int) -> list[solutions.Step]:
    """K_j = X W_Kj and V_j = X W_Vj, computed once for the whole group."""
    given = {"X": ex.given["X"], "W_K": ex.given[f"W_K{j}"], "W_V": ex.given[f"W_V{j}"]}
    ctx = solutions.build_context(given, ["K", "V"], 2)
    ctx.symbols.update(_group_symbols(j))
    h, g = sizes_of(ex.given)
    heads = ", ".join(str(i) for i in range(1, h + 1) if group(i, h, g) == j)
    return [replace(step, name=f"{step.name}{j}",
                    title=msg("solution.gqa.group", group=j, step=step.title),
                    note=msg("solution.gqa.group_note", group=j, heads=heads))
            for step in (solutions.BUILDERS[name](ctx, name) for name in ctx.shown)]


def _head_steps(ex: Exercise, i: int) -> list[solutions.Step]:
    """Head i from Q_i = X W_Qi to O_i, with its group's K_j and V_j as computed above."""
    h, g = sizes_of(ex.given)
    j = group(i, h, g)
    part = ex.part(f"O{i}")
    ctx = solutions.build_context(head_given(ex.given, i), ["O"], {"O": part.decimals}, {"O": part.reference},
                                  tag=str(i))
    ctx.symbols.update({"K": group_symbol("K", j), "V": group_symbol("V", j), "W_Q": L.symbol(f"W_Q{i}")})
    steps = []
    for name in ctx.shown:
        step = solutions.BUILDERS[name](ctx, name)
        steps.append(replace(step, name=part.name if name == "O" else f"{name}{i}",
                             title=msg("solution.gqa.head", head=i, group=j, step=step.title)))
    return steps


def _concat_step(ex: Exercise) -> solutions.Step:
    part = ex.part("concat")
    h, _ = sizes_of(ex.given)
    d_v = part.shape[1] // h
    symbols = [L.symbol("O", str(i)) for i in range(1, h + 1)]
    exact = [[L.short(L.to_exact(float(x))) for x in row] for row in part.reference]

    def derive(r: int, c: int) -> solutions.CellDerivation:
        k, col = divmod(c, d_v)  # column c of the concatenation is column col of head k + 1
        latex = L.chain(L.cell(CONCAT, r, c), L.cell(symbols[k], r, col),
                        L.decimal(part.reference[r, c], part.decimals))
        return solutions.CellDerivation(latex, msg("solution.gqa.concat_cell", head=k + 1, column=col + 1))

    return solutions.make_step("concat", msg("solution.gqa.concat"), part.reference, part.decimals, symbol=CONCAT,
                               formula=L.bmatrix([symbols]), exact_cells=exact,
                               note=msg("solution.gqa.concat_note", width=part.shape[1]), derive=derive)


def _cache_step(ex: Exercise) -> solutions.Step:
    """cache_floats = g d_k + g d_v = g (d_k + d_v), beside multi-head's h (d_k + d_v)."""
    part = ex.part("cache_floats")
    p = ex.params
    value = int(part.reference[0, 0])
    g, d_k, d_v = (solutions.number(str(p[k]), int(p[k])) for k in ("g", "d_k", "d_v"))
    terms = ((g, d_k), (g, d_v))  # one key and one value per K/V head
    numbers = L.total([L.product(a.text, b.text) for a, b in terms])
    symbolic = r"g\,d_k + g\,d_v"
    line, sub = solutions.worked_chain(r"\text{cache}", str(value), float(value), 0, numbers, "sum", terms, symbolic)

    def derive(r: int, c: int) -> solutions.CellDerivation:
        return solutions.CellDerivation(line, msg("solution.gqa.cache_cell", h=p["h"], mha=p["mha_floats"]), (sub,))

    return solutions.make_step("cache_floats", msg("solution.gqa.cache"), part.reference, 0,
                               symbol=r"\text{cache}", formula=r"g\,(d_k + d_v)", work=[("", "=", numbers)],
                               exact_cells=[[str(value)]], work_substitutions=(sub,),
                               note=msg("solution.gqa.cache_note", h=p["h"], g=p["g"], mha=p["mha_floats"],
                                        floats=value, times=p["h"] // p["g"]),
                               derive=derive)


def solve(ex: Exercise) -> list[solutions.Step]:
    """Each group's K and V once, each head from its Q to its O with its group's K and V, the
    concatenation, the cache count."""
    h, g = sizes_of(ex.given)
    steps: list[solutions.Step] = []
    for j in range(1, g + 1):
        steps += _group_steps(ex, j)
    for i in range(1, h + 1):
        steps += _head_steps(ex, i)
    return [*steps, _concat_step(ex), _cache_step(ex)]


def aids(ex: Exercise) -> solutions.Aids:
    """e^x for every exponent in any head's softmax, and √d_k."""
    h, _ = sizes_of(ex.given)
    return softmax_aids(ex, [head_given(ex.given, i) for i in range(1, h + 1)], L.sqrt_dk(int(ex.given["d_k"])))


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"O_i = \operatorname{Attention}(Q_i,\ K_{g(i)},\ V_{g(i)})")
SHEET = SheetSection("forward", (
    Formula(r"g(i) = \left\lfloor \frac{i - 1}{h / g} \right\rfloor + 1, \qquad "
            r"[[O_i | n | d_v]] = \operatorname{softmax}\!\left(\frac{X W_{Q_i} (X W_{K_{g(i)}})^{\top}}{\sqrt{d_k}}"
            r"\right) X W_{V_{g(i)}}", "formulas.gqa.groups"),
    Formula(r"[[\mathrm{concat} | n | h d_v]] = [\,O_1 \mid \dots \mid O_h\,], \qquad "
            r"\text{cache per token and layer} = g\,(d_k + d_v) \;\text{ against }\; h\,(d_k + d_v)",
            "formulas.gqa.cache"),
))
