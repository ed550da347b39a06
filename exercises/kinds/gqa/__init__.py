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
from ...core import misconceptions, numbers, pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import decimals_for, nonzero_matrix, round_half_up
from ...i18n import msg
from ...rendering import latex as L
from .._shared.aids import softmax_aids
from .._shared.heads import Heads, clash, comparable, like, softmax_rows
from .._shared.heads import operations as head_operations

ID = "gqa"
ORDER = 82  # after multi_head (80): the same heads, sharing their keys and values; before rope (84)
VERSION = 1
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
    from .._shared.hand import own_diagnosis

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


BATCH = 64  # candidate weights drawn at once (rows of the pool of all admissible weights), checked together


def _columns_differ(M: np.ndarray) -> np.ndarray:
    """(B,) whether no two columns of each M[b] (n, width) are equal: a repeated column is work that
    teaches nothing (a value's second column the copy of its first)."""
    width = M.shape[2]
    ok = np.ones(len(M), dtype=bool)
    for a in range(width):
        for b in range(a + 1, width):
            ok &= np.abs(M[:, :, a] - M[:, :, b]).max(axis=1) > 0
    return ok


# The candidates of a batch are rows of the pool of all admissible weights (numbers.pooled_matrices), and
# the pools are small (8 or 64 matrices): every check of a candidate is made once per pool row (and pair
# of rows) for an X, met again and again, and read for the batch's rows. The same draws from the
# generator, the same first candidate kept as checking the batch itself (tests/test_kinds_heads_fast.py holds
# the draws equal to the batch checks written out).


def _pool(shape: tuple[int, int]) -> np.ndarray:
    """Every weight matrix of `shape` a batch draws from (numbers.pooled_matrices' pool, no zero column)."""
    return numbers._pool(tuple(shape), tuple(float(v) for v in WEIGHT_VALUES), False, True, False)


@dataclass(frozen=True)
class _Table:
    """For one X, over the pool rows p, q of W_K (= of W_Q: the same shape) and of W_V."""

    key_ok: np.ndarray  # (P,): K = X W_K differs between tokens, no column repeated
    value_ok: np.ndarray  # (P_V,): every token's value nonzero, not all alike, no column repeated
    same_k: np.ndarray  # (P, P): X W_p = X W_q (keys, or queries)
    mirror_k: np.ndarray  # (P, P): X W_p = −X W_q
    same_v: np.ndarray  # (P_V, P_V)
    mirror_v: np.ndarray  # (P_V, P_V)
    query_ok: np.ndarray  # (P, P): [key row, query row]: _draw's checks of a head's scores


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)  # shared by every draw from this X (lru_cache): never written
    return a


