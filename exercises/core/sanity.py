"""Sanity checks on a learner's answer: properties any right answer has, whatever the numbers.

Rows of A sum to 1 and hold weights between 0 and 1, a hidden key's weight is exactly 0, −∞ appears
only above the diagonal of the causal mask, rows of G_scaled (and G_scores) sum to 0, an output value
lies within its column of V, the columns of G_V add up to those of G_O, … Which rules a part obeys is
read from its step in the registry (exercises.core.steps). Each failed property is a
warning (a Msg) shown beside the grade; it never changes the score. A warning names the learner's
cells (1-based rows and columns) and the rule, never a reference value.

    warnings = check(ex, {part name: the learner's matrix})   # matrices of any shape
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Container, Mapping

import numpy as np

from attention_core import causal_mask

from ..i18n import Msg, msg, plural
from . import pipeline
from . import steps as registry
from .model import Exercise, Part

# the reductions without ndarray's method wrappers (value.sum() is np.add.reduce(value, None) …)
_sum, _any, _all = np.add.reduce, np.logical_or.reduce, np.logical_and.reduce
_min, _max = np.minimum.reduce, np.maximum.reduce

MAX_LISTED = 4  # cells or rows named in one warning; "…" after that


def _label(part: Part) -> Msg:
    return msg(f"part.{part.name}")


def _listed(noun: str, items: list[str]) -> Msg:
    """'cell (1, 2)' or 'cells (1, 2), (2, 3)': the noun agrees with the count; at most MAX_LISTED items."""
    text = ", ".join(items[:MAX_LISTED]) + (", …" if len(items) > MAX_LISTED else "")
    return plural(f"sanity.where.{noun}", len(items), list=text)


def _places(indices: np.ndarray) -> Msg:
    """The cells of a boolean matrix, as 1-based (row, column) pairs."""
    return _listed("cells", [f"({i + 1}, {j + 1})" for i, j in zip(*np.nonzero(indices))])


def _numbers(indices: np.ndarray, noun: str) -> Msg:
    """The 1-based positions of a boolean vector: rows or columns."""
    return _listed(noun, [str(k + 1) for k in np.flatnonzero(indices)])


def _is_causal(ex: Exercise) -> bool:
    return bool(ex.given.get("causal", False))


_MASKS: dict[tuple[bool, int, int], np.ndarray] = {}  # (causal, rows, cols) -> read-only mask


def _hidden(ex: Exercise, value: np.ndarray) -> np.ndarray:
    """Cells a causal query may not see: keys after it (the n_q queries are the last of the n_k
    positions); none when there is no mask or more queries than keys. Read-only, made once a shape."""
    rows, cols = value.shape
    causal = _is_causal(ex) and rows <= cols
    key = (causal, rows, cols)
    mask = _MASKS.get(key)
    if mask is None:
        mask = causal_mask(rows, cols) if causal else np.zeros(value.shape, dtype=bool)
        mask.setflags(write=False)
        mask = _MASKS.setdefault(key, mask)
    return mask


def _row_slack(part: Part, count: int) -> float:
    """How far a sum of `count` cells may drift when each is rounded within the part's tolerance."""
    return count * part.tolerance + 1e-9


# ---------------------------------------------------------------- the checks, one per property
#
# Each check(ex, part, value, env) returns its warnings (Msgs). Called with say=False it only decides:
# True when it would warn, False when not, formatting nothing (what check() asks first, of the answer
# and of the reference: a rule that fails for the reference, as −∞ in a padding mask's M does, then
# costs no message). `finite`, when given, is whether every cell of `value` is finite (worked out once
# per matrix by check()).


def _finite(value: np.ndarray) -> bool:
    """Every cell finite: a finite sum says so at once (a NaN or ±∞ cell makes the sum NaN or ±∞);
    a sum that overflowed is asked cell by cell."""
    return math.isfinite(_sum(value, None)) or bool(_all(np.isfinite(value), None))


_ANY_HIDDEN: dict[tuple[bool, int, int], bool] = {}  # (causal, rows, cols) -> does the mask hide any cell


