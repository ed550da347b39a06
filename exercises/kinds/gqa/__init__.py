"""Grouped-query attention (GQA) and multi-query attention (MQA): h query heads share g K/V heads.

    K_j = X W_Kj,  V_j = X W_Vj                      once per group j = 1 … g
    O_i = softmax(mask(Q_i K_jᵀ / √d_k)) V_j,  Q_i = X W_Qi,  j = group(i) = ⌊(i − 1) / (h/g)⌋ + 1
    concat = [O_1 | … | O_h]  (h d_v columns),   cache_floats = g (d_k + d_v)   (multi-head: h (d_k + d_v))

Conventions (stated in the prompt): causal at every level (GQA is a decoder's way to shrink its KV
cache: token t sees tokens 1 … t); heads are numbered from 1 and consecutive heads share a group.
Level 1 is multi-query (g = 1, h = 2), levels 2 and 3 grouped (h = 4, g = 2; level 3 with d_k = 2, so
the scaling by √d_k matters).

The heads are one axis of the stack: W_Q (B, h, d, d_k), and each head's W_K, W_V taken from its group's
(the groups are drawn, the heads index them), so the step records compute every head at once. The parts
are slices of the records' O, then two counts: concat's width (the O_i side by side are copied, not
computed: asking them again would only have them retyped) and the cache. The kind's own mistakes are a
head read with the wrong group (heads dealt out in turn), the right keys with group 1's values, one output
per group concatenated, and the cache counted as for multi-head attention or for the keys alone. (Exercises
of earlier versions asked concat itself: their heads out of order are named too.)

Axes: B candidates, h query heads, g groups, n tokens, d = d_model, d_k, d_v.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import permutations

import numpy as np

from attention_core import ops
from attention_core.grouped import group_of, kv_cache_floats

from ... import solutions
from ...core import budget, misconceptions, pipeline, sampler
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.levels import spec
from ...core.model import Exercise, Part
from ...core.numbers import pooled_matrices
from ...core.sampler import Batch
from ...i18n import msg
from ...rendering import latex as L
from ...solutions.aids import ExpSeries
from .._shared.aids import softmax_aids
from .._shared.hand import own_diagnosis

ID = "gqa"
ORDER = 82  # after multi_head (80): the same heads, sharing their keys and values; before rope (84)
VERSION = 6
LEVELS = (1, 2, 3)
# the eˣ aid: a fixed grid per level covering every exponent the level's problems need (never just those)
EXP_GRID = {1: (ExpSeries(1, 1, -3, 3),), 2: (ExpSeries(1, 1, -3, 3),), 3: (ExpSeries(1, 2, -3, 3, root=2),)}
# the catalogued mistakes that can change one head's output: the sampler keeps them apart in every head
GUARDS = ("transposed_scores", "scores_not_transposed", "no_scaling", "scaled_by_dk", "mask_wrong_triangle",
          "no_mask", "mask_after_softmax", "softmax_columns", "no_exp", "weights_transposed",
          "mask_zero_instead_of_inf", "softmax_no_normalise", "scaled_times_sqrt_dk", "scaled_by_sqrt_d_model")
# the kind's own catalogued mistakes (its texts: misconception.<id> in its locales)
MISTAKES = ("gqa_wrong_group", "gqa_v_not_shared", "gqa_concat_per_group", "gqa_cache_full_heads",
            "gqa_cache_keys_only")
# not guarded: mask_diagonal leaves the first of two tokens no key to attend to, an O no one can write


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
# level 1: X = I, so each head's Q and its group's K, V are the weights, read off (the whole of two heads
# written out does not fit 5 minutes otherwise), and the weights a little wider for variety
IDENTITY_X = (1, 2)  # levels whose X is the identity: each head's Q, K, V are its weights, read off
HEAD_VALUES = {1: (-2, -1, 0, 1, 2), 2: (-2, -1, 0, 1, 2)}  # their weights: a little wider than elsewhere
MAX_SCORE = 3  # |q · k|: the exponents stay small
BATCH = 16
CHOICES = 24  # weights drawn for each group's W_K, W_V and each head's W_Q, of which the first admitted is taken
CHECKED = 4  # a head's first admitted choices whose guarded mistakes are checked before it is chosen


# ---------------------------------------------------------------- names and heads


def sizes_of(given: dict) -> tuple[int, int]:
    """(h, g): the query heads and the K/V groups of an exercise's given data."""
    h = sum(1 for name in given if name.startswith("W_Q") and name[3:].isdigit())
    return h, int(given["groups"])


