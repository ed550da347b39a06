"""Cross-attention: queries from one sequence, keys and values from another (n_q ≠ n_k).

    S = Q Kᵀ (n_q × n_k),  Z = S / √d_k,  A = softmax(Z) along each row (over the n_k keys),  O = A V

Levels 1–2 give Q, K, V (a decoder's queries, an encoder's keys and values); level 3 gives X (n_q × d)
and a memory H (n_k × d) and asks for the projections too: Q = X W_Q, but K = H W_K and V = H W_V.
No mask: every query may look at every memory position. The mistakes of this kind: keys and values
taken from the queries' own sequence X (self-attention), a softmax down the columns of the rectangle,
a causal mask (j > i) applied where nothing lies in the future.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np

from attention_core import cross_attention, ops, scaled_dot_product

from ... import solutions
from ...core import budget, misconceptions, pipeline, steps
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.model import Exercise
from . import distinct

ID = "cross_attention"
ORDER = 75
# 2: constructive generator (issue 14): every piece drawn from a table of the matrices the old draws could
# give (no zero row or column), level 1's (K, V) from the pairs whose every check passes (closed forms in
# distinct.py, worked out once), levels 2 and 3 checked by those closed forms instead of the pipeline's
# mistake runs; the time budget from the sizes (even the heaviest values fit)
VERSION = 2
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("no_scaling", "scaled_by_dk", "softmax_columns", "no_exp", "scaled_times_sqrt_dk",
          "softmax_no_normalise", "cross_keys_from_queries", "cross_causal_mask")
# not guarded: K Qᵀ is n_k × n_q, a shape the grader names (and the transposed-shape warning); K and V from
# X are n_q rows, so that mistake is told apart in O, which has the right shape
COVERED = frozenset((*distinct.SCALED, *distinct.SOFTMAX, "cross_causal_mask", "cross_keys_from_queries"))

# level: (queries n_q, keys n_k, d_k, d_v, width d of X and H (0: Q, K, V are given))
SIZES = {1: (1, 3, 4, 1, 0), 2: (2, 3, 2, 1, 0), 3: (2, 3, 2, 1, 2)}  # level 1: one query (5 minutes)
MAX_SCORE = 4  # |S|: the exponents come from a small set (the eˣ table lists them)
WEIGHTS = (-1, 0, 1)  # W_Q, W_K, W_V at level 3: projections are sums, not products
INPUTS = (-1, 0, 1, 2)  # X and H at level 3
MAX_TRIES = 2000
FROM_X = ("Q", "K", "V")
PARTS = ["scores", "scaled", "A", "O"]
_MEMO_KEY = "cross_attention.collides"  # the kind's own answer to the redraw's question, in an exercise's memo


def _trace(given: dict):
    """attention_core's own forward pass of the variant (an oracle beside the step registry)."""
    if "H" in given:
        return cross_attention(given["X"], given["H"], given["W_Q"], given["W_K"], given["W_V"])
    return scaled_dot_product(given["Q"], given["K"], given["V"])


def _teaches_s(S: np.ndarray, V: np.ndarray) -> bool:
    """Small whole scores, not all equal in any query's row (else its weights are uniform and say
    nothing), rows that differ between the queries, and values that differ (else every O is the same)."""
    return bool(np.abs(S).max() <= MAX_SCORE and (S.max(axis=1) > S.min(axis=1)).all() and V.max() > V.min()
                and (S.shape[0] == 1 or (S[0] != S[-1]).any()))  # whole numbers: compared exactly


def _teaches(given: dict) -> bool:
    """_teaches_s of the variant's S and V (whole entries: every product exact)."""
    if "H" in given:
        Q, K, V = given["X"] @ given["W_Q"], given["H"] @ given["W_K"], given["H"] @ given["W_V"]
    else:
        Q, K, V = given["Q"], given["K"], given["V"]
    return _teaches_s(Q @ K.T, V)


@functools.cache
def matrices(shape: tuple[int, int], values: tuple) -> np.ndarray:
    """Every matrix of `shape` with entries from `values` that numbers.nonzero_matrix can give (no row
    and no column all zeros; with a single row or column, no zero at all): (m, *shape), read-only."""
    options = np.asarray(values, dtype=float)
    cells = shape[0] * shape[1]
    digits = np.indices((len(options),) * cells).reshape(cells, -1).T  # every index tuple, in product order
    grid = options[digits].reshape(-1, *shape)
    nonzero = grid != 0
    if 1 in shape:
        keep = nonzero.all(axis=(1, 2))
    else:
        keep = nonzero.any(axis=2).all(axis=1) & nonzero.any(axis=1).all(axis=1)
    out = np.ascontiguousarray(grid[keep])
    out.setflags(write=False)
    return out


