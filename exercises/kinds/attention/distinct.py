"""The redraw's question for attention, answered faster: does a guarded mistake give the right answer
of some part, or the same answer as another guarded mistake (misconceptions.collides(ex, GUARDS))?

The generic answer runs the step pipeline once per mistake (13 runs of up to five steps). Here every
mistake is made by the registry's own computation at its step (steps.<STEP>.mistakes), and the steps
after it, the same for all of them (S/√d_k, the mask, the row softmax, A V), run once on all the
mistaken values stacked: the same numpy operations cell by cell, so the same values bit for bit
(tests/test_fast_paths.py compares them with misconceptions.alternatives over many drafts). Anything
this chain does not cover (a mistake made at another step, or made twice) is left to the generic walk.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

import numpy as np

from attention_core import ops

from ...core import misconceptions, pipeline, steps
from ...core.model import Exercise

CHAIN = ("scores", "scaled", "masked", "A", "O")  # the steps a guarded mistake and its consequences run through

# mistake id -> {step name: the registry's Mistake record there}, in step order
MAKERS: dict[str, dict[str, object]] = {}
for _step in steps.STEPS:
    for _m in _step.mistakes:
        MAKERS.setdefault(_m.id, {}).setdefault(_step.name, _m)


# mistake id -> (the steps outside the chain that list it, ((position in CHAIN, its Mistake there), …))
_MAKERS_BY_PLACE: dict[str, tuple[tuple[str, ...], tuple[tuple[int, object], ...]]] = {
    mid: (tuple(name for name in makers if name not in CHAIN),
          tuple((position, makers[name]) for position, name in enumerate(CHAIN) if name in makers))
    for mid, makers in MAKERS.items()}


def _made_at(mid: str, values: dict, envs: dict) -> tuple[int, np.ndarray] | None | bool:
    """(position in CHAIN, value) where mistake `mid` is first made from the reference `values`, as the
    pipeline makes it (the values it can change left out); None when no step makes it; False when the
    chain cannot say (a step outside it lists the mistake and runs here)."""
    outside, inside = _MAKERS_BY_PLACE.get(mid, ((), ()))
    if any(name in values for name in outside):
        return False
    affected = pipeline.AFFECTED.get(mid, frozenset())
    for position, mistake in inside:
        # what the walk holds at this step: the values the mistake cannot change, and the steps before
        # this one recomputed right (the reference's own values: the same computations on the same inputs)
        env = envs.get((position, affected))  # the same for every mistake of the same reach
        if env is None:
            env = envs[(position, affected)] = {k: v for k, v in values.items()
                                                 if k not in affected or k in CHAIN[:position]}
        if mistake.applies(env):
            return position, np.asarray(mistake.compute(env), dtype=float)
    return None


def _made_again(mid: str, position: int, found: dict[str, np.ndarray], values: dict) -> bool:
    """Would a later step of the chain make mistake `mid` again on its own mistaken values?"""
    makers = MAKERS.get(mid, {})
    for name in CHAIN[position + 1:]:
        mistake = makers.get(name)
        if mistake is not None:
            affected = pipeline.AFFECTED.get(mid, frozenset())
            env = {k: v for k, v in values.items() if k not in affected}
            env.update({k: v for k, v in found.items() if CHAIN.index(k) < CHAIN.index(name)})
            if mistake.applies(env):
                return True
    return False


def _chain(ex: Exercise, guards: Iterable[str]) -> tuple | None:
    """(the mistakes' values down the chain, the parts by name) or None when the chain cannot compute them."""
    if pipeline.STEPS is not steps.STEPS:  # a test's patched registry: the generic walk reads it
        return None
    values = pipeline.reference_env(ex)
    if any(name not in values or name in ex.given for name in CHAIN) or "M" in values:
        return None  # a step of the chain given (never recomputed) or not computed, or a padding mask
    parts = {p.name: p for p in ex.parts}
    wanted = frozenset(parts)
    guards = [mid for mid in guards if pipeline.AFFECTED.get(mid, frozenset()) & wanted]
    reached = frozenset().union(*(pipeline.AFFECTED.get(mid, frozenset()) for mid in guards))
    if (reached & wanted) - set(CHAIN):
        return None  # a part after O (a gradient): not on this chain
    made: list[list[tuple[str, np.ndarray]]] = [[] for _ in CHAIN]  # by the position where a mistake is made
    envs: dict = {}
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for mid in guards:
            found = _made_at(mid, values, envs)
            if found is False:
                return None
            if found is not None:
                made[found[0]].append((mid, found[1]))
        try:
            levels = _run_chain(made, values)
        except ValueError:  # a shape the chain's products cannot combine: the generic walk skips it
            return None
        ids = levels[-1][0] if levels else []
        for position, found in enumerate(made):
            for mid, _ in found:
                if not any(later in MAKERS.get(mid, {}) for later in CHAIN[position + 1:]):
                    continue  # no later step of the chain lists it
                index = ids.index(mid)
                mistaken = {CHAIN[q]: levels[q][1][index] for q in range(position, len(CHAIN))}
                if _made_again(mid, position, mistaken, values):
                    return None
    return levels, parts


# (causal, d_k, n, the parts' names, the guards) -> ((position in CHAIN, mistake id, its Mistake), ...) in
# the order _chain finds them, or None when _chain cannot compute that shape
_PLANS: dict[tuple, tuple | None] = {}


def _plan_key(ex: Exercise, guards: tuple[str, ...]) -> tuple | None:
    """What decides, for an exercise of this kind, at which step of the chain each guarded mistake is first
    made (the registry's `applies` read d_k, the mask, the shapes and which values are there: nothing
    else), or None when the plan would not hold (a patched registry, a chain step given, a padding mask)."""
    if pipeline.STEPS is not steps.STEPS:
        return None
    given = ex.given
    if any(name in given for name in CHAIN) or "M" in given or "pad" in given:
        return None
    d_k = given.get("d_k")
    return (bool(given.get("causal", False)), d_k if isinstance(d_k, int) else None, tuple(sorted(given)),
            tuple((p.name, p.shape) for p in ex.parts), guards)


def _plan(ex: Exercise, guards: tuple[str, ...], key: tuple) -> tuple | None:
    """The plan of key's shape, found once by _chain's own walk on this exercise: each mistake's position
    and Mistake (_made_at), none made again later (_made_again)."""
    if key in _PLANS:
        return _PLANS[key]
    plan = None
    if key[1] is not None and _chain(ex, guards) is not None:
        values = pipeline.reference_env(ex)
        wanted = frozenset(p.name for p in ex.parts)
        kept = [mid for mid in guards if pipeline.AFFECTED.get(mid, frozenset()) & wanted]
        envs: dict = {}
        found = []
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for mid in kept:
                made = _made_at(mid, values, envs)
                if made is not None:
                    position = made[0]
                    found.append((position, mid, MAKERS[mid][CHAIN[position]]))
        plan = tuple(found)
    _PLANS[key] = plan
    return plan


def _planned_chain(ex: Exercise, guards: Iterable[str]) -> tuple | None:
    """_chain(ex, guards) from the plan of the exercise's shape: each guarded mistake computed by its
    Mistake at its step from the reference values (what _made_at hands it: the values before that step,
    the same), without looking up where each is made; None when there is no plan (then ask _chain)."""
    guards = tuple(guards)
    key = _plan_key(ex, guards)
    if key is None:
        return None
    plan = _plan(ex, guards, key)
    if plan is None:
        return None
    values = pipeline.reference_env(ex)
    made: list[list[tuple[str, np.ndarray]]] = [[] for _ in CHAIN]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for position, mid, mistake in plan:
            made[position].append((mid, np.asarray(mistake.compute(values), dtype=float)))
        try:
            levels = _run_chain(made, values)
        except ValueError:
            return None
    return levels, {p.name: p for p in ex.parts}


# the guards of the attention kind whose every computation _closed_chain writes out
CLOSED = frozenset(("transposed_scores", "no_scaling", "scaled_by_dk", "mask_diagonal", "mask_wrong_triangle",
                    "no_mask", "mask_after_softmax", "softmax_columns", "no_exp", "weights_transposed",
                    "mask_zero_instead_of_inf", "softmax_no_normalise", "scaled_times_sqrt_dk"))


@functools.lru_cache(maxsize=16)
def _triangles(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The cells mask_diagonal and mask_wrong_triangle hide in an n × n score matrix (steps._masked_where's
    _diagonal_and_above and _strictly_below of a square), read-only."""
    itself = np.triu(np.ones((n, n), dtype=bool))
    past = np.tril(np.ones((n, n), dtype=bool), k=-1)
    for mask in (itself, past):
        mask.setflags(write=False)
    return itself, past


def _closed_chain(ex: Exercise, guards: Iterable[str]) -> tuple | None:
    """_planned_chain(ex, guards) for the attention kind's own guards on its own exercises (Q, K, V given
    or projected from X, S square, d_k ≥ 2, the causal mask or none), each mistake written out with the
    very numpy operations of its Mistake in the step registry (steps.SCORES_MISTAKES … OUTPUT_MISTAKES:
    the same values bit for bit, tests/test_fast_paths.py and tests/test_kinds_attention_constructive.py
    hold them to the registry's walk) and those of one step stacked; None for anything else."""
    given = ex.given
    d_k, causal = given.get("d_k"), given.get("causal")
    if (pipeline.STEPS is not steps.STEPS or frozenset(guards) != CLOSED or not isinstance(d_k, int) or d_k < 2
            or not isinstance(causal, bool) or any(name in given for name in CHAIN) or "M" in given
            or "pad" in given):
        return None
    names = [p.name for p in ex.parts]
    expected = (["Q", "K", "V"] if "X" in given else []) + ["scores", "scaled"] + (["masked"] if causal else []) \
        + ["A", "O"]
    if names != expected:
        return None
    values = pipeline.reference_env(ex)
    S, Z, M, A, V = (values[k] for k in ("scores", "scaled", "masked", "A", "V"))
    n = S.shape[0]
    if S.shape != (n, n) or n < 2 or V.ndim != 2 or V.shape[0] != n:
        return None
    root = math.sqrt(d_k)
    carried = 8 if causal else 4  # the mistakes carried into the row softmax
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        T = ops.scores(values["K"], values["Q"])[None]  # transposed_scores: K Qᵀ
        ids = ["transposed_scores"]
        levels = [(list(ids), T)]
        # S/√d_k carried; no_scaling (a copy of S), scaled_by_dk (S / d_k), scaled_times_sqrt_dk (S √d_k):
        # each computed into its own row (the same operation on the same numbers as stacking them)
        scaled = np.empty((4, n, n))
        np.divide(T[0], root, out=scaled[0])
        scaled[1] = S
        np.divide(S, d_k, out=scaled[2])
        np.multiply(S, np.sqrt(d_k), out=scaled[3])
        ids += ["no_scaling", "scaled_by_dk", "scaled_times_sqrt_dk"]
        levels.append((list(ids), scaled))
        masked = np.empty((carried, n, n))
        masked[:4] = scaled
        if causal:
            hidden = ops.hidden_cells(n, n)
            masked[4:] = Z
            masked[:4, hidden] = -np.inf  # the mask on the four carried
            itself, past = _triangles(n)
            masked[5][itself] = -np.inf  # mask_diagonal: itself hidden too
            masked[6][past] = -np.inf  # mask_wrong_triangle: the past hidden instead
            masked[7][hidden] = 0.0  # mask_zero_instead_of_inf (masked[4] is no_mask: Z as it is)
            ids += ["no_mask", "mask_diagonal", "mask_wrong_triangle", "mask_zero_instead_of_inf"]
        levels.append((list(ids), masked))
        # the weights: the row softmax of each carried mistake (ops.softmax's operations, written out to work
        # in place in its rows: a change to ops.softmax must be made here too, and tests/test_fast_paths.py,
        # which holds these blocks to the pipeline's bit for bit, fails until it is), then softmax_columns,
        # no_exp, softmax_no_normalise (and mask_after_softmax)
        weights = np.empty((carried + (4 if causal else 3), n, n))
        rows = weights[:carried]
        np.subtract(masked, masked.max(axis=-1, keepdims=True), out=rows)
        np.exp(rows, out=rows)
        np.divide(rows, rows.sum(axis=-1, keepdims=True), out=rows)
        weights[carried] = ops.softmax(M, axis=0)
        finite = np.where(np.isfinite(M), M, 0.0)
        np.divide(finite, finite.sum(axis=1, keepdims=True), out=weights[carried + 1])
        np.exp(M, out=weights[carried + 2])
        ids += ["softmax_columns", "no_exp", "softmax_no_normalise"]
        if causal:
            late = weights[carried + 3]
            late[...] = ops.softmax(Z, axis=-1)
            late[ops.hidden_cells(n, n)] = 0.0
            ids.append("mask_after_softmax")
        levels.append((list(ids), weights))
        out = np.empty((len(weights) + 1, n, V.shape[1]))
        np.matmul(weights, V, out=out[:-1])
        np.matmul(A.T, V, out=out[-1])
        ids.append("weights_transposed")
        levels.append((list(ids), out))
    return levels, {p.name: p for p in ex.parts}


def _writable(block: np.ndarray) -> np.ndarray:
    """Per mistaken value of a block (k, ...): no NaN and no +∞ (misconceptions._alternative's test)."""
    if block.size == 0:
        return np.ones(len(block), dtype=bool)
    return block.reshape(len(block), -1).max(axis=1) < np.inf


def alternatives(ex: Exercise, guards: Iterable[str], planned: bool = True) -> dict[str, dict[str, np.ndarray]] | None:
    """misconceptions.alternatives(ex, guards) computed along the chain at once, in the chain's order (not
    memoised on ex); None when the chain cannot compute it (then ask misconceptions). `planned`: from the
    plan of its shape when there is one (_planned_chain), else found mistake by mistake (_chain)."""
    found = (_closed_chain(ex, guards) or _planned_chain(ex, guards)) if planned else None
    if found is None:
        found = _chain(ex, guards)
    if found is None:
        return None
    levels, parts = found
    out: dict[str, dict[str, np.ndarray]] = {}
    for position, (ids, block) in enumerate(levels):
        name = CHAIN[position]
        part = parts.get(name)
        if part is None or block is None or block.shape[1:] != part.shape:
            continue
        for row, ok in enumerate(_writable(block)):
            if ok:
                out.setdefault(ids[row], {})[name] = block[row]
    return {mid: dict(sorted(v.items(), key=lambda item: CHAIN.index(item[0]))) for mid, v in out.items()}


def collides(ex: Exercise, guards: Iterable[str]) -> bool:
    """misconceptions.collides(ex, guards), from the chain's blocks when it can compute them: per part, the
    values of every mistake that reaches it, stacked already, all parts compared in one table (_clash)."""
    found = _closed_chain(ex, guards) or _planned_chain(ex, guards) or _chain(ex, guards)
    if found is None:
        return misconceptions.collides(ex, guards)
    levels, parts = found
    asked = []  # (reference, the mistakes' values, the part's separation) of each part a mistake reaches
    for position, (_, block) in enumerate(levels):
        part = parts.get(CHAIN[position])
        if part is not None and block is not None and block.shape[1:] == part.shape:
            asked.append((part.reference, block, misconceptions.separation(part)))
    return _clash(asked)


@functools.lru_cache(maxsize=64)
def _pairs(sizes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The row indices (i, j), i < j, of every two rows of the same part in a table of parts of `sizes`
    rows each, one after the other."""
    first, second = [], []
    start = 0
    for size in sizes:
        i, j = np.triu_indices(size, k=1)
        first.append(i + start)
        second.append(j + start)
        start += size
    first, second = np.concatenate(first), np.concatenate(second)
    for table in (first, second):
        table.setflags(write=False)  # shared by every call of these sizes (lru_cache): never written
    return first, second


def _clash(asked: list[tuple[np.ndarray, np.ndarray, float]]) -> bool:
    """Whether some part's writable mistaken value (no NaN, no +∞) is within the part's gap of its
    reference or of another's: misconceptions.any_clash_in(reference, the writable values, gap) of each
    part, decided for all parts at once, in one table: each part's reference, then its mistakes' values,
    a row each, the cells of a smaller part padded with zeros (a difference of 0 never widens the widest),
    −∞ replaced by the stand-in misconceptions compares and a row no one can write set to NaN (never
    within a gap). The widest cell difference of every two rows of the same part is held to that part's
    gap: the same differences of the same numbers as _clash_by_size, so the same decision for the float64
    values the chain gives (tests/test_kinds_attention_constructive.py holds the two equal). A call with a
    reference that is not finite but for −∞, a gap that is not positive, or no cells at all is decided
    whole by _clash_by_size."""
    if not asked:
        return False
    sizes = tuple(1 + len(block) for _, block, _ in asked)
    gaps = tuple(float(gap) for _, _, gap in asked)
    width = max(ref.size for ref, _, _ in asked)
    if not width or not all(gap > 0 for gap in gaps):
        return _clash_by_size(asked)
    table = np.zeros((sum(sizes), width))
    start = 0
    for (ref, block, _), size in zip(asked, sizes):
        cells = ref.size
        table[start, :cells] = ref.reshape(cells)
        table[start + 1:start + size, :cells] = block.reshape(size - 1, cells)
        start += size
    kept = table.max(axis=1) < np.inf  # writable: no NaN (a NaN makes the largest NaN), no +∞
    first, second, references, pair_gaps = _table_pairs(sizes, gaps)
    if not kept[references].all():
        return _clash_by_size(asked)
    hidden = table == -np.inf
    if hidden.any():
        table[hidden] = -misconceptions._INFINITY_STAND_IN
    if not kept.all():
        table[~kept] = np.nan  # then no ∞ is left to subtract from itself: no warning, and never close
    widest = np.abs(table[first] - table[second]).max(axis=1)  # (pairs,)
    return bool((widest <= pair_gaps).any())


@functools.lru_cache(maxsize=64)
def _table_pairs(sizes: tuple[int, ...], gaps: tuple[float, ...]) -> tuple:
    """For _clash's table of parts of `sizes` rows each: every two rows of the same part (first, second),
    each part's reference row, and each pair's gap (one number when every part has the same)."""
    first, second = _pairs(sizes)
    references = np.cumsum((0,) + sizes[:-1])
    pair_gaps = gaps[0] if len(set(gaps)) == 1 else np.repeat(gaps, sizes)[first]
    for table in (references, pair_gaps):
        if isinstance(table, np.ndarray):
            table.setflags(write=False)  # shared by every call of these sizes (lru_cache): never written
    return first, second, references, pair_gaps


def _clash_by_size(asked: list[tuple[np.ndarray, np.ndarray, float]]) -> bool:
    """_clash as it was decided before, a table per number of cells (the reference of _clash's one table).
    The parts of the same number of cells are rows of one table (each part's reference, then its mistakes'
    values), −∞ replaced by the stand-in misconceptions compares, and the widest cell difference of every
    two rows of the same part is held to that part's gap. A reference with NaN or a gap that is not
    positive is left to misconceptions."""
    by_size: dict[int, list[tuple[np.ndarray, np.ndarray, float]]] = {}
    for ref, block, gap in asked:
        if np.isnan(ref).any() or not gap > 0:
            keep = _writable(block)
            if keep.any() and misconceptions.any_clash_in(ref, block[keep], gap):
                return True
            continue
        by_size.setdefault(ref.size, []).append((ref, block, gap))
    for cells, group in by_size.items():
        sizes = tuple(1 + len(block) for _, block, _ in group)
        pieces = []
        for ref, block, _ in group:
            pieces += [ref.reshape(1, cells), block.reshape(len(block), cells)]
        table = np.concatenate(pieces).T  # (cells, rows): a part's reference, then its mistakes' values
        kept = table.max(axis=0) < np.inf  # writable: no NaN (a NaN makes the largest NaN), no +∞
        hidden = np.isneginf(table)
        if hidden.any():
            table = np.where(hidden, -misconceptions._INFINITY_STAND_IN, table)
        first, second = _pairs(sizes)
        with np.errstate(invalid="ignore"):  # an unwritable row's NaN differences are never close (and not kept)
            widest = np.abs(table[:, first] - table[:, second]).max(axis=0)  # (pairs,)
        gaps = {g for _, _, g in group}
        close = widest <= (gaps.pop() if len(gaps) == 1 else np.repeat([g for _, _, g in group], sizes)[first])
        if not kept.all():
            close &= kept[first] & kept[second]
        if close.any():
            return True
    return False


def _run_chain(made: list[list[tuple[str, np.ndarray]]], values: dict) -> list[tuple[list[str], np.ndarray | None]]:
    """Every mistaken value carried down the chain, per step of CHAIN: (the ids made so far, their values
    at that step stacked (k, ...), None before the first). The steps after the one that made a mistake
    are computed as the registry computes them, on all the mistakes at once."""
    d_k, causal = int(values["d_k"]), bool(values.get("causal", False))
    V = np.asarray(values["V"], dtype=float)
    ids: list[str] = []
    levels = []
    carried: np.ndarray | None = None  # (k, n_q, n_k): the values of `ids` at the current step
    for position, name in enumerate(CHAIN):
        if carried is not None:  # the step, on every mistake made above it
            if name == "scaled":
                carried = carried / math.sqrt(d_k)  # ops.scale
            elif name == "masked":
                carried = np.array(carried, dtype=float)  # ops.apply_mask
                if causal:
                    carried[:, ops.hidden_cells(*carried.shape[1:])] = -np.inf
            elif name == "A":
                carried = ops.softmax(carried, axis=-1)  # the row softmax of each, as steps._softmax_rows
            elif name == "O":
                carried = carried @ V  # A V of each: numpy's product matrix by matrix, as ops.weighted_sum's
        new = made[position]
        if new:
            stacked = np.stack([value for _, value in new])
            if stacked.shape[1:] != np.shape(values[name]) or stacked.ndim != 3:
                raise ValueError("a mistaken value of another shape")
            ids.extend(mid for mid, _ in new)
            carried = stacked if carried is None else np.concatenate([carried, stacked])
        levels.append((list(ids), carried))
    return levels