def _any_hidden(ex: Exercise, value: np.ndarray) -> bool:
    """_hidden(ex, value).any(), made once a shape."""
    rows, cols = value.shape
    key = (_is_causal(ex) and rows <= cols, rows, cols)
    found = _ANY_HIDDEN.get(key)
    if found is None:
        found = _ANY_HIDDEN[key] = bool(_hidden(ex, value).any())
    return found


def _infinities(ex: Exercise, part: Part, value: np.ndarray, env: Mapping, say: bool = True,
                finite: bool | None = None) -> list[Msg] | bool:
    """−∞ only in the masked scores (the step whose rules say "mask_infinities"), and there exactly
    above the diagonal of a causal mask."""
    masked = "mask_infinities" in _step_rules(part.name)
    if not say:
        if finite:  # no −∞ anywhere: only a mask that hides a cell misses one
            return masked and _any_hidden(ex, value)
        neg_inf = value == -np.inf
        if not masked:
            return bool(_any(neg_inf, None))
        hidden = _hidden(ex, value)
        return bool(_any(hidden & ~neg_inf, None) or _any(~hidden & neg_inf, None))
    neg_inf = value == -np.inf  # np.isneginf, without its wrapper
    if not masked:
        return [msg("sanity.inf_outside_mask", part=_label(part), cells=_places(neg_inf))] if neg_inf.any() else []
    hidden = _hidden(ex, value)
    found = []
    if (hidden & ~neg_inf).any():
        found.append(msg("sanity.mask_missing_inf", cells=_places(hidden & ~neg_inf)))
    if (~hidden & neg_inf).any():
        found.append(msg("sanity.mask_extra_inf", cells=_places(~hidden & neg_inf)))
    return found


def _weights(ex: Exercise, part: Part, value: np.ndarray, env: Mapping, say: bool = True,
             finite: bool | None = None) -> list[Msg] | bool:
    """Softmax weights: between 0 and 1, rows summing to 1, hidden keys at exactly 0."""
    if not (_finite(value) if finite is None else finite):
        return [] if say else False  # −∞ in A has its own warning
    tol = part.tolerance
    if not say:  # (finite cells: no NaN, so the least and the largest cell tell the range)
        if _min(value, None) < -tol or _max(value, None) > 1 + tol:
            return True
        if _any(np.abs(_sum(value, 1) - 1) > _row_slack(part, value.shape[1]), None):
            return True
        return _any_hidden(ex, value) and bool(_any(_hidden(ex, value) & (np.abs(value) > tol), None))
    found = []
    outside = (value < -tol) | (value > 1 + tol)
    if outside.any():
        found.append(msg("sanity.weights_range", part=_label(part), cells=_places(outside)))
    off = np.abs(value.sum(axis=1) - 1) > _row_slack(part, value.shape[1])
    if off.any():
        found.append(msg("sanity.rows_sum_one", part=_label(part), rows=_numbers(off, "rows")))
    seen = _hidden(ex, value) & (np.abs(value) > tol)
    if seen.any():
        found.append(msg("sanity.hidden_weight_zero", part=_label(part), cells=_places(seen)))
    return found


def _softmax_gradient(ex: Exercise, part: Part, value: np.ndarray, env: Mapping, say: bool = True,
                      finite: bool | None = None) -> list[Msg] | bool:
    """G_scaled (and G_scores, a constant multiple): rows sum to 0, hidden cells get no gradient."""
    if value.shape[0] != value.shape[1] or not (_finite(value) if finite is None else finite):
        return [] if say else False
    off = np.abs(_sum(value, 1)) > _row_slack(part, value.shape[1])
    if not say:
        return bool(_any(off, None)) or (_any_hidden(ex, value)
                                         and bool(_any(_hidden(ex, value) & (np.abs(value) > part.tolerance), None)))
    found = []
    if off.any():
        found.append(msg("sanity.rows_sum_zero", part=_label(part), rows=_numbers(off, "rows")))
    reached = _hidden(ex, value) & (np.abs(value) > part.tolerance)
    if reached.any():
        found.append(msg("sanity.hidden_gradient_zero", part=_label(part), cells=_places(reached)))
    return found


