"""The misconception catalog: each entry is a wrong computation that a step can make.

Each step of the registry (exercises.core.steps) lists its mistakes as named alternative computations;
``pipeline.AFFECTED`` is derived from those lists. After grading, every misconception that applies to
a part is recomputed from the exercise's given data (``pipeline.run`` with that one mistake). If the
learner's value matches it and not the reference, the feedback names it. An explanation for each id
is in the message catalog under ``misconception.<id>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from . import pipeline
from .model import Exercise, Part

MisconceptionId = str  # the id of a Mistake of a step record (exercises.core.steps)
# diagnosis tries the mistakes in catalog order: DESIGN §5's table first, in its order, then every other
# mistake of the step records in step order
DESIGN_ORDER = ("transposed_scores", "no_scaling", "scaled_by_dk", "mask_diagonal", "mask_wrong_triangle", "no_mask",
                "mask_after_softmax", "softmax_columns", "no_exp", "weights_transposed", "grad_a_transposed",
                "grad_v_no_transpose", "softmax_grad_missing_term", "grad_scores_no_scale", "grad_k_no_transpose",
                "embedding_grad_no_accumulate")
CATALOG: tuple[str, ...] = tuple(dict.fromkeys([*DESIGN_ORDER, *(m.id for s in pipeline.STEPS for m in s.mistakes)]))


DIAGNOSIS_TOLERANCE = 0.51e-2  # a wrong method rounded to 2 decimals is still recognised
ROUNDING = 0.5e-2  # the most that rounding to 2 decimals moves a value


def alternatives(ex: Exercise, mistakes: Iterable[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """{misconception id: {part name: the value that mistake gives}} for the mistakes that apply,
    among `mistakes` only when given (a kind's GUARDS), else the whole catalog; in catalog order.

    Memoised on the exercise (exercises are immutable), mistake by mistake: the redraw asks for the
    kind's guards only, and the rest of the catalog is computed when a diagnosis first needs it."""
    memo = ex.__dict__.setdefault("_memo", {})
    known: dict[str, dict[str, np.ndarray] | None] = memo.setdefault("alternative_by_id", {})
    wanted_ids = None if mistakes is None else set(mistakes)
    ids = _candidate_ids(ex)
    found: dict[str, dict[str, np.ndarray]] = {}
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # once, not once per mistake's run
        for mid in ids:
            if wanted_ids is not None and mid not in wanted_ids:
                continue
            if mid not in known:
                known[mid] = _alternative(ex, mid)
            if known[mid] is not None:
                found[mid] = known[mid]
    return found


def _candidate_ids(ex: Exercise) -> tuple[str, ...]:
    """The catalog's mistakes some step of which leads to a part of this exercise, in catalog order."""
    memo = ex.__dict__.setdefault("_memo", {})
    if "alternative_ids" not in memo:
        wanted, here = set(ex.part_names), pipeline.computable(ex.given)
        memo["alternative_ids"] = tuple(mid for mid in CATALOG if pipeline.AFFECTED.get(mid, frozenset()) & wanted
                                        and not pipeline.MAKERS[mid].isdisjoint(here))  # a step making it runs here
    return memo["alternative_ids"]


def parts_by_name(ex: Exercise) -> dict[str, Part]:
    """The exercise's parts by name (memoised: ex.part is a walk over the parts)."""
    memo = ex.__dict__.setdefault("_memo", {})
    if "parts_by_name" not in memo:
        memo["parts_by_name"] = {p.name: p for p in ex.parts}
    return memo["parts_by_name"]


def _alternative(ex: Exercise, mid: str) -> dict[str, np.ndarray] | None:
    """{part name: the value mistake `mid` gives} (None when it changes no part, or none writably).
    Called inside np.errstate(divide, invalid, over = "ignore") (alternatives)."""
    parts = parts_by_name(ex)
    env = pipeline.run_mistake(ex.given, pipeline.reference_env(ex), mid, until=parts.keys(), ignoring_errors=True,
                               only_if_made=True)
    if not env.used:
        return None  # the mistake is not on the way to any part of this exercise
    # a value no one can write (NaN, +∞: a row of −∞ through the softmax) names nothing, nor one of
    # another shape than the part's (K Qᵀ of a rectangle): that is a shape error, not an answer
    values = {}
    tainted = env.tainted
    for name, part in parts.items():
        if name not in tainted:
            continue
        value = env[name]
        # no NaN and no +∞: the largest cell is below +∞ (a NaN makes the largest NaN)
        if value.shape == part.shape and (value.size == 0 or value.max() < np.inf):
            values[name] = value
    return values or None


def matches(value: np.ndarray, target: np.ndarray, tolerance: float) -> bool:
    """Same shape and every cell within tolerance (−∞ only matches −∞; NaN matches nothing)."""
    value, target = np.asarray(value, dtype=float), np.asarray(target, dtype=float)
    if value.shape != target.shape or np.isnan(target).any():
        return False
    return bool(np.all(cell_matches(value, target, tolerance)))


def cell_matches(value: np.ndarray, target: np.ndarray, tolerance: float) -> np.ndarray:
    """Per-cell closeness with infinities compared exactly."""
    value, target = np.asarray(value, dtype=float), np.asarray(target, dtype=float)
    both_inf = np.isinf(value) & np.isinf(target) & (np.sign(value) == np.sign(target))
    finite = np.isfinite(value) & np.isfinite(target)
    with np.errstate(invalid="ignore"):
        close = np.abs(np.where(finite, value - target, 0.0)) <= tolerance
    return both_inf | (finite & close)


def diagnose(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """The id of the misconception that explains `value` for `part`, or None."""
    tolerance = max(part.tolerance, DIAGNOSIS_TOLERANCE)
    if matches(value, part.reference, part.tolerance):
        return None
    for mid, values in alternatives(ex).items():
        if part.name in values and matches(value, values[part.name], tolerance):
            return mid
    return None


GAP = DIAGNOSIS_TOLERANCE + ROUNDING  # the separation of a part graded to 2 decimals or exactly


def separation(part: Part) -> float:
    """How far apart, in some cell, two answers to `part` must be so that each of them, exact or
    rounded to 2 decimals, is never taken for the other."""
    return max(part.tolerance, DIAGNOSIS_TOLERANCE) + ROUNDING


def separation_for(decimals: int) -> float:
    """separation() of a part graded to `decimals` places (0: exactly)."""
    tolerance = 1e-9 if decimals == 0 else 0.51 * 10.0 ** (-decimals)
    return max(tolerance, DIAGNOSIS_TOLERANCE) + ROUNDING


def apart(a: np.ndarray, b: np.ndarray, gap: float) -> bool:
    """Some cell differs by more than `gap` (or is −∞ in one and not in the other)."""
    return not bool(np.all(cell_matches(a, b, gap)))


def clashes(reference: np.ndarray, alts: Mapping[str, np.ndarray], gap: float = GAP) -> list[str]:
    """The ids among `alts` ({id: the value that mistake gives}) that cannot be told apart: their value is
    within `gap` of the reference in every cell ("id"), or of another mistake's of the same shape
    ("first+second", pairs in the order of itertools.combinations). Values no one can write (NaN) are left
    out; −∞ compares equal to −∞ only."""
    usable = {mid: comparable(value) for mid, value in alts.items() if not np.isnan(np.asarray(value, float)).any()}
    ref = comparable(reference)
    names = list(usable)
    found = [mid for mid in names if usable[mid].shape == ref.shape and _within(usable[mid], ref, gap)]
    found += [f"{first}+{second}" for i, first in enumerate(names) for second in names[i + 1:]
              if usable[first].shape == usable[second].shape and _within(usable[first], usable[second], gap)]
    return found


def any_clash(reference: np.ndarray, alts: Mapping[str, np.ndarray] | Iterable[np.ndarray], gap: float = GAP) -> bool:
    """bool(clashes(reference, alts, gap)); `alts`: {id: value}, or the values alone."""
    return bool(clashes(reference, alts if isinstance(alts, Mapping) else dict(enumerate(alts)), gap))


def _within(a: np.ndarray, b: np.ndarray, gap: float) -> bool:
    """Every cell of a within gap of b's (an empty value is never far)."""
    return a.size == 0 or bool(np.abs(a - b).max() <= gap)


_INFINITY_STAND_IN = 1e15  # −∞ compares equal to −∞ and far from every number a mistake gives


def comparable(value: np.ndarray) -> np.ndarray:
    """`value` with ±∞ as a far stand-in, so that differences compare (−∞ equals only −∞)."""
    value = np.asarray(value, dtype=float)
    infinite = np.isinf(value)
    return np.where(infinite, np.sign(value) * _INFINITY_STAND_IN, value) if infinite.any() else value


def by_part(ex: Exercise, guards: Iterable[str] | None) -> dict[str, dict[str, np.ndarray]]:
    """{part name: {mistake id: the value it gives}} of the mistakes that apply (`guards` only, if given)."""
    by_part: dict[str, dict[str, np.ndarray]] = {}
    for mid, values in alternatives(ex, guards).items():
        for name, alt in values.items():
            by_part.setdefault(name, {})[mid] = alt
    return by_part


def collisions(ex: Exercise, guards: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """(misconception, part) pairs that cannot be told apart: the mistake gives the right answer,
    or the same answer as another mistake (then the id is "first+second"). Such a variant is
    redrawn by the generator. `guards`: only these mistakes (the kind's GUARDS), else the catalog."""
    parts = parts_by_name(ex)
    return [(mid, name) for name, alts in by_part(ex, guards).items()
            for mid in clashes(parts[name].reference, alts, separation(parts[name]))]


def collides(ex: Exercise, guards: Iterable[str] | None = None) -> bool:
    """bool(collisions(ex, guards)), stopping at the first part with a clash (the redraw's question);
    memoised on the exercise (a kind that asked it hands its memo to the engine, which asks again)."""
    memo = ex.__dict__.setdefault("_memo", {})
    key = ("collides", None if guards is None else tuple(guards))
    if key not in memo:
        memo[key] = clash_by_part(parts_by_name(ex), by_part(ex, guards))
    return memo[key]


def clash_by_part(parts: Mapping[str, Part], by_part: Mapping[str, Mapping[str, np.ndarray]]) -> bool:
    """collides() from mistakes' values a kind computed itself ({part name: {id: value}}; `parts`: the
    Parts by name): some part's mistake, of the part's shape, within its separation of its reference or
    of another's. A kind that computes some guarded mistakes itself (the registry's expressions) can so
    refuse a variant early and draw the next, as the engine's redraw would: every mistake it checks
    must apply as the registry says, or it refuses a variant the engine keeps."""
    for name, alts in by_part.items():
        part = parts[name]
        same = {mid: value for mid, value in alts.items() if np.shape(value) == part.shape}
        if any_clash(part.reference, same, separation(part)):
            return True
    return False