@functools.cache
def _distinct_values(shape: tuple[int, int], values: tuple) -> np.ndarray:
    """matrices(shape, values) whose entries are not all equal (V: else every output is the same)."""
    M = matrices(shape, values)
    flat = M.reshape(len(M), -1)
    out = M[flat.max(axis=1) > flat.min(axis=1)]
    out.setflags(write=False)
    return out


@functools.cache
def level_1_table() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(K's, V's, and the admissible pairs as indices into them): the one query is all ones (the only
    nonzero 1 × 4 matrix of 0s and 1s), so S_j is the number of ones in K's row j; a pair is admissible
    when S is not constant and distinct.blocks/decide keep every guarded mistake apart (from the answer,
    from each other and from the careful student's values). Worked out once: 360 (S, V) in one batch."""
    n_q, n_k, d_k, d_v, _ = SIZES[1]
    Ks = matrices((n_k, d_k), (0, 1))  # (m, 3, 4)
    Vs = _distinct_values((n_k, d_v), tuple(spec(1).values))  # (6, 3, 1): 1s and 2s
    S = Ks.sum(axis=2)  # (m, 3): Q Kᵀ with Q all ones
    teaches = S.max(axis=1) > S.min(axis=1)
    codes = S @ np.array([25, 5, 1])  # S's entries are 1 to 4
    unique, where = np.unique(codes, return_inverse=True)
    rows = np.array([[c // 25, c // 5 % 5, c % 5] for c in unique.tolist()], dtype=float)[:, None, :]  # (u, 1, 3)
    batch_S = np.repeat(rows, len(Vs), axis=0)  # (u·v, 1, 3)
    batch_V = np.tile(Vs, (len(rows), 1, 1))  # (u·v, 3, 1)
    collides, apart = distinct.decide(*distinct.blocks(batch_S, d_k, batch_V, GUARDS))
    good = (~collides & apart).reshape(len(rows), len(Vs))  # (u, v)
    k_index, v_index = np.nonzero(good[where] & teaches[:, None])
    for table in (k_index, v_index):
        table.setflags(write=False)
    return Ks, Vs, k_index, v_index


@functools.cache
def level_2_pairs() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(Q's, K's, and the (Q, K) pairs whose S teaches, as indices): rows of S not constant and not
    equal to each other (|S| ≤ 2 always)."""
    n_q, n_k, d_k, _, _ = SIZES[2]
    Qs, Ks = matrices((n_q, d_k), (-1, 0, 1)), matrices((n_k, d_k), (-1, 0, 1))
    S = np.tensordot(Qs, Ks, axes=([2], [2]))  # (q, 2, k, 3): S = Q Kᵀ of every pair, exact (whole numbers)
    uneven = (S[..., 0] != S[..., 1]) | (S[..., 1] != S[..., 2])  # (q, 2, k): a row of 3 scores not constant
    differ = (S[:, 0] != S[:, 1]).any(axis=-1)  # (q, k): the two queries' rows differ
    teaches = uneven[:, 0] & uneven[:, 1] & differ
    q_index, k_index = np.nonzero(teaches)
    for table in (q_index, k_index):
        table.setflags(write=False)
    return Qs, Ks, q_index, k_index


@functools.cache
def level_3_pieces() -> tuple[np.ndarray, ...]:
    """(X's, H's, weights W_Q and W_K, W_V's, and every X W_Q by (X, W_Q)): the tables level 3 draws from."""
    n_q, n_k, d_k, d_v, d = SIZES[3]
    Xs, Ws = matrices((n_q, d), INPUTS), matrices((d, d_k), WEIGHTS)
    Qs = Xs[:, None] @ Ws[None]  # (x, w, n_q, d_k)
    Qs.setflags(write=False)
    return Xs, matrices((n_k, d), INPUTS), Ws, matrices((d, d_v), WEIGHTS), Qs


def _pieces(rng: np.random.Generator, level: int) -> dict | None:
    """The given values of one variant, from the tables (level 3: None when S or V teaches nothing)."""
    n_q, n_k, d_k, d_v, d = SIZES[level]
    if level == 1:
        Ks, Vs, k_index, v_index = level_1_table()
        pick = int(rng.integers(len(k_index)))
        given: dict = {"Q": np.ones((n_q, d_k)), "K": np.array(Ks[k_index[pick]]), "V": np.array(Vs[v_index[pick]])}
    elif level == 2:
        Qs, Ks, q_index, k_index = level_2_pairs()
        pick = int(rng.integers(len(q_index)))
        Vs = _distinct_values((n_k, d_v), (-2, -1, 1, 2))
        given = {"Q": np.array(Qs[q_index[pick]]), "K": np.array(Ks[k_index[pick]]),
                 "V": np.array(Vs[rng.integers(len(Vs))])}
    else:
        Xs, Hs, Ws, Wv, Qs = level_3_pieces()
        x, h, w_q, w_k, w_v = rng.integers((len(Xs), len(Hs), len(Ws), len(Ws), len(Wv)))
        S = Qs[x, w_q] @ (Hs[h] @ Ws[w_k]).T  # (n_q, n_k), whole: the projections are exact
        if not _teaches_s(S, Hs[h] @ Wv[w_v]):
            return None
        given = {"X": np.array(Xs[x]), "H": np.array(Hs[h]), "W_Q": np.array(Ws[w_q]), "W_K": np.array(Ws[w_k]),
                 "W_V": np.array(Wv[w_v])}
    given.update(d_k=int(d_k), causal=False)
    return given


def _draft(rng: np.random.Generator, level: int) -> Draft:
    """One drawn variant that teaches (not yet checked for its mistakes, save level 1's by its table)."""
    n_q, n_k, d_k, _, d = SIZES[level]
    for _ in range(MAX_TRIES):
        given = _pieces(rng, level)
        if given is not None:
            env = references(given)
            names = list(PARTS) if d == 0 else [*FROM_X, *PARTS]
            return Draft(given=given, parts=reference_parts(given, names, spec(level).decimals, env=env),
                         params={"n_q": n_q, "n_k": n_k, "d_k": d_k}, env=env)
    raise RuntimeError(f"cross_attention: no hand-friendly variant in {MAX_TRIES} draws")


def references(given: dict) -> dict:
    """pipeline.run(given), computed as its steps compute it (the projections, S = Q Kᵀ, S / √d_k, no
    mask, the row softmax, A V: the same operations on the same values, tested against pipeline.run)."""
    env = dict(given)
    if "H" in given:
        env.update(Q=given["X"] @ given["W_Q"], K=given["H"] @ given["W_K"], V=given["H"] @ given["W_V"])
    S = env["Q"] @ env["K"].T
    scaled = S / math.sqrt(given["d_k"])
    A = ops.softmax(scaled, axis=-1)
    env.update(scores=S, scaled=scaled, masked=np.array(scaled), A=A, O=A @ env["V"])
    return env


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A cross-attention variant whose guarded mistakes are all told apart: level 1 from its table of
    admissible pairs (no check left), levels 2 and 3 checked by distinct's closed forms (about 1 in 35
    and 1 in 13 drafts are drawn again). Every variant fits the level's time budget (_fits_by_size)."""
    for _ in range(MAX_TRIES):
        draft = _draft(rng, level)
        if level != 1:
            collides, apart = distinct.check(draft.env, GUARDS)  # every part's separation is distinct.GAP
            if collides or not apart:
                continue
        if not _fits_by_size(level) and not _fits(draft, level):
            continue
        return replace(draft, memo={(_MEMO_KEY, GUARDS): False})  # the engine's redraw reads the answer
    raise RuntimeError(f"cross_attention: no variant within the time budget in {MAX_TRIES} draws")


def _fits(draft: Draft, level: int) -> bool:
    """The exact count within the level's budget (only asked when the heaviest variant would not fit)."""
    return _operations(draft.given, draft.parts).minutes <= budget.BUDGET_MINUTES[level]


@functools.cache
def _fits_by_size(level: int) -> bool:
    """Every variant of the level within its budget: the heaviest is (_heaviest_minutes)."""
    return _heaviest_minutes(level) <= budget.BUDGET_MINUTES[level]


def _heaviest_minutes(level: int) -> float:
    """The minutes of the heaviest variant of the level: every given entry the largest of its values
    (nonzero and, where the values allow, not ±1, so every product term is a multiply-add; all scores
    equal and nonzero, so every exponent needs the table and every weight is a fraction). The count only
    grows with such entries: no variant takes longer."""
    n_q, n_k, d_k, d_v, d = SIZES[level]
    if d == 0:
        top = max(spec(1).values) if level == 1 else 2
        given: dict = {"Q": np.ones((n_q, d_k)), "K": np.ones((n_k, d_k)), "V": np.full((n_k, d_v), float(top))}
    else:
        given = {"X": np.full((n_q, d), 2.0), "H": np.full((n_k, d), 2.0), "W_Q": np.ones((d, d_k)),
                 "W_K": np.ones((d, d_k)), "W_V": np.ones((d, d_v))}
    given.update(d_k=d_k, causal=False)
    names = list(PARTS) if d == 0 else [*FROM_X, *PARTS]
    return _operations(given, reference_parts(given, names)).minutes


def collides(ex: Exercise, guards: tuple[str, ...]) -> bool:
    """misconceptions.collides(ex, guards): the generator's own answer when it made the exercise (its
    memo), else distinct's closed forms when they cover the exercise, else misconceptions itself."""
    memo = ex.__dict__.setdefault("_memo", {})
    key = (_MEMO_KEY, tuple(guards))
    if key not in memo:
        env = pipeline.reference_env(ex)
        names = set(ex.part_names)
        covered = (pipeline.STEPS is steps.STEPS and set(guards) <= COVERED and not env.get("causal", False)
                   and "M" not in env and names <= {*FROM_X, *PARTS} and not names & set(ex.given)
                   and not {"scores", "scaled", "masked", "A"} & set(ex.given))
        memo[key] = (distinct.check(env, guards, misconceptions.parts_by_name(ex))[0] if covered
                     else misconceptions.collides(ex, guards=guards))
    return memo[key]


def _split(given: dict) -> tuple[dict, dict, dict]:
    """The queries' projection, the memory's (with H in the place of X), and attention from Q, K, V."""
    env = pipeline.run(given)
    queries = {"X": given["X"], "W_Q": given["W_Q"]}
    memory = {"X": given["H"], "W_K": given["W_K"], "W_V": given["W_V"]}
    attention = {"Q": env["Q"], "K": env["K"], "V": env["V"], "d_k": given["d_k"], "causal": False}
    return queries, memory, attention


def _operations(given: dict, parts) -> object:
    """The hand work: Q from X, K and V from H (the pipeline's count reads X for every projection), then
    attention from Q, K, V; the cells of every asked part."""
    names = [p.name for p in parts]
    if "H" not in given:
        return budget.count(given, names)
    queries, memory, attention = _split(given)
    return (budget.count(queries, ["Q"]) + budget.count(memory, ["K", "V"])
            + budget.count(attention, [n for n in names if n not in FROM_X]))


def operations(ex: Exercise):
    return _operations(ex.given, ex.parts)


# ---------------------------------------------------------------- worked solution


def solve(ex: Exercise) -> list[solutions.Step]:
    """From Q, K, V the registry's walk; from X and H the same walk with H written where K and V
    come from, then attention from the projections."""
    if "H" not in ex.given:
        return solutions.generic_solve(ex)
    places = {p.name: p.decimals for p in ex.parts}
    refs = {p.name: p.reference for p in ex.parts}
    queries, memory, attention = _split(ex.given)
    steps = solutions.pipeline_steps(queries, ["Q"], places, refs)
    ctx = solutions.build_context(memory, ["K", "V"], places, refs)
    ctx.symbols["X"] = "H"  # keys and values are projections of the memory
    steps += [solutions.BUILDERS[name](ctx, name) for name in ctx.shown]
    steps += solutions.pipeline_steps(attention, PARTS, places, refs)
    return steps


def aids(ex: Exercise) -> solutions.Aids:
    """The eˣ table and √d_k of the attention from Q, K, V, with the shapes of what is given."""
    from dataclasses import replace

    if "H" not in ex.given:
        return solutions.generic_aids(ex)
    _, _, attention = _split(ex.given)
    stand_in = replace(ex, given=attention, parts=tuple(p for p in ex.parts if p.name not in FROM_X))
    return replace(solutions.generic_aids(stand_in), shapes=solutions.shapes_of(ex))


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    return ("kind.cross_attention.prompt_memory" if "H" in ex.given else "kind.cross_attention.prompt",)


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"\operatorname{softmax}\!\left(\frac{Q_X K_H^{\top}}{\sqrt{d_k}}\right) V_H")
SHEET = SheetSection("forward", (
    Formula(r"[[Q | n_q | d_k]] = X W_Q, \qquad [[K | n_k | d_k]] = H W_K, \qquad [[V | n_k | d_v]] = H W_V",
            "formulas.cross_attention.sources"),
    Formula(r"[[A | n_q | n_k]] = \operatorname{softmax}_{\text{rows}}\!\left(\frac{Q K^{\top}}{\sqrt{d_k}}\right), "
            r"\qquad [[O | n_q | d_v]] = A V", "formulas.cross_attention.rectangle"),
))