def _output(ex: Exercise, part: Part, value: np.ndarray, env: Mapping, say: bool = True,
            finite: bool | None = None) -> list[Msg] | bool:
    """O = A V with rows of A summing to 1: each O[i, c] is an average of column c of V."""
    V = env.get("V")
    if V is None or np.shape(V)[1] != value.shape[1] or not (_finite(value) if finite is None else finite):
        return [] if say else False
    low, high = _min(V, 0), _max(V, 0)  # (d_v,): np.min(V, axis=0) …
    outside = (value < low - part.tolerance) | (value > high + part.tolerance)
    if not say:
        return bool(_any(outside, None))
    return [msg("sanity.output_range", part=_label(part), cells=_places(outside))] if outside.any() else []


def _grad_v(ex: Exercise, part: Part, value: np.ndarray, env: Mapping, say: bool = True,
            finite: bool | None = None) -> list[Msg] | bool:
    """G_V = Aᵀ G_O with rows of A summing to 1: column sums of G_V equal those of G_O."""
    G_O, A = env.get("G_O"), env.get("A")
    if (G_O is None or A is None or np.shape(G_O)[1] != value.shape[1]
            or not (_finite(value) if finite is None else finite) or not _all_near_one(_sum(A, 1))):
        return [] if say else False
    off = np.abs(_sum(value, 0) - _sum(G_O, 0)) > _row_slack(part, value.shape[0])
    if not say:
        return bool(_any(off, None))
    return [msg("sanity.grad_v_columns", columns=_numbers(off, "columns"))] if off.any() else []


def _grad_embedding(ex: Exercise, part: Part, value: np.ndarray, env: Mapping, say: bool = True,
                    finite: bool | None = None) -> list[Msg] | bool:
    """G_E: a token that does not appear gets a zero row; the rows add up to the rows of G_X."""
    ids, G_X = env.get("token_ids"), env.get("G_X")
    if ids is None or not (_finite(value) if finite is None else finite):
        return [] if say else False
    found = []
    unused = np.ones(value.shape[0], dtype=bool)
    unused[np.asarray(ids, dtype=int)[np.asarray(ids, dtype=int) < value.shape[0]]] = False
    nonzero = unused & np.any(np.abs(value) > part.tolerance, axis=1)
    if nonzero.any():
        if not say:
            return True
        tokens = _listed("tokens", [str(t) for t in np.flatnonzero(nonzero)])  # token ids count from 0
        found.append(msg("sanity.unused_token", tokens=tokens))
    if G_X is not None and np.shape(G_X)[1] == value.shape[1]:
        off = np.abs(value.sum(axis=0) - np.sum(G_X, axis=0)) > _row_slack(part, value.shape[0])
        if off.any():
            if not say:
                return True
            found.append(msg("sanity.grad_e_total", columns=_numbers(off, "columns")))
    return found if say else False


def _all_near_one(a: np.ndarray) -> bool:
    """np.allclose(a, 1) without its wrapper: |a − 1| ≤ atol + rtol·1 in every cell (NaN and ±∞ are
    not close; a cell equal to 1 is within the tolerance already)."""
    return bool(_all(np.abs(a - 1.0) <= 1e-08 + 1e-05 * 1.0, None))


Check = Callable[..., list[Msg] | bool]  # (ex, part, value, env, say=True, finite=None)


@functools.lru_cache(maxsize=512)  # part names: a few dozen
def _registry_name(name: str) -> str:
    """The registry step a part's values are of: A_scaled, A1 … are softmax weights too."""
    if name.startswith("A_") or (name[:1] == "A" and name[1:].isdigit()):
        return "A"
    return name


@functools.lru_cache(maxsize=512)  # part names: a few dozen
def _step_rules(name: str) -> tuple[str, ...]:
    """The sanity rules the step registry gives a part of this name (none for a kind's own parts)."""
    step = registry.STEP_BY_NAME.get(_registry_name(name))
    return step.sanity if step is not None else ()


# the rules by the names the step registry gives them (AttentionStep.sanity); −∞ is checked everywhere
RULES: dict[str, Check] = {
    "mask_infinities": _infinities, "weights": _weights, "softmax_gradient": _softmax_gradient,
    "output": _output, "grad_v": _grad_v, "grad_embedding": _grad_embedding,
}