def _equal(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P, P) twice: M[p] = M[q] in every cell, and M[p] = −M[q]. M holds whole numbers (X and the weights
    do), so each row is numbered exactly by its cells as digits in base 2·max|M| + 1."""
    flat = M.reshape(len(M), -1)
    base = 2.0 * np.abs(flat).max() + 1.0
    digits = base ** np.arange(flat.shape[1])  # base^cells < 2^53: exact (|M| ≤ 4, at most 4 cells)
    own, negated = (flat + (base - 1) / 2) @ digits, (-flat + (base - 1) / 2) @ digits
    return own[:, None] == own[None, :], own[:, None] == negated[None, :]


@functools.lru_cache(maxsize=1024)
def _table(x: bytes, x_shape: tuple[int, int], d_k: int, d_v: int) -> _Table:
    X = np.frombuffer(x).reshape(x_shape)
    n = x_shape[0]
    K, V = X @ _pool((D_MODEL, d_k)), X @ _pool((D_MODEL, d_v))  # (P, n, d_k), (P_V, n, d_v)
    key_ok = (np.ptp(K.reshape(len(K), -1), axis=1) > 0) & _columns_differ(K)
    value_ok = np.any(V != 0, axis=2).all(axis=1) & (np.ptp(V, axis=1).max(axis=1) > 0) & _columns_differ(V)
    P = len(K)
    flat = K.reshape(P * n, d_k)  # every row of every candidate's K (= of its Q: the same pool)
    # S[a, b, k, q] = (Q_q K_kᵀ)[a, b], whole numbers, laid out with the cells first (fast reductions)
    S = np.ascontiguousarray((flat @ flat.T).reshape(P, n, P, n).transpose(1, 3, 2, 0))  # (n, n, P_key, P_query)
    query_ok = (np.abs(S).max(axis=(0, 1)) <= MAX_SCORE) & (np.abs(S - S.transpose(1, 0, 2, 3)).max(axis=(0, 1)) > 0) \
        & (np.ptp(S[-1], axis=0) > 0) & _columns_differ(K)[None, :]
    if CAUSAL:
        query_ok &= (S[~np.tril(np.ones((n, n), dtype=bool))] != 0).any(axis=0)
    return _Table(*(_frozen(a) for a in (key_ok, value_ok, *_equal(K), *_equal(V), query_ok)))


def _draw(rng: np.random.Generator, size: Size) -> dict | None:
    """X, the groups' W_K and W_V, the heads' W_Q, each piece the first of a checked batch; None to start
    again. A group's keys differ between tokens, its values are nonzero and different for every token, no
    column of K or V is repeated, and both are unlike every earlier group's and its negative (else the
    group a head reads changes nothing, or only its signs). A head's scores are small, S ≠ Sᵀ (else K Qᵀ
    looks right), the last query scores its keys differently (else its weights are even and the scaling
    changes nothing), a hidden score is nonzero (else "mask with 0" is no mask), no column of Q is
    repeated, and its queries are unlike the other heads' of its group."""
    X = nonzero_matrix(rng, (size.n, D_MODEL), size.x_values)  # (n, d)
    t = _table(X.tobytes(), X.shape, size.d_k, size.d_v)
    pool_k, pool_v = _pool((D_MODEL, size.d_k)), _pool((D_MODEL, size.d_v))
    groups: list[tuple[int, int]] = []  # pool rows of (W_K, W_V)
    for _ in range(size.g):
        rows_k = rng.integers(len(pool_k), size=BATCH)  # the draws numbers.pooled_matrices makes: W_K's
        rows_v = rng.integers(len(pool_v), size=BATCH)  # batch, then W_V's
        ok = t.key_ok[rows_k] & t.value_ok[rows_v]
        for k, v in groups:
            ok &= ~t.same_k[k][rows_k] & ~t.mirror_k[k][rows_k] & ~t.same_v[v][rows_v] & ~t.mirror_v[v][rows_v]
        good = np.flatnonzero(ok)
        if not len(good):
            return None
        groups.append((int(rows_k[good[0]]), int(rows_v[good[0]])))
    heads: list[int] = []  # pool rows of W_Q
    for i in range(1, size.h + 1):
        j = group(i, size.h, size.g)
        rows = rng.integers(len(pool_k), size=BATCH)
        ok = t.query_ok[groups[j - 1][0]][rows]
        for m, q in enumerate(heads, start=1):
            if group(m, size.h, size.g) == j:
                ok = ok & ~t.same_k[q][rows]
        good = np.flatnonzero(ok)
        if not len(good):
            return None
        heads.append(int(rows[good[0]]))
    given: dict = {"X": X}
    given.update({f"W_Q{i}": pool_k[q].copy() for i, q in enumerate(heads, start=1)})  # (d, d_k) each
    given.update({f"W_K{j}": pool_k[k].copy() for j, (k, _) in enumerate(groups, start=1)})  # (d, d_k)
    given.update({f"W_V{j}": pool_v[v].copy() for j, (_, v) in enumerate(groups, start=1)})  # (d, d_v)
    given.update(groups=size.g, d_k=size.d_k, causal=CAUSAL)
    return given


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


def generate(rng: np.random.Generator, level: int) -> Draft:
    """Heads that differ, groups that differ, every mistake apart, within the level's time budget."""
    from ...core import budget

    size = SIZES[level]
    for _ in range(MAX_TRIES):
        given = _draw(rng, size)
        if given is None:
            continue
        # the same decision as _operations(…) <= budget and _apart(…) on _parts(…), the cheaper check first
        fw = _Forward(given)
        if not _apart_fast(given, level, fw):
            continue
        parts = _parts(given, level)
        if _operations_fast(given, parts, fw).minutes <= budget.BUDGET_MINUTES[level]:
            return Draft(given=given, parts=parts, params=_params(given))
    raise RuntimeError(f"gqa: no variant within the time budget in {MAX_TRIES} draws")


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """Multi-query (one K/V head) or grouped; then the cache question."""
    _, g = sizes_of(ex.given)
    return ("kind.gqa.prompt_mqa" if g == 1 else "kind.gqa.prompt", "kind.gqa.prompt_cache")


# ---------------------------------------------------------------- time by hand


def _operations(given: dict, parts) -> object:
    """K and V once per group, each head's pipeline from Q to O with its group's K and V, every cell written."""
    from ...core import budget

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
