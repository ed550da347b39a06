"""Grading: parse what the learner gave, compare cell by cell, carry errors forward, name mistakes.

A format error (unreadable text, wrong shape) is not a wrong answer: nothing is graded and no
attempt is spent. A number is right when it is within 0.51 × 10^-d of the reference, d being the
part's decimals, widened by the cell's slack: how far rounding every value written on the way (aids,
eˣ, row sums and given fractions included) can move it (exercises.core.reach, DESIGN §4); integer
parts are exact; −∞ matches only −∞. A cell is also right when it follows, within the same tolerance,
from the learner's earlier right parts as written (through the kind's `chain`, unasked values exact or
rounded half-up); "consistent" is only for cells that follow from an earlier value that was not right.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..i18n import DEFAULT_LANG, Msg, msg, part_key, t
from . import misconceptions, reach, sanity
from .model import Exercise, Part, declared_decimals
from .parser import AnswerError, parse_answer, parse_grid
from .pipeline import AFFECTED

RIGHT, WRONG, CONSISTENT = "right", "wrong", "consistent"


@dataclass
class PartFeedback:
    name: str
    value: np.ndarray | None = None  # what the learner's answer reads as
    cells: np.ndarray | None = None  # bool: which cells are right
    status: np.ndarray | None = None  # per cell: "right", "wrong" or "consistent" (with earlier values)
    score: float | None = None  # share of right (or consistent) cells; None when not graded
    format_error: Msg | None = None  # the first problem reading the answer, or None
    cell_errors: dict[tuple[int, int], Msg] = field(default_factory=dict)  # 0-based (row, col)
    misconception: str | None = None
    explanation: Msg | None = None  # why the chosen option (or value) is wrong, from the kind's explain()
    label: str | None = None  # catalog key of the part's name (i18n.part_key), when it was graded

    @property
    def correct(self) -> bool:
        return self.cells is not None and bool(np.all(self.cells))

    @property
    def consistent(self) -> bool:
        return self.status is not None and bool(np.any(self.status == CONSISTENT))


@dataclass
class Feedback:
    parts: dict[str, PartFeedback]
    score: float | None  # mean of part scores; None when any part has a format error
    correct: bool
    misconception: str | None = None
    message: Msg | None = None
    warnings: list[Msg] = field(default_factory=list)  # sanity checks: shown, never scored

    @property
    def graded(self) -> bool:
        return self.score is not None

    def to_dict(self) -> dict[str, Any]:
        """A plain summary for storage (attempts, submissions)."""
        return {
            "score": self.score, "correct": self.correct, "misconception": self.misconception,
            "parts": {name: {"score": p.score, "misconception": p.misconception,
                             "format_error": p.format_error.to_dict() if p.format_error else None}
                      for name, p in self.parts.items()},
        }


# ---------------------------------------------------------------- reading answers


def _label(part: Part, kind: str | None = None) -> Msg:
    return msg(part_key(part.name, kind))


def _summary(right: int, consistent: int, total: int, score: float, parts: int) -> Msg:
    """The cells the score counts: right, and consistent with an earlier value (credited in full).
    With parts of different sizes the score (the mean over the parts) can differ from the cells'
    share; the message then says how the score is made."""
    summary = (msg("grade.some_wrong_consistent", right=right, consistent=consistent, total=total) if consistent
               else msg("grade.some_wrong", right=right, total=total))
    if round(100 * score) != round(100 * (right + consistent) / total):
        summary = msg("grade.score_mean_of_parts", summary=summary, parts=parts)
    return summary


def read_part(part: Part, answer: Any, kind: str | None = None) -> tuple[np.ndarray | None, PartFeedback]:
    """Turn one part's answer (text, grid of texts, numbers, option index) into a matrix; `kind`: the
    exercise's kind, for the part's name in messages."""
    label = _label(part, kind)
    fb = PartFeedback(part.name, label=label.key)
    try:
        if part.is_choice:
            value = _read_choice(part, answer)
        elif isinstance(answer, str):
            value = parse_answer(answer, msg("where.part", part=label))
        elif _is_text_grid(answer):
            value, errors = parse_grid(answer, label)
            if errors:
                fb.cell_errors = {rc: e.message for rc, e in errors.items()}
                first = next(iter(errors.values())).message
                fb.format_error = (first if len(errors) == 1 else
                                   msg("grade.cell_errors", count=len(errors), part=label, first=first))
                return None, fb
        else:
            value = np.atleast_2d(np.asarray(answer, dtype=float))
    except AnswerError as err:
        if err.row is not None and err.col is not None:
            fb.cell_errors = {(err.row - 1, err.col - 1): err.message}
        fb.format_error = err.message
        return None, fb
    except (TypeError, ValueError):
        fb.format_error = msg("parse.no_rows", where=label)
        return None, fb
    if value.shape != part.shape:
        fb.format_error = msg("grade.shape", part=label, expected_rows=part.shape[0],
                              expected_cols=part.shape[1], got_rows=value.shape[0], got_cols=value.shape[1])
        fb.value = value  # kept for the sanity checks (a transposed shape gets a word of its own)
        return None, fb
    fb.value = value
    return value, fb


def _is_text_grid(answer: Any) -> bool:
    return (isinstance(answer, (list, tuple)) and len(answer) > 0
            and all(isinstance(row, (list, tuple)) for row in answer)
            and any(isinstance(c, str) or c is None for row in answer for c in row))


def _read_choice(part: Part, answer: Any) -> np.ndarray:
    """An option's letter (A, B …, any case) or number (1, 2 …) as text, or its 0-based index as a
    number: an int, a whole float, or a 1×1 array such as the part's own reference [[2.0]]."""
    n = len(part.options)
    letters = [chr(ord("A") + i) for i in range(n)]
    where = msg("where.part", part=_label(part))
    if isinstance(answer, str):
        text = answer.strip().upper()
        if text in letters:
            return np.array([[float(letters.index(text))]])
        if text.isdigit() and 1 <= int(text) <= n:
            return np.array([[float(int(text) - 1)]])
    else:
        index = _option_index(answer)
        if index is not None and 0 <= index < n:
            return np.array([[float(index)]])
    raise AnswerError(msg("parse.choice", where=where, options=", ".join(letters)))