def _checks_for(name: str) -> list[Check]:
    """The properties a part of this name has: where −∞ may be, then its step's own rules."""
    return list(_checks(name))


@functools.lru_cache(maxsize=512)  # part names: a few dozen
def _checks(name: str) -> tuple[Check, ...]:
    return (_infinities, *[RULES[rule] for rule in _step_rules(name) if RULES[rule] is not _infinities])


# ---------------------------------------------------------------- entry point


def rules(ex: Exercise, part: Part) -> list[Check]:
    """The checks that hold for `part`'s own reference: only those are put to the learner's answer,
    so a right answer never gets a warning and a part that merely shares a name (the shapes kind's
    "A" is a shape, not weights) is left alone."""
    return [rule for rule in _checks(part.name) if _holds(ex, part, rule)]


def _holds(ex: Exercise, part: Part, rule: Check) -> bool:
    """Does `rule` hold for `part`'s own reference (no warning)? Worked out once per exercise."""
    memo = ex.__dict__.setdefault("_memo", {}).setdefault("sanity_holds", {})
    key = (part.name, rule)
    if key not in memo:
        memo[key] = not rule(ex, part, np.asarray(part.reference, dtype=float), pipeline.reference_env(ex), say=False)
    return memo[key]


def _matrix(value) -> np.ndarray:
    """np.atleast_2d(np.asarray(value, dtype=float)), at once for what is that already."""
    if type(value) is np.ndarray and value.ndim == 2 and value.dtype == np.float64:  # not a subclass
        return value
    return np.atleast_2d(np.asarray(value, dtype=float))


class Values(dict):
    """{part name: matrix} as check() takes it, with the names of the matrices whose every cell the
    caller knows to be finite (grading reads a plain matrix of decimals so): check() does not ask again."""

    def __init__(self, values: Mapping[str, np.ndarray], finite: Container[str] = ()):
        super().__init__(values)
        self.finite = finite


def check(ex: Exercise, values: Mapping[str, np.ndarray]) -> list[Msg]:
    """Warnings for the learner's `values` ({part name: matrix}, any shape); [] when all is plausible.
    `values` may be a Values, naming the matrices known to be finite.

    A part whose shape is wrong gets one warning when it is the transpose of the right shape and no
    other check (its cells do not line up with anything)."""
    by_name: dict[str, Part] = {}
    for part in ex.parts:
        by_name.setdefault(part.name, part)  # ex.part(name): the first of that name
    read = {name: _matrix(v) for name, v in values.items() if name in by_name and not by_name[name].is_choice}
    # the learner's own matrices stand in for the reference ones a check leans on (V for O …)
    env = {**pipeline.reference_env(ex), **{k: v for k, v in read.items() if v.shape == by_name[k].shape}}
    finite = values.finite if type(values) is Values else ()
    warnings: list[Msg] = []
    holds = ex.__dict__.setdefault("_memo", {}).setdefault("sanity_holds", {})  # as _holds keeps it
    for part in ex.parts:
        value = read.get(part.name)
        if value is None:
            continue
        if value.shape != part.shape:
            if value.shape == part.shape[::-1]:
                warnings.append(msg("sanity.transposed_shape", part=_label(part), rows=part.shape[0],
                                    cols=part.shape[1], got_rows=value.shape[0], got_cols=value.shape[1]))
            continue
        finite_cells = part.name in finite or _finite(value)
        if not finite_cells and _any(np.isnan(value), None):
            continue
        # the warnings of the rules that hold for the reference (rules(ex, part)), in their order; a rule
        # is put to the reference only when the answer fails it (a right answer costs no reference check),
        # and both are decided without a message: only a warning shown is formatted
        for rule in _checks(part.name):
            if holds.get((part.name, rule)) is False:
                continue  # known not to hold for the reference: not put to the answer
            if rule(ex, part, value, env, say=False, finite=finite_cells) and _holds(ex, part, rule):
                warnings.extend(rule(ex, part, value, env))
    return warnings