def group(i: int, h: int, g: int) -> int:
    """The 1-based group of the 1-based head i (attention_core's rule, shown 1-based)."""
    return group_of(i - 1, h, g) + 1


def _groups(h: int, g: int) -> np.ndarray:
    """(h,): each head's 0-based group (consecutive heads share one)."""
    return np.array([group_of(i, h, g) for i in range(h)])


def _stacked(given: dict) -> dict:
    """An exercise's given data as the records read it, a stack of one: X (1, 1, n, d), W_Q (1, h, d, d_k),
    and W_K, W_V (1, h, d, ·), each head its group's."""
    h, g = sizes_of(given)
    heads = _groups(h, g) + 1

    def stack(names):
        return np.stack([np.asarray(given[name], dtype=float) for name in names])[None]

    return {"X": np.asarray(given["X"], dtype=float)[None, None], "W_Q": stack([f"W_Q{i}" for i in range(1, h + 1)]),
            "W_K": stack([f"W_K{j}" for j in heads]), "W_V": stack([f"W_V{j}" for j in heads]),
            "d_k": int(given["d_k"]), "causal": bool(given["causal"])}


def _shown(one: dict, g: int) -> dict:
    """One candidate as its exercise gives it: X, W_Q1 … W_Qh, W_K1 … W_Kg, W_V1 … W_Vg, groups."""
    W_Q, W_K, W_V = one["W_Q"], one["W_K"], one["W_V"]  # (h, d, ·) each
    h = len(W_Q)
    share = h // g  # group j's weights are those of its first head
    given = {"X": one["X"][0]}  # (n, d)
    given.update({f"W_Q{i}": W_Q[i - 1] for i in range(1, h + 1)})
    given.update({f"W_K{j}": W_K[(j - 1) * share] for j in range(1, g + 1)})
    given.update({f"W_V{j}": W_V[(j - 1) * share] for j in range(1, g + 1)})
    given.update(groups=g, d_k=one["d_k"], causal=one["causal"])
    return given


def head_given(given: dict, i: int) -> dict:
    """Head i (1-based) as a single-head pipeline input: X, W_Qi, and its group's K and V as given values."""
    h, g = sizes_of(given)
    j = group(i, h, g)
    X = np.asarray(given["X"], dtype=float)
    return {"X": X, "W_Q": given[f"W_Q{i}"], "K": X @ np.asarray(given[f"W_K{j}"], dtype=float),  # (n, d_k)
            "V": X @ np.asarray(given[f"W_V{j}"], dtype=float),  # (n, d_v)
            "d_k": int(given["d_k"]), "causal": bool(given["causal"])}


# ---------------------------------------------------------------- the batch