def _option_index(answer: Any) -> int | None:
    """A whole number given as int, numpy integer, float or a one-element array or list; else None."""
    if isinstance(answer, (list, tuple, np.ndarray)):
        try:
            array = np.asarray(answer)
        except ValueError:  # ragged nesting
            return None
        if array.size != 1 or array.ndim > 2:
            return None
        answer = array.reshape(()).item()
    if isinstance(answer, (bool, np.bool_)):
        return None  # True is not option 1
    if isinstance(answer, (int, np.integer)):
        return int(answer)
    if isinstance(answer, (float, np.floating)) and math.isfinite(answer) and float(answer).is_integer():
        return int(answer)
    return None


def _split_answer(ex: Exercise, answer: Any) -> tuple[dict[str, Any], Msg | None]:
    """{part name: answer}; a bare answer is accepted for a one-part exercise."""
    names = ex.part_names
    if isinstance(answer, Mapping):
        unknown = [k for k in answer if k not in names]
        if unknown:
            return {}, msg("grade.unknown_part", part=unknown[0], parts=", ".join(names))
        return dict(answer), None
    if len(names) == 1:
        return {names[0]: answer}, None
    return {}, msg("grade.several_parts", parts=", ".join(names))


# ---------------------------------------------------------------- grading


def _kind_hook(ex: Exercise, hook: str, part: Part, value: np.ndarray) -> Any:
    """A kind's own diagnose(ex, part, value) -> id or explain(ex, part, value) -> Msg, if it has one."""
    from .engine import KINDS  # imported here: engine imports every kind, and a kind may import grading

    kind = KINDS.get(ex.kind)
    hooks = None if kind is None else {"diagnose": kind.diagnose, "diagnose_shape": kind.diagnose_shape,
                                       "explain": kind.explain}
    function = None if hooks is None else hooks[hook]
    return function(ex, part, value) if function is not None else None


def rounding_places(ex: Exercise) -> int | None:
    """The places the rounding policy names: the most any part asks for; None when no part asks
    for decimals (whole numbers only, or choices)."""
    places = [p.decimals for p in ex.parts if not p.is_choice and p.decimals > 0]
    return max(places) if places else None


def rounding_policy(ex: Exercise, lang: str = DEFAULT_LANG) -> str | None:
    """The rounding policy every prompt states (screen, worksheets, CLI), or None when no part asks
    for decimals: round each value you write, compute on from what you wrote."""
    places = rounding_places(ex)
    return None if places is None else t("rounding.policy", lang, places=places)


def cell_tolerances(ex: Exercise) -> dict[str, np.ndarray]:
    """{part name: per cell, the distance from the exact key within which the cell is right on its own}: the
    part's tolerance widened by the cell's slack (what the rounding policy reaches), as `grade` judges it. For
    a grader that sees one cell at a time (the Moodle and QTI exports)."""
    slack = reach.of(ex, _kind_chain(ex), declared_decimals(ex))
    return {p.name: np.broadcast_to(p.tolerance + np.asarray(slack.get(p.name, 0.0), dtype=float), p.shape).copy()
            for p in ex.parts if not p.is_choice}


