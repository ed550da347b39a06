"""Cross-attention: queries from one sequence, keys and values from another (n_q ≠ n_k).

    S = Q Kᵀ (n_q × n_k),  Z = S / √d_k,  A = softmax(Z) along each row (over the n_k keys),  O = A V

Levels 1–2 give Q, K, V (a decoder's queries, an encoder's keys and values); level 3 gives X (n_q × d)
and a memory H (n_k × d) and asks for the projections too: Q = X W_Q, but K = H W_K and V = H W_V.
No mask: every query may look at every memory position. The mistakes of this kind: keys and values
taken from the queries' own sequence X (self-attention), a softmax down the columns of the rectangle,
a causal mask (j > i) applied where nothing lies in the future.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ... import solutions
from ...core import budget, pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.levels import spec
from ...core.model import Exercise
from ...core.numbers import matrices, no_zero_lines
from ...core.sampler import Batch
from ...i18n import msg
from ...solutions.aids import ExpSeries

ID = "cross_attention"
ORDER = 75
VERSION = 4
LEVELS = (1, 2, 3)
# the eˣ aid: a fixed grid per level covering every exponent the level's problems need (never just those)
EXP_GRID = {1: (ExpSeries(1, 2, 0, 4),), 2: (ExpSeries(1, 2, -2, 2, root=2),), 3: (ExpSeries(1, 2, -4, 4, root=2),)}
# every catalogued mistake that can apply to this kind's parts: the sampler keeps them apart
GUARDS = ("no_scaling", "scaled_by_dk", "softmax_columns", "no_exp", "scaled_times_sqrt_dk",
          "softmax_no_normalise", "cross_keys_from_queries", "cross_causal_mask")
# not guarded: K Qᵀ is n_k × n_q, a shape the grader names (and the transposed-shape warning); K and V from
# X are n_q rows, so that mistake is told apart in O, which has the right shape

# level: (queries n_q, keys n_k, d_k, d_v, width d of X and H (0: Q, K, V are given))
SIZES = {1: (1, 3, 4, 1, 0), 2: (2, 3, 2, 1, 0), 3: (2, 3, 2, 1, 2)}  # level 1: one query (5 minutes)
MAX_SCORE = 4  # |S|: the exponents come from a small set (the eˣ table lists them)
KEYS = (0, 1)  # K at level 1 (the one query is all ones, so S_j counts the ones of key j)
ENTRIES = (-1, 0, 1)  # Q and K at level 2, W_Q, W_K, W_V at level 3: products are sums
VALUES = {1: (1, 2), 2: (-2, -1, 1, 2)}  # V at levels 1-2: no zero (a zero value adds nothing to O)
INPUTS = (-1, 0, 1, 2)  # X and H at level 3
FROM_X = ("Q", "K", "V")
PARTS = ["scores", "scaled", "A", "O"]
BATCH = 64


def draw(rng: np.random.Generator, level: int) -> Batch:
    """A batch of candidates: Q, K, V at levels 1-2 (level 1's one query all ones), X, H and ternary
    weights at level 3."""
    n_q, n_k, d_k, d_v, d = SIZES[level]
    if d == 0:
        Q = (np.ones((BATCH, n_q, d_k)) if level == 1  # (B, 1, d_k)
             else matrices(rng, BATCH, (n_q, d_k), ENTRIES))  # (B, n_q, d_k)
        given = {"Q": Q, "K": matrices(rng, BATCH, (n_k, d_k), KEYS if level == 1 else ENTRIES),  # (B, n_k, d_k)
                 "V": matrices(rng, BATCH, (n_k, d_v), VALUES[level])}  # (B, n_k, d_v)
        names = list(PARTS)
    else:
        given = {"X": matrices(rng, BATCH, (n_q, d), INPUTS),  # (B, n_q, d)
                 "H": matrices(rng, BATCH, (n_k, d), INPUTS),  # (B, n_k, d)
                 **{w: matrices(rng, BATCH, (d, width), ENTRIES)  # (B, d, d_k or d_v)
                    for w, width in (("W_Q", d_k), ("W_K", d_k), ("W_V", d_v))}}
        names = [*FROM_X, *PARTS]
    stacked = tuple(given)
    given.update(d_k=d_k, causal=False)
    return Batch(given, stacked, names, params={"n_q": n_q, "n_k": n_k, "d_k": d_k},
                 keep=lambda env: _hand_friendly(env, stacked), decimals=spec(level).decimals)


def _hand_friendly(env, drawn: tuple[str, ...]) -> np.ndarray:
    """Per candidate: no zero row or column in a drawn matrix (a single row or column: no zero at all);
    small whole scores, not all equal in any query's row (else its weights are uniform and say nothing),
    rows that differ between the queries, and values that differ (else every output is the same)."""
    ok = np.logical_and.reduce([no_zero_lines(env[name]) for name in drawn])
    S, V = env["scores"], env["V"]  # (B, n_q, n_k), (B, n_k, d_v); whole numbers: compared exactly
    ok &= np.abs(S).max(axis=(1, 2)) <= MAX_SCORE
    ok &= (S.max(axis=2) > S.min(axis=2)).all(axis=1)
    ok &= (S[:, 0] != S[:, -1]).any(axis=1) | (S.shape[1] == 1)
    return ok & (V.max(axis=(1, 2)) > V.min(axis=(1, 2)))


def _split(given: dict) -> tuple[dict, dict, dict]:
    """The queries' projection, the memory's (with H in the place of X), and attention from Q, K, V."""
    env = pipeline.run(given)
    queries = {"X": given["X"], "W_Q": given["W_Q"]}
    memory = {"X": given["H"], "W_K": given["W_K"], "W_V": given["W_V"]}
    attention = {"Q": env["Q"], "K": env["K"], "V": env["V"], "d_k": given["d_k"], "causal": False}
    return queries, memory, attention


def operations(ex: Exercise) -> budget.Operations:
    """The hand work: Q from X, K and V from H (the pipeline's count reads X for every projection), then
    attention from Q, K, V; the cells of every asked part."""
    names = list(ex.part_names)
    if "H" not in ex.given:
        return budget.count(ex.given, names)
    queries, memory, attention = _split(ex.given)
    return (budget.count(queries, ["Q"]) + budget.count(memory, ["K", "V"])
            + budget.count(attention, [n for n in names if n not in FROM_X]))


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
    steps += [replace(solutions.BUILDERS[name](ctx, name), note=msg(f"kind.cross_attention.note.{name}"))
              for name in ctx.shown]
    steps += solutions.pipeline_steps(attention, PARTS, places, refs)
    return steps


def aids(ex: Exercise) -> solutions.Aids:
    """The eˣ table and √d_k of the attention from Q, K, V, with the shapes of what is given."""
    if "H" not in ex.given:
        return solutions.generic_aids(ex)
    _, _, attention = _split(ex.given)
    stand_in = replace(ex, given=attention, parts=tuple(p for p in ex.parts if p.name not in FROM_X))
    return replace(solutions.generic_aids(stand_in), shapes=solutions.shapes_of(ex))


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    if "H" in ex.given:
        return ("kind.cross_attention.prompt_memory",)
    return ("kind.cross_attention.prompt_one_query" if ex.params["n_q"] == 1 else "kind.cross_attention.prompt",)


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("around", r"\operatorname{softmax}\!\left(\frac{Q_X K_H^{\top}}{\sqrt{d_k}}\right) V_H")
SHEET = SheetSection("forward", (
    Formula(r"[[Q | n_q | d_k]] = X W_Q, \qquad [[K | n_k | d_k]] = H W_K, \qquad [[V | n_k | d_v]] = H W_V",
            "formulas.cross_attention.sources"),
    Formula(r"[[A | n_q | n_k]] = \operatorname{softmax}_{\text{rows}}\!\left(\frac{Q K^{\top}}{\sqrt{d_k}}\right), "
            r"\qquad [[O | n_q | d_v]] = A V", "formulas.cross_attention.rectangle"),
))