def _batch(given: dict, h: int, g: int, decimals: int, params: dict | None = None) -> Batch:
    """The candidates of `given` (stacked as the records read them: h heads in g groups) with their parts
    and the kind's own mistakes."""
    share = h // g
    right = _groups(h, g)  # (h,)
    dealt = np.arange(h) % g  # heads dealt out to the groups in turn: gqa_wrong_group
    wrong = np.flatnonzero(dealt != right)  # the heads it changes
    later = np.flatnonzero(right != 0)  # the heads gqa_v_not_shared changes (group 1's values)
    heads = [f"O{i}" for i in range(1, h + 1)]
    d_k, d_v = given["W_K"].shape[-1], given["W_V"].shape[-1]

    def count(env, number: int) -> np.ndarray:  # (B, 1, 1)
        return np.full((len(env["O"]), 1, 1), float(number))

    def derive(env):
        O = env["O"]  # (B, h, n, d_v)
        out = {name: O[:, i] for i, name in enumerate(heads)}  # (B, n, d_v) each
        out["concat_width"] = count(env, h * d_v)  # one output per query head, side by side
        out["cache_floats"] = count(env, kv_cache_floats(g, d_k, d_v))
        return out

    def wrong_group(env):  # head i with group i mod g's keys and values, through the records
        first = dealt[wrong] * share  # the first head of each dealt group: its K and V
        run = {"Q": env["Q"][:, wrong], "K": env["K"][:, first], "V": env["V"][:, first], "d_k": env["d_k"],
               "causal": env["causal"]}
        O = pipeline.run(run, until={"O"})["O"]  # (B, |wrong|, n, d_v)
        return {heads[i]: O[:, k] for k, i in enumerate(wrong)}

    def v_not_shared(env):  # the right keys (so the right weights), group 1's values
        O = ops.weighted_sum(env["A"][:, later], env["V"][:, :1])  # (B, |later|, n, d_v)
        return {heads[i]: O[:, k] for k, i in enumerate(later)}

    def counted(name: str, number: int):
        return lambda env: {name: count(env, number)}

    own = {"gqa_wrong_group": wrong_group} if len(wrong) else {}
    if len(later):
        own["gqa_v_not_shared"] = v_not_shared
    own.update(gqa_concat_per_group=counted("concat_width", g * d_v),
               gqa_cache_full_heads=counted("cache_floats", kv_cache_floats(h, d_k, d_v)),
               gqa_cache_keys_only=counted("cache_floats", g * d_k))
    return Batch(given, ("X", "W_Q", "W_K", "W_V"), [*heads, "concat_width", "cache_floats"], params=params or {},
                 keep=lambda env: _hand_friendly(env, h, g), decimals=decimals, derive=derive,
                 sources={**{name: ("O",) for name in heads}, "concat_width": (), "cache_floats": ()},
                 own=own, shown=lambda one: _shown(one, g))


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of candidates, built group by group and head by head: each group's W_K and W_V, and each head's
    W_Q, the first of CHOICES drawn that _hand_friendly admits, each head reading its group's K and V (every
    choice of every head computed by the records at once; a head's guarded mistakes checked as the sampler
    checks them, for its first CHECKED admitted choices). Blind draws of h heads would rarely all fit."""
    size = SIZES[level]
    h, g, d_k, B = size.h, size.g, size.d_k, BATCH
    if level in IDENTITY_X:
        X = np.repeat(np.eye(size.n, D_MODEL)[None, None], B, axis=0)  # (B, 1, n, d)
    else:
        X = pooled_matrices(rng, B, (size.n, D_MODEL), size.x_values)[:, None]  # (B, 1, n, d), no zero line
    every = np.arange(B)

    def choices(count: int, width: int) -> np.ndarray:  # (B, count, CHOICES, d, width), no zero column
        drawn = pooled_matrices(rng, B * count * CHOICES, (D_MODEL, width), HEAD_VALUES.get(level, WEIGHT_VALUES),
                                rows=False)
        return drawn.reshape(B, count, CHOICES, D_MODEL, width)

    W_K, W_V, K, V = [], [], [], []  # per group: (B, d, ·), (B, n, ·)
    for w_k, w_v in zip(choices(g, d_k).swapaxes(0, 1), choices(g, size.d_v).swapaxes(0, 1)):
        k, v = X @ w_k, X @ w_v  # (B, CHOICES, n, ·)
        ok_k, ok_v = _keys_ok(k), _values_ok(v)
        for K_j, V_j in zip(K, V):
            ok_k &= _unlike(k, K_j[:, None])
            ok_v &= _unlike(v, V_j[:, None])
        c_k, c_v = ok_k.argmax(axis=1), ok_v.argmax(axis=1)  # the first admitted (where none is: keep refuses)
        W_K.append(w_k[every, c_k]), K.append(k[every, c_k]), W_V.append(w_v[every, c_v]), V.append(v[every, c_v])
    right = _groups(h, g)
    w_q = choices(h, d_k)  # (B, h, CHOICES, d, d_k)
    heads = pipeline.run({"X": X[:, None], "W_Q": w_q, "K": np.stack(K, axis=1)[:, right, None],
                          "V": np.stack(V, axis=1)[:, right, None], "d_k": d_k, "causal": CAUSAL},
                         until={"O"})  # every choice of every head: (B, h, CHOICES, …)
    Q, O = heads["Q"], heads["O"]
    ok = _scores_ok(heads["scores"]) & _columns_differ(Q) & _transpose_shows(Q, heads["K"])  # (B, h, CHOICES)
    ok &= np.cumsum(ok, axis=-1) <= CHECKED  # the first few admitted: their mistakes are checked
    ok[ok] = ~_clashing_heads(heads, ok, spec(level).decimals)
    chosen = []
    for i, j in enumerate(right):
        for a, c in enumerate(chosen):  # apart from the heads chosen before, querying unlike its group's
            ok[:, i] &= _apart(O[:, i], O[every, a, c][:, None])
            if right[a] == j:
                ok[:, i] &= _unlike(Q[:, i], Q[every, a, c][:, None], signed=False)
        chosen.append(ok[:, i].argmax(axis=1))
    given = {"X": X, "W_Q": np.stack([w_q[every, i, c] for i, c in enumerate(chosen)], axis=1),  # (B, h, d, d_k)
             "W_K": np.stack(W_K, axis=1)[:, right], "W_V": np.stack(W_V, axis=1)[:, right],  # (B, h, d, ·)
             "d_k": d_k, "causal": CAUSAL}
    return _batch(given, h, g, spec(level).decimals, _params(size))


def _clashing_heads(heads: dict, ok: np.ndarray, decimals: int) -> np.ndarray:
    """(ok.sum(),): for each admitted choice of a head (heads: the records' values of every choice, (B, h,
    CHOICES, …)), whether its guarded mistakes clash: the sampler's check, each choice a candidate of one head."""
    if not ok.any():
        return np.zeros(0, dtype=bool)
    given = {name: np.broadcast_to(heads[name], (*ok.shape, *heads[name].shape[-2:]))[ok]  # (k, rows, columns)
             for name in ("X", "W_Q", "K", "V")}
    one = Batch({**given, "d_k": heads["d_k"], "causal": heads["causal"]}, tuple(given), ["O"], decimals=decimals)
    return sampler.clashing(one, one.computed(one.given), GUARDS)