def _kind_chain(ex: Exercise):
    """The chain of the exercise's kind (the engine's default for a kind that has none)."""
    from .engine import KINDS, default_chain  # imported here: engine imports every kind, and a kind may import grading

    kind = KINDS.get(ex.kind)
    return kind.chain if kind is not None else default_chain


class _Candidates:
    """What a part "follows from" under the rounding policy: the kind's chain run on some of the
    learner's earlier values, once exact and once with every computed value rounded half-up to the
    exercise's declared decimals. Memoised by which earlier values were used."""

    def __init__(self, ex: Exercise):
        self.ex = ex
        self.chain = _kind_chain(ex)
        self.places = declared_decimals(ex)
        self.memo: dict[tuple, list[dict]] = {}

    def of(self, part: Part, earlier: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The part's value computed from `earlier` (exact, then rounded), where the chain gives one."""
        if self.chain is None or part.name in self.ex.given:
            return []
        key = tuple(earlier)
        if key not in self.memo:
            envs = []
            for rounding in (None, self.places):
                try:
                    envs.append(self.chain(self.ex, dict(earlier), rounding))
                except (ValueError, IndexError, KeyError):  # values that cannot combine: no candidate
                    continue
            self.memo[key] = envs
        found = []
        for env in self.memo[key]:
            value = env.get(part.name)
            if value is not None and np.shape(value) == part.shape:
                found.append(np.asarray(value, dtype=float))
        return found


def _best_match(value: np.ndarray, candidates: list[tuple[np.ndarray, float | np.ndarray]],
                among: np.ndarray | None = None) -> np.ndarray:
    """The cells of `value` matching the one candidate (value, tolerance) that matches most of them (of
    `among`, default all cells). One candidate, never a mix cell by cell: an answer that agrees with the
    exact value in one cell and with the rounded one in another follows neither way of computing."""
    among = np.ones(value.shape, dtype=bool) if among is None else among
    best = np.zeros(value.shape, dtype=bool)
    for candidate, tolerance in candidates:
        hit = among & misconceptions.cell_matches(value, candidate, tolerance)
        if hit.sum() > best.sum():
            best = hit
    return best


def _statuses(right: np.ndarray) -> np.ndarray:
    """Per cell "right" or "wrong" (an object array)."""
    return np.where(right, RIGHT, WRONG).astype(object)


def _diagnosis(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """misconceptions.diagnose(ex, part, value) for a part that is not right, each mistake computed only
    when it is asked: those that can change this part (pipeline.AFFECTED: a mistake's values are of the
    steps downstream of those making it), in catalog order, up to the first that explains `value`.
    (diagnose first asks whether `value` matches the reference: it does not, the part is not right.)"""
    tolerance = max(part.tolerance, misconceptions.DIAGNOSIS_TOLERANCE)
    for mid in misconceptions._candidate_ids(ex):
        if part.name not in AFFECTED.get(mid, ()):
            continue  # a value this mistake cannot change: not among its alternatives
        values = misconceptions.alternatives(ex, (mid,)).get(mid)
        if values is not None and part.name in values and misconceptions.matches(value, values[part.name], tolerance):
            return mid
    return None


def diagnose_part(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """The likely mistake behind a part that is not right: the kind's own diagnosis, else the catalog's."""
    return _kind_hook(ex, "diagnose", part, value) or (None if part.is_choice else _diagnosis(ex, part, value))


def shape_mistake(ex: Exercise, part: Part, value: np.ndarray) -> str | None:
    """A mistake the kind knows by the shape it gives (a cache not appended: t rows for t + 1), or None."""
    return _kind_hook(ex, "diagnose_shape", part, value)


def grade(ex: Exercise, answer: Any, partial: bool = False) -> Feedback:
    """Grade `answer` (text, array, grid of texts, or {part name: any of those}) against `ex`.

    `partial`: the parts not answered are left out (not graded, not counted, nothing to carry forward
    from them): check my work grades a learner's own exercise on the steps they wrote."""
    answers, problem = _split_answer(ex, answer)
    if problem is not None:
        return Feedback(parts={}, score=None, correct=False, message=problem)

    parts: dict[str, PartFeedback] = {}
    values: dict[str, np.ndarray] = {}
    for part in ex.parts:
        given = answers.get(part.name)
        if given is None and partial:
            continue
        if given is None:
            label = _label(part, ex.kind)
            parts[part.name] = PartFeedback(part.name, format_error=msg("grade.missing_part", part=label),
                                            label=label.key)
            continue
        value, fb = read_part(part, given, ex.kind)
        if value is None and fb.value is not None:  # another shape: a mistake the kind knows by it is named
            fb.misconception = shape_mistake(ex, part, fb.value)
            if fb.misconception:
                fb.format_error = msg("grade.explained", summary=fb.format_error,
                                      why=Msg(f"misconception.{fb.misconception}"))
        parts[part.name] = fb
        if value is not None:
            values[part.name] = value
    if any(p.format_error for p in parts.values()):
        return Feedback(parts=parts, score=None, correct=False, message=msg("grade.invalid"),
                        misconception=next((p.misconception for p in parts.values() if p.misconception), None),
                        warnings=_warnings(ex, parts))

    # Round what you write, then compute (DESIGN §4): a cell is right when it is within tolerance of
    # the exact reference or of the part recomputed from the learner's earlier parts that are entirely
    # right (unasked intermediates exact or rounded half-up); "consistent" only for a cell that follows
    # from all the learner's earlier values once one of them had a cell that is not right.
    candidates: _Candidates | None = None  # built the first time a part is not right as written
    earlier: dict[str, np.ndarray] = {}  # every earlier part, as the learner wrote it
    earlier_right: dict[str, np.ndarray] = {}  # the earlier parts with every cell right
    total = right_count = consistent_count = 0
    slack = reach.of(ex, _kind_chain(ex), declared_decimals(ex))  # per cell: how far the roundings the
    # policy allows on the way can move it (cell_tolerances: the same interval, for the exports)
    for part in ex.parts:
        if part.name not in parts:  # not answered (partial)
            continue
        fb, value = parts[part.name], values[part.name]
        # the exact key within the interval the policy reaches (its tolerance widened by the cell's slack); a
        # value computed from the learner's own earlier values carries their rounding already: its tolerance alone
        interval = part.tolerance + slack.get(part.name, 0.0)  # a number, or one per cell
        right = misconceptions.cell_matches(value, part.reference, interval)
        all_right = bool(right.all())
        status = _statuses(right)
        if not all_right and not part.is_choice:
            candidates = candidates or _Candidates(ex)
            followed = [(c, part.tolerance) for c in candidates.of(part, earlier_right)]
            right = _best_match(value, [(part.reference, interval), *followed])
            all_right = bool(right.all())
            status = _statuses(right)
            if not all_right and len(earlier) != len(earlier_right):
                carried = [(c, part.tolerance) for c in candidates.of(part, earlier)]
                status[_best_match(value, carried, among=~right)] = CONSISTENT
        if not all_right:
            fb.misconception = diagnose_part(ex, part, value)
            fb.explanation = _kind_hook(ex, "explain", part, value)
        fb.cells = right
        fb.status = status
        fb.score = 1.0 if all_right else float(np.mean(status != WRONG))  # (the mean of all True is 1.0)
        total += right.size
        right_count += right.size if all_right else int(right.sum())
        consistent_count += 0 if all_right else int(np.count_nonzero(status == CONSISTENT))
        earlier[part.name] = value
        if all_right:
            earlier_right[part.name] = value

    # `score` credits consistent cells in full (their part score counts status != WRONG) while
    # `correct` counts right cells only: a consistent cell is credited, not right. The message counts
    # both, so that it says what the score counts.
    scores = [p.score for p in parts.values()]
    score = 1.0 if scores and all(s == 1.0 for s in scores) else float(np.mean(scores))
    correct = right_count == total  # exactly when every cell of every part is right
    found = next((p.misconception for p in parts.values() if p.misconception), None)
    message = msg("grade.all_right") if correct else _summary(right_count, consistent_count, total, score, len(scores))
    why = next((p.explanation for p in parts.values() if p.explanation), None)
    if why is not None:
        message = msg("grade.explained", summary=message, why=why)
    return Feedback(parts=parts, score=score, correct=correct, misconception=found, message=message,
                    warnings=[] if correct else _warnings(ex, parts))


def _warnings(ex: Exercise, parts: dict[str, PartFeedback]) -> list[Msg]:
    """Properties any right answer has (rows of A sum to 1 …), checked on what was read: warnings only,
    never scored. grade asks none for an answer right in every cell: it is right, and all a rule could
    still find there is the cells' own rounding within their tolerance (G_V's column sums against G_O's,
    both typed, can differ by up to twice the rule's slack): a false alarm."""
    read = {name: p.value for name, p in parts.items() if p.value is not None}
    return sanity.check(ex, sanity.Values(read))
