"""The KV cache: one decoding step of a causal decoder.

The t tokens decoded so far left their keys and values in the cache (K_cache, V_cache: t rows). The
new token brings its own q, k, v (one row each):

    K = [K_cache; k],  V = [V_cache; v]          # (t+1) × d_k, (t+1) × d_v: appended as the last row
    s = q Kᵀ,  a = softmax(s / √d_k),  o = a V    # 1 × (t+1), 1 × (t+1), 1 × d_v
    cache_floats = 2 · n · h · (t+1) · d_head     # a model of n layers, h heads, d_head per head

No mask: the new token is the last position, it sees every cached one and itself; o is the last row of
full causal attention over the t+1 tokens (the solution says so, the tests check it). The mistakes are
this kind's own (kv_* in its locales: the new key left out, the new position masked, the stale V, the
new row put first, the query cached in the place of the key, a cache size of K or V alone, before the
step, of one layer or one head) and the catalogued scaling and softmax ones on this row; no pipeline step
makes these parts, so the kind keeps them apart itself, from the answers and from what a careful
student who rounds each value writes: since VERSION 2 by construction (_draw picks each piece among
admissible ones, made by rule on first use), generate checks only A's and O's mistakes.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from attention_core import softmax
from attention_core.kv_cache import cache_floats, decode_step

from ... import solutions
from ...core import budget, misconceptions
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft
from ...core.grading import declared_decimals
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import choice, decimals_for, round_half_up
from ...i18n import msg
from ...rendering import latex as L
from .._shared.fast import apart_from, rounded
from .._shared.hand import own_diagnosis

ID = "kv_cache"
ORDER = 78  # after cross_attention, before multi_head: the decoder at inference time
VERSION = 3  # 3: cheaper draws (issue 14's fifth pass: the windows and admissible value columns enumerated once,
# plain-float tries) change level 2's exercises (24 of seeds 0-29);
# 2: constructive (issue 14): q, k, the cached keys near k's score, V and the sizes drawn from
# admissible pieces (_draw); only A's and O's mistakes are checked (was: draw five matrices, check everything)
LEVELS = (1, 2, 3)
GUARDS = ()  # no pipeline step makes these parts: the kind keeps its own mistakes apart (generate)

# level: (cached tokens t to draw from, d_k to draw from, d_v, entries of K_cache, q, k; entries of V_cache, v)
SIZES = {1: ((2,), (1,), 1, (0, 1, 2), (0, 1, 2)),
         2: ((3,), (2, 4), 1, (-1, 0, 1), (-2, -1, 1, 2)),
         3: ((3, 4), (4,), 2, (-1, 0, 1, 2), (-2, -1, 0, 1, 2))}
# the model of the cache-size part: n layers, h heads, d_head per head (K and V alike); h = 2 would make
# "one head" look like "K or V alone", so it is never drawn
LAYERS = (3, 4, 6, 12)
HEADS = (4, 8, 12)
D_HEAD = (8, 16, 64)
MAX_SCALED = 4.0  # |s / √d_k|: the eˣ table stays short
MAX_TRIES = 2000
PARTS = ("K", "V", "scores", "A", "O", "cache_floats")


def _given_rows(given: dict) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(given[k], dtype=float) for k in ("K_cache", "V_cache", "q", "k", "v"))


def references_of(given: dict, params: dict) -> dict[str, np.ndarray]:
    """Every part through attention_core (its KV-cache decoding step and cache size)."""
    K_cache, V_cache, q, k, v = _given_rows(given)
    step = decode_step(K_cache, V_cache, q, k, v, int(given["d_k"]))
    size = cache_floats(params["layers"], params["heads"], K_cache.shape[0] + 1, params["d_head"])
    return {"K": step.K, "V": step.V, "scores": step.scores, "A": step.A, "O": step.O,
            "cache_floats": np.array([[float(size)]])}


def _draw(rng: np.random.Generator, level: int) -> tuple[dict, dict]:
    """The given values and the prompt's params, built from admissible pieces (VERSION 2, issue 14):

    - the model's sizes: h never equal to n, the only way two of the cache-size answers meet (t ≥ 2);
    - q with every entry nonzero, then the new key k (every entry nonzero) among the rows whose score
      q·k is within MAX_SCALED·√d_k and not q·q (the query cached in the place of the key then changes
      the scores, and k ≠ q);
    - the cached keys among the rows (not all zeros) whose score is within SPREAD·√d_k of the new one:
      the new token's weight is never negligible and no weight saturates; one of them is drawn again
      among the other scores when every score came out equal (uniform weights teach nothing);
    - no row of K_cache all zeros (a column may be: K's never is, k having no zero entry);
    - the values: no row of V_cache all zeros, v with every entry nonzero, every column of V not
      constant (V alone is drawn again, a few times at most); with one column (d_v = 1: O is one
      number, and its six values crowd) V is drawn among the columns that keep O's answer, its
      mistakes and the careful student's O apart (_value_column).

    Whole-entry K, V and scores then keep K's, V's, the scores' and the size's mistakes apart from
    their answers and from each other by construction (tests/test_kinds_kv_cache_constructive.py);
    generate checks A's and O's."""
    ts, widths, d_v, key_values, value_values = SIZES[level]
    t, d_k = int(choice(rng, ts)), int(choice(rng, widths))
    keys, values = _key_table(key_values, d_k), _value_table(value_values, d_v)
    queries = _queries(key_values, d_k)  # every query's table, made at once on the width's first use
    index = int(rng.integers(len(keys.nonzero)))
    q, table = keys.nonzero[index], queries[index]
    new = table.new_rows[int(rng.integers(len(table.new_rows)))]
    s_new = int(new @ q)
    window, scores = _window_of(key_values, d_k, index, s_new)  # the rows whose score is near the new one's
    picks = rng.integers(len(window), size=t)
    if (scores[picks] == s_new).all():  # every score equal: one of them drawn among the others
        others = np.flatnonzero(scores != s_new)
        picks[int(rng.integers(t))] = others[int(rng.integers(len(others)))]
    K_cache = window[picks].copy()
    column = (_value_column(rng, level, tuple(scores[picks].tolist()), s_new, table.qq, d_k)
              if d_v == 1 else None)
    if column is not None:
        V_cache, v = column[:t, None].copy(), column[t:].copy()
    else:
        while True:
            V_cache = values.rows[rng.integers(len(values.rows), size=t)]
            v = values.nonzero[int(rng.integers(len(values.nonzero)))]
            if (np.ptp(np.vstack([V_cache, v]), axis=0) > 0).all():
                break
    layers = int(choice(rng, LAYERS))
    given = {"K_cache": K_cache,  # (t, d_k): keys of the tokens decoded so far
             "V_cache": V_cache,  # (t, d_v): their values
             "q": q[None, :].copy(),  # (1, d_k): the new token's query
             "k": new[None, :].copy(),  # (1, d_k): its key
             "v": v[None, :].copy(),  # (1, d_v): its value
             "d_k": d_k}
    params = {"t": t, "t1": t + 1, "d_k": d_k, "d_v": d_v, "layers": layers,
              "heads": int(choice(rng, _HEADS_APART[layers])), "d_head": int(choice(rng, D_HEAD))}
    return given, params


def _value_column(rng: np.random.Generator, level: int, cached: tuple[int, ...], s_new: int, qq: int,
                  d_k: int) -> np.ndarray | None:
    """V as one column (t+1,) for these scores (cached: q K_cacheᵀ; s_new: q·k; qq: q·q), drawn among
    every column of nonzero entries, not constant, whose O = A V and O's mistakes (each a weight row
    times V, as _weight_mistakes makes them) are all apart (more than O's separation) and O ≠ 0; None if
    none is. generate checks the kept draft exactly all the same (and the careful student's O, which is
    rarely within reach of a mistake).

    Drawn and tried one by one (most columns are admissible: all of them in 300 draws at level 1, ~4 in 5
    at level 2), each in plain Python floats (a column's six numbers are dot products of four terms at most);
    after VALUE_TRIES tries the admissible columns are found at once (_admissible_columns), so a draw
    for scores that admit none is None as before. The plain floats may differ from numpy's in the last
    bits: the try only picks a candidate, generate's exact check decides."""
    t = len(cached)
    root = math.sqrt(d_k)
    S = [*cached, s_new]
    rows = [[x / root for x in S], [x / root for x in (*cached, qq)]]  # the answer's, the query cached's
    if d_k != 1:
        rows += [[float(x) for x in S], [x / d_k for x in S]]  # no_scaling's, scaled_by_dk's
    W = [_plain_softmax(row) for row in rows]
    answer, seen = W[0], _plain_softmax([x / root for x in cached])
    weights = [seen, answer[:t], *W[1:]]  # left out, stale (over the cache alone), query cached, ...
    columns, plain = _value_columns(SIZES[level][4], t + 1), _plain_columns(SIZES[level][4], t + 1)
    gap = _separation(spec(level).decimals)
    for index in rng.integers(len(plain), size=VALUE_TRIES).tolist():
        column = plain[index]
        O = sum(w * v for w, v in zip(answer, column))
        if abs(O) <= 1e-9:
            continue
        values = sorted([O, *(sum(w * v for w, v in zip(row, column)) for row in weights)])
        if all(b - a > gap for a, b in zip(values, values[1:])):
            return columns[index]
    columns, admissible = _admissible_columns(level, cached, s_new, qq, d_k)
    if not len(admissible):
        return None
    return columns[admissible[int(rng.integers(len(admissible)))]]


VALUE_TRIES = 12  # plain tries of _value_column before it looks at every column


def _plain_softmax(row: list[float]) -> list[float]:
    top = max(row)
    e = [math.exp(x - top) for x in row]
    total = sum(e)
    return [x / total for x in e]


@functools.cache
def _plain_columns(entries: tuple, length: int) -> tuple[tuple[float, ...], ...]:
    """_value_columns as tuples of floats (the plain tries read them)."""
    return tuple(tuple(row) for row in _value_columns(entries, length).tolist())


@functools.lru_cache(maxsize=1024)  # ≤ 252 indices each: 2 MB at most
def _admissible_columns(level: int, cached: tuple[int, ...], s_new: int, qq: int,
                        d_k: int) -> tuple[np.ndarray, np.ndarray]:
    """(every column, the indices of those _value_column may draw) for these scores (whole numbers: the
    keys' scores exactly)."""
    t = len(cached)
    root = math.sqrt(d_k)
    S = np.array([*cached, s_new], dtype=float)  # (t+1,)
    rows = [S / root, np.array([*cached, qq], dtype=float) / root]  # the answer's, the query cached's
    if d_k != 1:
        rows += [S, S / d_k]  # no_scaling's, scaled_by_dk's
    W = softmax(np.vstack(rows))  # (2 or 4, t+1)
    seen = softmax(S[:t] / root)  # (t,)
    columns = _value_columns(SIZES[level][4], t + 1)  # (n, t+1)
    O = W[0] @ columns.T  # (n,)
    mistaken = np.vstack([seen @ columns[:, :t].T, W[0, :t] @ columns[:, :t].T,  # left out, stale
                          W[1:] @ columns.T])  # (k, n): query cached, no_scaling, scaled_by_dk
    gap = _separation(spec(level).decimals)
    ordered = np.sort(mistaken, axis=0)
    ok = (np.abs(O) > 1e-9) & (np.abs(mistaken - O).min(axis=0) > gap) & (np.diff(ordered, axis=0).min(axis=0) > gap)
    admissible = np.flatnonzero(ok)
    admissible.setflags(write=False)
    return columns, admissible


@functools.cache
def _value_columns(entries: tuple, length: int) -> np.ndarray:
    """Every column of `length` nonzero entries that is not constant, read-only (at most 4⁴ of them)."""
    nonzero = tuple(x for x in entries if x != 0)
    every = np.array(list(itertools.product(nonzero, repeat=length)), dtype=float)
    columns = every[np.ptp(every, axis=1) > 0]
    columns.setflags(write=False)
    return columns


@functools.cache
def _separation(decimals: int) -> float:
    """misconceptions.separation of a part graded to `decimals` places."""
    return misconceptions.separation(Part(name="O", shape=(1, 1), reference=np.ones((1, 1)), decimals=decimals))


SPREAD = 2.0  # |s_j − s_new| / √d_k: the new token's weight at least e⁻²-ish of any other's
# the heads drawn for each number of layers: never as many heads as layers ("one head" and "one layer" meet)
_HEADS_APART = {n: tuple(h for h in HEADS if h != n) for n in LAYERS}


class _Rows(NamedTuple):
    rows: np.ndarray  # every row over the entries that is not all zeros
    nonzero: np.ndarray  # every row with no entry zero


@functools.cache
def _key_table(entries: tuple, width: int) -> _Rows:
    return _rows_of(entries, width)


@functools.cache
def _value_table(entries: tuple, width: int) -> _Rows:
    return _rows_of(entries, width)


def _rows_of(entries: tuple, width: int) -> _Rows:
    """Every row of `width` entries (at most 4⁴ of them), read-only."""
    every = np.array(list(itertools.product(entries, repeat=width)), dtype=float)
    rows, nonzero = every[(every != 0).any(axis=1)], every[(every != 0).all(axis=1)]
    for a in (rows, nonzero):
        a.setflags(write=False)
    return _Rows(rows, nonzero)


class _Scores(NamedTuple):
    new_rows: np.ndarray  # the admissible new keys k for this q
    rows: np.ndarray  # the admissible cached keys (|q·row| within MAX_SCALED·√d_k)
    scores: np.ndarray  # their scores q·row, whole numbers
    near: float  # SPREAD·√d_k
    qq: int  # q·q


@functools.cache
def _queries(entries: tuple, d_k: int) -> tuple[_Scores, ...]:
    """_scores_for of every query (the rows of _key_table(entries, d_k).nonzero, in order), made at once
    on first use (~2 ms for d_k = 2 and 4 at level 2, ~10 ms for level 3's 81 queries): no draw pays a
    query's table."""
    return tuple(_scores_for(entries, d_k, tuple(q)) for q in _key_table(entries, d_k).nonzero.tolist())


@functools.lru_cache(maxsize=2048)  # 1222 (query, new score) pairs over the levels, a few kB each
def _window_of(entries: tuple, d_k: int, index: int, s_new: int) -> tuple[np.ndarray, np.ndarray]:
    """_window of query `index`'s table (read-only), made once per (query, new score)."""
    rows, scores = _window(_queries(entries, d_k)[index], s_new)
    for a in (rows, scores):
        a.setflags(write=False)
    return rows, scores


@functools.cache
def _scores_for(entries: tuple, d_k: int, q: tuple) -> _Scores:
    """The admissible keys for the query q (made once per q: ~0.1 ms each, ~10 ms for all 103 queries of
    the three levels)."""
    keys = _key_table(entries, d_k)
    root, qv = math.sqrt(d_k), np.array(q, dtype=float)
    limit, near = MAX_SCALED * root + 1e-9, SPREAD * root + 1e-9
    every = keys.rows @ qv
    inside = np.abs(every) <= limit
    rows, scores = keys.rows[inside], every[inside].astype(int)
    distinct = sorted(set(scores.tolist()))  # (np.unique would import numpy.ma on first use: ~50 ms)
    # a score with some other score near it: when every cached score came out equal, one is drawn again
    drawable = {s for s in distinct if any(r != s and abs(r - s) <= near for r in distinct)}
    qq = int(qv @ qv)
    usable = np.array([s in drawable and s != qq for s in (keys.nonzero @ qv).astype(int).tolist()], dtype=bool)
    new_rows = keys.nonzero[usable]
    for a in (rows, scores, new_rows):
        a.setflags(write=False)
    return _Scores(new_rows, rows, scores, near, qq)


def _window(table: _Scores, s_new: int) -> tuple[np.ndarray, np.ndarray]:
    """The cached-key rows whose score is within SPREAD·√d_k of the new key's score, and their scores."""
    inside = np.abs(table.scores - s_new) <= table.near
    return table.rows[inside], table.scores[inside]


WHOLE = ("K", "V", "scores", "cache_floats")  # whole numbers from whole entries: decimals_for gives 0


def _parts(refs: dict[str, np.ndarray], level: int) -> list[Part]:
    decimals = spec(level).decimals
    return [Part(name=name, shape=ref.shape, reference=ref,
                 decimals=0 if name in WHOLE else decimals_for(ref, decimals)) for name, ref in refs.items()]


# The checks of VERSION 1's generate, drawn-and-refused: the construction is held to them
# (tests/test_kinds_kv_cache_constructive.py: _teaches_refs, _sizes_apart, _apart_from_careful).


def _teaches_refs(refs: dict[str, np.ndarray], d_k: int) -> bool:
    """Small exponents; not all scores equal (uniform weights say nothing) and the new token's own score
    not equal to every other; values that differ; no part all zeros."""
    Z = refs["scores"] / math.sqrt(d_k)
    V = refs["V"]
    return bool(np.abs(Z).max() <= MAX_SCALED and np.ptp(Z) > 0 and np.all(np.ptp(V, axis=0) > 0)
                and np.abs(refs["O"]).max() > 1e-9)


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A decoding step whose mistakes all differ from the answers, from each other and from what a careful
    student who rounds writes (to 2 decimals too), and that fits the level's time budget.

    _draw builds K, V, the scores and the sizes so that their mistakes are apart and the step teaches
    (small exponents, scores not all equal, values that differ) and the worst case of the sizes fits
    the budget; what is left to check is A's and O's mistakes, exactly (about 1 draw in 15 fails)."""
    for _ in range(MAX_TRIES):
        given, params = _draw(rng, level)
        refs, mistakes = _built(given, params)
        if np.abs(refs["O"]).max() <= 1e-9:  # an output of zeros says nothing
            continue
        parts = _parts(refs, level)
        if _weights_apart(parts, mistakes, given, level):
            return Draft(given=given, parts=parts, params=params)
    raise RuntimeError(f"kv_cache: no variant in {MAX_TRIES} draws")


def _built(given: dict, params: dict) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
    """references_of and _mistakes at once, each row stacked once: the same values
    (tests/test_kinds_kv_cache_constructive.py)."""
    K_cache, V_cache, q, k, v = _given_rows(given)
    d_k = int(given["d_k"])
    t = K_cache.shape[0]
    K, V = np.concatenate([K_cache, k]), np.concatenate([V_cache, v])  # (t+1, d_k), (t+1, d_v)
    K_first, V_first = np.concatenate([k, K_cache]), np.concatenate([v, V_cache])  # the new row put first
    K_query = np.concatenate([K_cache, q])  # the query cached in the place of the key
    S, S_first, S_query = q @ K.T, q @ K_first.T, q @ K_query.T  # (1, t+1) each
    A_found, O_found, A = _weight_mistakes(S, S_first, S_query, V_cache, V, d_k, with_answer=True)
    n, h, d = params["layers"], params["heads"], params["d_head"]
    size = np.array([[float(cache_floats(n, h, t + 1, d))]])
    refs = {"K": K, "V": V, "scores": S, "A": A, "O": A @ V, "cache_floats": size}
    mistakes = {"K": {"kv_new_row_first": K_first, "kv_query_cached": K_query}, "V": {"kv_new_row_first": V_first},
                "scores": {"kv_new_row_first": S_first, "kv_query_cached": S_query}, "A": A_found, "O": O_found,
                "cache_floats": {mid: np.array([[float(x)]]) for mid, x in _size_mistakes(n, h, d, t).items()}}
    return refs, mistakes


def _weights_apart(parts: list[Part], mistakes: dict, given: dict, level: int) -> bool:
    """A's and O's mistakes apart from their answers, from each other and from the careful student's
    values: what all_clash_free and _apart_from_careful decide for those two parts (the other parts are
    apart by construction; tests/test_kinds_kv_cache_constructive.py holds the two to each other)."""
    A, O = parts[3], parts[4]
    rounding = max([p.decimals for p in parts] + [0]) or 2  # grading.declared_decimals
    # chain's careful student (round_half_up as `rounded`): the whole K, V and scores are written exactly,
    # and so is s/√d_k when d_k is 1 or 4 (a whole number or a half: rounding it to a place or more keeps it)
    d_k = int(given["d_k"])
    Z = parts[2].reference / math.sqrt(d_k)
    careful_A = rounded(softmax(Z if d_k in (1, 4) and rounding >= 1 else rounded(Z, rounding)), rounding)
    careful_O = rounded(careful_A @ parts[1].reference, rounding)
    return (_clear(A.reference, careful_A, mistakes["A"], misconceptions.separation(A))
            and _clear(O.reference, careful_O, mistakes["O"], misconceptions.separation(O)))


def _clear(reference: np.ndarray, careful: np.ndarray, alts: dict[str, np.ndarray], gap: float) -> bool:
    """fast.clash_free(reference, alts, gap) and fast.apart_from(careful, alts, gap) in one block, for
    mistakes of the reference's shape with every cell finite (A's and O's here: |s/√d_k| ≤ 4)."""
    block = np.array(list(alts.values())).reshape(len(alts), -1)  # (k, cells)
    targets = np.array([reference.ravel(), careful.ravel()])  # (2, cells)
    if (np.abs(block[:, None, :] - targets[None, :, :]).max(axis=-1) <= gap).any():
        return False
    widest = np.abs(block[:, None, :] - block[None, :, :]).max(axis=-1)  # (k, k), 0 on the diagonal
    return np.count_nonzero(widest <= gap) == len(block)


def collides(ex: Exercise, guards: tuple[str, ...]) -> bool:
    """misconceptions.collides(ex, guards): with no guards (GUARDS: this kind keeps its mistakes apart
    itself) there is no mistake to collide, and nothing to compute."""
    if not guards:
        return False

    return misconceptions.collides(ex, guards=guards)


def _most_minutes(params: dict) -> float:
    """An upper bound of _operations(ex).minutes from the sizes alone (every product term a multiply-add,
    every score nonzero): when it fits the budget, the exact count does too."""
    t1, d_k, d_v = params["t1"], params["d_k"], params["d_v"]
    worst = budget.Operations(multiply_adds=d_k * t1 + t1 * d_v + 4, divisions=(t1 if d_k != 1 else 0) + t1,
                              exponentials=t1, additions=t1 - 1,
                              cells=t1 * d_k + t1 * d_v + 2 * t1 + d_v + 1)  # K, V, scores, A, O, the size
    return worst.minutes


def _sizes_apart(params: dict) -> bool:
    """The cache-size part's check (hand.all_apart on it) without arrays: its answer and its four mistakes
    are whole numbers, so two of them are within the part's separation (< 1) only when equal."""
    n, h, d, t = params["layers"], params["heads"], params["d_head"], params["t"]
    sizes = [cache_floats(n, h, t + 1, d), *_size_mistakes(n, h, d, t).values()]
    return len(set(sizes)) == len(sizes)


def _size_mistakes(n: int, h: int, d: int, t: int) -> dict[str, int]:
    return {"kv_cache_size_one_of_k_v": n * h * (t + 1) * d, "kv_cache_size_before_step": 2 * n * h * t * d,
            "kv_cache_size_one_layer": 2 * h * (t + 1) * d, "kv_cache_size_one_head": 2 * n * (t + 1) * d}


def _apart_from_careful(ex: Exercise, mistakes: dict[str, dict[str, np.ndarray]] | None = None,
                        apart_from_answers: bool = False) -> bool:
    """No mistake's value of a part is within the part's separation of that part as a careful student
    computes it with every value rounded to the declared decimals (it would be graded right).
    `apart_from_answers`: the mistakes are known to be apart from the answers (all_clash_free), so a part
    the careful student gets exactly right needs no second look."""
    # K, V and the scores are whole, so a careful student writes them exactly: the references
    known = {name: ex.part(name).reference for name in ("K", "V", "scores")} if apart_from_answers else {}
    careful = chain(ex, known, declared_decimals(ex))
    mistakes = _mistakes(ex.given, ex.params) if mistakes is None else mistakes
    return all(apart_from(careful[part.name], mistakes.get(part.name, {}), misconceptions.separation(part))
               for part in ex.parts
               if not (apart_from_answers and np.array_equal(careful[part.name], part.reference)))


# ---------------------------------------------------------------- mistakes, diagnosis, carrying forward


def mistakes_of(given: dict, params: dict, name: str) -> dict[str, np.ndarray]:
    """{mistake id: what it gives for part `name`} (only those of the part's shape can match)."""
    return _mistakes(given, params).get(name, {})


def _mistakes(given: dict, params: dict) -> dict[str, dict[str, np.ndarray]]:
    """{part name: {mistake id: what it gives for that part}}, every part at once."""
    return _built(given, params)[1]


def _weight_mistakes(S: np.ndarray, S_first: np.ndarray, S_query: np.ndarray, V_cache: np.ndarray, V: np.ndarray,
                     d_k: int, with_answer: bool = False):
    """A's and O's mistakes from the scores as they are, with the new row first and with the query
    cached: every softmax row of them at once (a row's softmax is the same numbers alone or stacked).
    `with_answer`: A itself as a third value."""
    root = math.sqrt(d_k)
    t = V_cache.shape[0]
    Z = S / root
    rows = [Z, S_first / root, S_query / root]
    if d_k != 1:
        rows += [S, S / d_k, S * root]
    weights = softmax(np.concatenate(rows))  # (3 or 6, t+1)
    A = weights[0:1]
    # whole entries make q K_cacheᵀ exactly S's first t
    seen = softmax(S[:, :t] / root)  # (1, t): the new position hidden as if it were in the future
    masked = np.zeros_like(A)
    masked[:, :t] = seen
    A_found = {"kv_new_row_masked": masked, "kv_new_row_first": weights[1:2], "kv_query_cached": weights[2:3]}
    if d_k != 1:
        A_found.update(no_scaling=weights[3:4], scaled_by_dk=weights[4:5], scaled_times_sqrt_dk=weights[5:6])
    total = Z.sum()
    if abs(total) > 1e-9:
        A_found["no_exp"] = Z / total
    A_found["softmax_no_normalise"] = np.exp(Z)
    # with the new position masked (A's last weight 0) the output is this same stale one
    O_found = {"kv_new_key_left_out": seen @ V_cache,  # attention over the cache alone
               "kv_stale_value": A[:, :t] @ V_cache,  # the new weight dropped with the missing row of V
               "kv_query_cached": weights[2:3] @ V}
    if d_k != 1:
        O_found.update(no_scaling=weights[3:4] @ V, scaled_by_dk=weights[4:5] @ V)
    return (A_found, O_found, A) if with_answer else (A_found, O_found)


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    return own_diagnosis(part, value, mistakes_of(ex.given, ex.params, part.name))


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """K and V from the cache unless the learner gave them, the scores from their K, A from their scores
    (the unasked s/√d_k rounded too), O from their A and V, the cache size from the model (each computed
    value rounded half-up to `rounding` places; None: exact)."""
    env = {name: np.asarray(x, dtype=float) for name, x in values.items()}
    K_cache, V_cache, q, k, v = _given_rows(ex.given)
    root = math.sqrt(int(ex.given["d_k"]))
    # each value computed only when the learner did not give it (setdefault would compute it anyway)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if "K" not in env:
            env["K"] = np.vstack([K_cache, k])
        if "V" not in env:
            env["V"] = np.vstack([V_cache, v])
        if "scores" not in env:
            env["scores"] = round_half_up(q @ env["K"].T, rounding)
        if "A" not in env:
            env["A"] = round_half_up(softmax(round_half_up(env["scores"] / root, rounding)), rounding)
        if "O" not in env:
            env["O"] = round_half_up(env["A"] @ env["V"], rounding)
    p = ex.params
    if "cache_floats" not in env:
        env["cache_floats"] = np.array([[float(cache_floats(p["layers"], p["heads"], p["t1"], p["d_head"]))]])
    return env


def _operations(ex: Exercise):
    """The two rows copied into the caches, q Kᵀ, the division by √d_k, the softmax of one row, A V, the
    four factors of the cache size; every cell written."""
    g = ex.given
    refs = {p.name: p.reference for p in ex.parts}
    total = budget.product_operations(np.asarray(g["q"], dtype=float), refs["K"].T)
    d_k = int(g["d_k"])
    if d_k != 1:
        total = total + budget.Operations(divisions=int(np.count_nonzero(refs["scores"])))
    Z = refs["scores"] / math.sqrt(d_k)
    width = Z.shape[1]
    total = total + budget.Operations(exponentials=int(np.count_nonzero(np.abs(Z) > 1e-12)),
                                      additions=width - 1, divisions=width)
    total = total + budget.product_operations(refs["A"], refs["V"])
    total = total + budget.Operations(multiply_adds=4)  # 2 · n · h · (t+1) · d_head
    return total + budget.Operations(cells=sum(int(np.prod(p.shape)) for p in ex.parts))


def operations(ex: Exercise):
    return _operations(ex)


# ---------------------------------------------------------------- worked solution


def _append_step(ex: Exercise, name: str, cache: str, row: str):
    """K (or V): the cache's t rows as they are, the new row below them."""
    part = ex.part(name)
    t = int(ex.params["t"])
    cache_symbol, here = L.symbol(cache), L.symbol(name)
    cells = [[L.number(x) for x in r] for r in part.reference]

    def derive(i: int, j: int):
        source = L.cell(cache_symbol, i, j) if i < t else f"{row}_{{{j + 1}}}"
        note = (msg("solution.kv_cache.append.cached", row=i + 1) if i < t
                else msg("solution.kv_cache.append.new", row=t + 1, vector=row))
        return solutions.CellDerivation(L.chain(L.cell(here, i, j), source, cells[i][j]), note)

    formula = rf"\begin{{bmatrix}} {cache_symbol} \\ {row} \end{{bmatrix}}"
    return solutions.make_step(name, msg(f"solution.kv_cache.{name}"), part.reference, 0, symbol=here,
                               formula=formula, exact_cells=cells, note=msg("solution.kv_cache.append.note"),
                               derive=derive)


def _attention_steps(ex: Exercise) -> list:
    """s = q Kᵀ, s/√d_k, the softmax and o = a V through the registry's builders, with the new token's
    q written as q."""
    names = ("scores", "A", "O")
    places = {p.name: p.decimals for p in ex.parts}
    refs = {p.name: p.reference for p in ex.parts if p.name in names}
    stand_in = {"Q": np.asarray(ex.given["q"], dtype=float), "K": ex.part("K").reference,
                "V": ex.part("V").reference, "d_k": int(ex.given["d_k"]), "causal": False}
    ctx = solutions.build_context(stand_in, list(names), places, refs)
    ctx.symbols["Q"] = "q"
    return [solutions.BUILDERS[name](ctx, name) for name in ctx.shown]


def _check_step(ex: Exercise):
    """The output is the last row of full causal attention over the t+1 tokens: row t+1 of the causal mask
    hides nothing, so that row is exactly this computation (the earlier rows are what the cache saves)."""
    part = ex.part("O")
    t1 = int(ex.params["t1"])
    row = rf"\left(\operatorname{{softmax}}\!\left(\frac{{Q K^{{\top}}}}{{\sqrt{{d_k}}}} + M\right) V\right)_{{{t1}}}"
    cells = [[L.decimal(x, part.decimals) for x in r] for r in part.reference]

    def derive(i: int, j: int):
        return solutions.CellDerivation(L.chain(L.cell("O", i, j), L.cell(r"O_{\text{full}}", t1 - 1, j),
                                                cells[i][j]), msg("solution.kv_cache.check.cell", row=t1))

    return solutions.make_step("check", msg("solution.kv_cache.check"), part.reference, part.decimals, symbol="O",
                               formula=row, note=msg("solution.kv_cache.check.note", row=t1, t=ex.params["t"]),
                               derive=derive, work=[(rf"M_{{{t1},j}}", "=", rf"0 \quad (j \le {t1})")])


def _size_step(ex: Exercise):
    part = ex.part("cache_floats")
    p = ex.params
    factors = ["2", str(p["layers"]), str(p["heads"]), str(p["t1"]), str(p["d_head"])]
    value = int(part.reference[0, 0])
    product = r" \cdot ".join(factors)
    latex, sub = solutions.worked_chain(r"\text{floats}", str(value), float(value), 0, product, "sum",
                                        [[solutions.number(f) for f in factors]],
                                        r"2 \cdot n \cdot h \cdot (t+1) \cdot d_{\text{head}}")

    def derive(_: int, __: int):
        return solutions.CellDerivation(latex, msg("solution.kv_cache.size.cell"), (sub,))

    return solutions.make_step("cache_floats", msg("solution.kv_cache.size"), part.reference, 0,
                               symbol=r"\text{floats}", formula=r"2 \cdot n \cdot h \cdot (t+1) \cdot d_{\text{head}}",
                               exact_cells=[[str(value)]], work=[("", "=", product)],
                               note=msg("solution.kv_cache.size.note", **p), derive=derive)


def solve(ex: Exercise) -> list:
    """The caches with the new rows appended, the new token's scores, weights and output (the registry's
    builders, any cell derived), the check that this is the last row of full causal attention, and the
    cache size of the whole model."""
    return [_append_step(ex, "K", "K_cache", "k"), _append_step(ex, "V", "V_cache", "v"), *_attention_steps(ex),
            _check_step(ex), _size_step(ex)]


def aids(ex: Exercise):
    """The eˣ table and √d_k of the new token's row, with the shapes of what is given."""
    stand_in = replace(ex, given={"Q": np.asarray(ex.given["q"], dtype=float), "K": ex.part("K").reference,
                                  "V": ex.part("V").reference, "d_k": int(ex.given["d_k"]), "causal": False},
                       parts=tuple(p for p in ex.parts if p.name in ("scores", "A", "O")))
    return replace(solutions.generic_aids(stand_in), shapes=solutions.shapes_of(ex))


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"K \leftarrow \begin{bmatrix} K_{\mathrm{cache}} \\ k \end{bmatrix},\ "
                           r"O = \operatorname{softmax}\!\left(\frac{q K^{\top}}{\sqrt{d_k}}\right) V")
SHEET = SheetSection("forward", (
    Formula(r"[[K | (t+1) | d_k]] = \begin{bmatrix} K_{\mathrm{cache}} \\ k \end{bmatrix}, \qquad "
            r"[[V | (t+1) | d_v]] = \begin{bmatrix} V_{\mathrm{cache}} \\ v \end{bmatrix}", "formulas.kv_cache.append"),
    Formula(r"[[O | 1 | d_v]] = \operatorname{softmax}\!\left(\frac{q K^{\top}}{\sqrt{d_k}}\right) V"
            r" = \text{row } t+1 \text{ of causal attention}", "formulas.kv_cache.row"),
    Formula(r"\text{floats} = 2 \cdot n_{\text{layers}} \cdot h \cdot (t+1) \cdot d_{\text{head}}",
            "formulas.kv_cache.size"),
))