def _hand_friendly(env, h: int, g: int) -> np.ndarray:
    """Per candidate: every group's keys and values admitted (_keys_ok, _values_ok) and unlike each other's;
    every head's scores admitted (_scores_ok, _transpose_shows) and its queries' columns unequal; the heads of
    a group query differently; and the heads' outputs apart, so their order shows."""
    share = h // g
    Q, O = env["Q"], env["O"]  # (B, h, n, d_k), (B, h, n, d_v)
    K, V = env["K"][:, ::share], env["V"][:, ::share]  # (B, g, n, ·): one per group
    ok = _keys_ok(K).all(axis=1) & _values_ok(V).all(axis=1)
    ok &= (_scores_ok(env["scores"]) & _columns_differ(Q) & _transpose_shows(Q, env["K"])).all(axis=1)
    for a in range(g):
        for b in range(a + 1, g):
            ok &= _unlike(K[:, a], K[:, b]) & _unlike(V[:, a], V[:, b])
    for a in range(h):
        for b in range(a + 1, h):
            ok &= _apart(O[:, a], O[:, b])
            if a // share == b // share:
                ok &= _unlike(Q[:, a], Q[:, b], signed=False)
    return ok


def _keys_ok(K: np.ndarray) -> np.ndarray:
    """(…,): keys K[…] (…, n, d_k) not all one number, no column repeated."""
    return (K != K[..., :1, :1]).any(axis=(-2, -1)) & _columns_differ(K)


