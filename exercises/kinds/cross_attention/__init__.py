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

from attention_core import cross_attention, scaled_dot_product

from ... import solutions
from ...core import pipeline
from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.model import Exercise
from ...core.numbers import nonzero_matrix
from .._shared.apart import apart_from_rounded

ID = "cross_attention"
ORDER = 75
VERSION = 1
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("no_scaling", "scaled_by_dk", "softmax_columns", "no_exp", "scaled_times_sqrt_dk",
          "softmax_no_normalise", "cross_keys_from_queries", "cross_causal_mask")
# not guarded: K Qᵀ is n_k × n_q, a shape the grader names (and the transposed-shape warning); K and V from
# X are n_q rows, so that mistake is told apart in O, which has the right shape

# level: (queries n_q, keys n_k, d_k, d_v, width d of X and H (0: Q, K, V are given))
SIZES = {1: (1, 3, 4, 1, 0), 2: (2, 3, 2, 1, 0), 3: (2, 3, 2, 1, 2)}  # level 1: one query (5 minutes)
MAX_SCORE = 4  # |S|: the exponents come from a small set (the eˣ table lists them)
WEIGHTS = (-1, 0, 1)  # W_Q, W_K, W_V at level 3: projections are sums, not products
MAX_TRIES = 2000
FROM_X = ("Q", "K", "V")
PARTS = ["scores", "scaled", "A", "O"]


def _trace(given: dict):
    """attention_core's own forward pass of the variant (an oracle beside the step registry)."""
    if "H" in given:
        return cross_attention(given["X"], given["H"], given["W_Q"], given["W_K"], given["W_V"])
    return scaled_dot_product(given["Q"], given["K"], given["V"])


def _teaches(given: dict) -> bool:
    """Small whole scores, not all equal in any query's row (else its weights are uniform and say
    nothing), rows that differ between the queries, and values that differ (else every O is the same).

    S and V only, not _trace's whole pass: whole entries make every product exact, so these are the
    trace's own values (tests/test_kinds_decoder_fast.py)."""
    if "H" in given:
        Q, K, V = given["X"] @ given["W_Q"], given["H"] @ given["W_K"], given["H"] @ given["W_V"]
    else:
        Q, K, V = given["Q"], given["K"], given["V"]
    S = Q @ K.T  # (n_q, n_k)
    return bool(np.abs(S).max() <= MAX_SCORE and np.all(np.ptp(S, axis=1) > 0) and np.ptp(V) > 0
                and (S.shape[0] == 1 or not np.allclose(S[0], S[-1])))


def _draft(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    n_q, n_k, d_k, d_v, d = SIZES[level]
    values = (0, 1) if level == 1 else (-1, 0, 1)
    for _ in range(MAX_TRIES):
        if d == 0:
            given: dict = {"Q": nonzero_matrix(rng, (n_q, d_k), values),  # (n_q, d_k): the decoder's queries
                           "K": nonzero_matrix(rng, (n_k, d_k), values),  # (n_k, d_k): the encoder's keys
                           "V": nonzero_matrix(rng, (n_k, d_v), s.values if level == 1 else (-2, -1, 1, 2))}
            names = list(PARTS)
        else:
            given = {"X": nonzero_matrix(rng, (n_q, d), (-1, 0, 1, 2)),  # (n_q, d): the sequence that asks
                     "H": nonzero_matrix(rng, (n_k, d), (-1, 0, 1, 2)),  # (n_k, d): the memory it reads
                     "W_Q": nonzero_matrix(rng, (d, d_k), WEIGHTS), "W_K": nonzero_matrix(rng, (d, d_k), WEIGHTS),
                     "W_V": nonzero_matrix(rng, (d, d_v), WEIGHTS)}
            names = [*FROM_X, *PARTS]
        given.update(d_k=int(d_k), causal=False)
        if _teaches(given):
            return Draft(given=given, parts=reference_parts(given, names, s.decimals),
                         params={"n_q": n_q, "n_k": n_k, "d_k": d_k})
    raise RuntimeError(f"cross_attention: no hand-friendly variant in {MAX_TRIES} draws")


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A cross-attention that fits the level's time budget (drawn again when it does not)."""
    from ...core import budget, engine, misconceptions
    from ...core.grading import declared_decimals

    for _ in range(MAX_TRIES):
        draft = _draft(rng, level)
        ex = Exercise(kind=ID, seed=0, level=level, version=VERSION, given=draft.given, parts=tuple(draft.parts),
                      params=draft.params)
        careful = engine.default_chain(ex, {}, declared_decimals(ex))
        if _no_exp_clashes(ex, careful):  # the most frequent failure, seen without the catalog's mistakes
            continue
        # the engine's own check (misconceptions.collisions) made here too, on the same exercise, so its
        # mistakes are computed once for both; the budget, which rarely fails, last (the order of pure
        # checks changes no decision: the same draws are kept)
        if (apart_from_rounded(ex, GUARDS, lambda *_, known=careful: known)
                and not misconceptions.collides(ex, guards=GUARDS)
                and _operations(draft.given, draft.parts).minutes <= budget.BUDGET_MINUTES[level]):
            return replace(draft, memo=ex.__dict__.get("_memo"))  # the engine reuses the mistakes computed
    raise RuntimeError(f"cross_attention: no variant within the time budget in {MAX_TRIES} draws")


MARGIN = 1e-9  # far above the float error of a few operations on numbers below 10, far below the gap


def _no_exp_clashes(ex: Exercise, careful: dict[str, np.ndarray]) -> bool:
    """Would the redraw's checks surely fail on no_exp (weights z / Σz, no eˣ; at level 1 it fails more
    than all the others together)? Its A and O computed here (to within far less than MARGIN of the
    pipeline's) are within the gap less MARGIN of the answer (misconceptions.collisions) or of what a
    careful student writes (apart_from_rounded) in every cell. A True is a draw those checks reject
    too, so skipping it keeps the same exercises; a False decides nothing (they run as before)."""
    from ...core import misconceptions

    Z = ex.part("scaled").reference  # (n_q, n_k): no mask, so the softmax's input
    total = Z.sum(axis=1, keepdims=True)
    if not np.all(np.abs(total) > 1e-6):
        return False
    A = Z / total
    V = ex.part("V").reference if "V" in ex.part_names else np.asarray(ex.given["V"], dtype=float)
    for name, value in (("A", A), ("O", A @ V)):
        gap = misconceptions.separation(ex.part(name)) - MARGIN
        for target in (ex.part(name).reference, careful.get(name)):
            if target is not None and np.shape(target) == value.shape and np.abs(value - target).max() <= gap:
                return True
    return False


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
    from ...core import budget

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