def _values_ok(V: np.ndarray) -> np.ndarray:
    """(…,): values V[…] (…, n, d_v) nonzero in every token, not alike in every token, no column repeated (a
    weight on a zero value, or on values all alike, changes nothing in O)."""
    return (V != 0).any(axis=-1).all(axis=-1) & (V != V[..., :1, :]).any(axis=(-2, -1)) & _columns_differ(V)


def _scores_ok(S: np.ndarray) -> np.ndarray:
    """(…,): scores S[…] (…, n, n) small, not symmetric (else K Qᵀ looks right), with a hidden score that is not
    0 (else forgetting the mask changes nothing) and a last query that scores its keys differently."""
    hidden = ops.hidden_cells(S.shape[-1])
    return ((np.abs(S) <= MAX_SCORE).all(axis=(-2, -1)) & (S != np.swapaxes(S, -1, -2)).any(axis=(-2, -1))
            & (S[..., hidden] != 0).any(axis=-1) & (S[..., -1, 1:] != S[..., -1, :1]).any(axis=-1))


def _transpose_shows(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    """(…,): where Q K conforms (d_k = n), the last query weighs its keys otherwise without the transpose than
    with it (else forgetting the transpose looks right; the first query sees one key whatever its scores)."""
    if Q.shape[-1] != K.shape[-2]:
        return np.ones(np.broadcast_shapes(Q.shape[:-2], K.shape[:-2]), dtype=bool)
    change = (Q @ K - Q @ np.swapaxes(K, -1, -2))[..., -1, :]  # (…, n): the last row's scores, QK − QKᵀ
    return (change != change[..., :1]).any(axis=-1)


def _unlike(M: np.ndarray, N: np.ndarray, signed: bool = True) -> np.ndarray:
    """(…,): M[…] ≠ N[…] in some cell (and, `signed`, ≠ −N[…]: a group's negative is no new group)."""
    ok = (M != N).any(axis=(-2, -1))
    return ok & (M != -N).any(axis=(-2, -1)) if signed else ok


def _apart(O: np.ndarray, P: np.ndarray) -> np.ndarray:
    """(…,): two heads' outputs apart in some cell (else swapping them could go unseen)."""
    return (np.abs(O - P) > misconceptions.GAP).any(axis=(-2, -1))


def _columns_differ(M: np.ndarray) -> np.ndarray:
    """(…,): no two columns of each M[…] (…, n, width) equal (a repeated column is work that teaches nothing)."""
    ok = np.ones(M.shape[:-2], dtype=bool)
    for a in range(M.shape[-1]):
        for b in range(a + 1, M.shape[-1]):
            ok &= (M[..., a] != M[..., b]).any(axis=-1)
    return ok


def _params(size: Size) -> dict:
    h, g = size.h, size.g
    heads = [", ".join(str(i) for i in range(1, h + 1) if group(i, h, g) == j) for j in range(1, g + 1)]
    return {"n": size.n, "h": h, "g": g, "share": h // g, "d_k": size.d_k, "d_v": size.d_v, "width": h * size.d_v,
            "heads_of_groups": "; ".join(f"{hs} → {j}" for j, hs in enumerate(heads, start=1)),
            "mha_floats": kv_cache_floats(h, size.d_k, size.d_v)}


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """Multi-query (one K/V head) or grouped, the concatenation ([O1 | O2] for two heads) and its width, the
    cache question. (An exercise of an earlier version asks concat itself, its width stated.)"""
    h, g = sizes_of(ex.given)
    asked = "concat" if "concat" in ex.part_names else "concat_width"
    concat = f"kind.gqa.{asked}.{'two' if h == 2 else 'many'}"
    return ("kind.gqa.prompt_mqa" if g == 1 else "kind.gqa.prompt", concat, "kind.gqa.prompt_cache")


# ---------------------------------------------------------------- grading


def mistakes_of(ex: Exercise) -> dict[str, dict[str, np.ndarray]]:
    """{part: {mistake id: what it gives}}: the kind's own mistakes, then each guarded one of the records
    made in every head (what the sampler keeps apart, for this one exercise)."""
    batch = _batch(_stacked(ex.given), *sizes_of(ex.given), spec(ex.level).decimals)
    env = batch.computed(batch.given)
    found: dict[str, dict[str, np.ndarray]] = {}
    for mid, mistaken in batch.own.items():
        for name, value in mistaken(env).items():
            found.setdefault(name, {})[mid] = value[0]
    for mid in GUARDS:
        run = pipeline.run_mistake(batch.given, env, mid, until={"O"})
        if "O" in run.tainted and np.shape(run["O"]) == np.shape(env["O"]):
            for name, value in batch.derive(run).items():
                if name.startswith("O"):
                    found.setdefault(name, {})[mid] = value[0]
    return found


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """A head computed with a wrong group or a catalogued mistake, the heads out of order, a wrong cache count."""
    if part.name == "concat":
        tolerance = max(part.tolerance, misconceptions.DIAGNOSIS_TOLERANCE)
        h, _ = sizes_of(ex.given)
        heads = [ex.part(f"O{i}").reference for i in range(1, h + 1)]
        orders = [order for order in permutations(range(h)) if list(order) != list(range(h))]
        if any(misconceptions.matches(value, np.concatenate([heads[k] for k in order], axis=1), tolerance)
               for order in orders):
            return "concat_order"
        return None
    return own_diagnosis(part, value, mistakes_of(ex).get(part.name, {}))


def chain(ex: Exercise, values: dict[str, np.ndarray], rounding: int | None) -> dict[str, np.ndarray]:
    """The values a learner carries forward: each head's O (with its group's K and V) unless given, concat
    from the O's unless given, concat_width from h and d_v, cache_floats from g, d_k, d_v."""
    env = dict(values)
    h, _ = sizes_of(ex.given)
    O = pipeline.run(_stacked(ex.given), until={"O"}, rounding=rounding)["O"][..., 0, :, :, :]  # (h, n, d_v)
    for i in range(1, h + 1):
        env.setdefault(f"O{i}", O[..., i - 1, :, :])
    if "concat" not in env:
        heads = np.broadcast_arrays(*[np.atleast_2d(env[f"O{i}"]) for i in range(1, h + 1)])
        env["concat"] = np.concatenate(heads, axis=-1)  # (n, h·d_v)
    d_k, d_v = (np.shape(ex.given[f"{w}1"])[1] for w in ("W_K", "W_V"))
    env.setdefault("concat_width", np.array([[float(h * d_v)]]))  # one output per query head
    if "cache_floats" not in env:  # one key and one value per group and token
        env["cache_floats"] = np.array([[float(kv_cache_floats(int(ex.given["groups"]), d_k, d_v))]])
    return env


def operations(ex: Exercise) -> budget.Operations:
    """The hand work (the pipeline runs one head): K and V once per group, each head from Q to O with its
    group's K and V, every cell written."""
    h, g = sizes_of(ex.given)
    total = budget.parts_written(ex)
    for j in range(1, g + 1):
        total = total + budget.count({"X": ex.given["X"], "W_K": ex.given[f"W_K{j}"], "W_V": ex.given[f"W_V{j}"]},
                                     ["K", "V"], written=())
    for i in range(1, h + 1):
        total = total + budget.count(head_given(ex.given, i), ["O"], written=())
    return total


# ---------------------------------------------------------------- worked solution

CONCAT = r"\mathrm{concat}"


def group_symbol(name: str, j: int) -> str:
    """K^{[j]}, V^{[j]}: group j's keys and values (square brackets: a head's own values carry (i))."""
    return f"{name}^{{[{j}]}}"


def _group_steps(ex: Exercise, j: int) -> list[solutions.Step]:
    """K_j = X W_Kj and V_j = X W_Vj, computed once for the whole group."""
    given = {"X": ex.given["X"], "W_K": ex.given[f"W_K{j}"], "W_V": ex.given[f"W_V{j}"]}
    ctx = solutions.build_context(given, ["K", "V"], 2)
    ctx.symbols.update({"K": group_symbol("K", j), "V": group_symbol("V", j), "W_K": L.symbol(f"W_K{j}"),
                        "W_V": L.symbol(f"W_V{j}")})
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
    """concat = [O_1 | … | O_h], read off the heads' outputs (asked by earlier versions; shown since)."""
    h, _ = sizes_of(ex.given)
    heads = [ex.part(f"O{i}") for i in range(1, h + 1)]
    value = np.concatenate([p.reference for p in heads], axis=1)  # (n, h·d_v)
    decimals = heads[0].decimals
    d_v = heads[0].shape[1]
    symbols = [L.symbol("O", str(i)) for i in range(1, h + 1)]
    exact = [[L.short(L.to_exact(float(x))) for x in row] for row in value]

    def derive(r: int, c: int) -> solutions.CellDerivation:
        k, col = divmod(c, d_v)  # column c of the concatenation is column col of head k + 1
        latex = L.chain(L.cell(CONCAT, r, c), L.cell(symbols[k], r, col), L.decimal(value[r, c], decimals))
        return solutions.CellDerivation(latex, msg("solution.gqa.concat_cell", head=k + 1, column=col + 1))

    return solutions.make_step("concat", msg("solution.gqa.concat"), value, decimals, symbol=CONCAT,
                               formula=L.bmatrix([symbols]), exact_cells=exact,
                               note=msg("solution.gqa.concat_note", width=value.shape[1]), derive=derive)


def _width_step(ex: Exercise) -> solutions.Step:
    """concat_width = h d_v: one output per query head, however few the K/V groups."""
    part = ex.part("concat_width")
    p = ex.params
    value = int(part.reference[0, 0])
    h, d_v = (solutions.number(str(p[k]), int(p[k])) for k in ("h", "d_v"))
    numbers = L.product(h.text, d_v.text)
    line, sub = solutions.worked_chain(r"\text{width}", str(value), float(value), 0, numbers, "sum", ((h, d_v),),
                                       r"h\,d_v")

    def derive(r: int, c: int) -> solutions.CellDerivation:
        return solutions.CellDerivation(line, msg("solution.gqa.width_cell", g=p["g"], d_v=p["d_v"]), (sub,))

    return solutions.make_step("concat_width", msg("solution.gqa.width"), part.reference, 0,
                               symbol=r"\text{width}", formula=r"h\,d_v", work=[("", "=", numbers)],
                               exact_cells=[[str(value)]], work_substitutions=(sub,),
                               note=msg("solution.gqa.width_note", h=p["h"], g=p["g"], width=value), derive=derive)


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
    concatenation and its width, the cache count."""
    h, g = sizes_of(ex.given)
    steps: list[solutions.Step] = []
    for j in range(1, g + 1):
        steps += _group_steps(ex, j)
    for i in range(1, h + 1):
        steps += _head_steps(ex, i)
    steps.append(_concat_step(ex))
    if "concat_width" in ex.part_names:
        steps.append(_width_step(ex))
    return [*steps, _cache_step(ex)]


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
