"""Check my work: a learner's own inputs and hand-computed steps, checked step by step.

    report = check_work({"X": "1 0; 0 1; 1 1", "W_Q": "1 0; 0 1", …}, {"scores": "…", "A": "…"}, causal=True)

Every claimed step follows grading's rounding policy ("round what you write, then compute"): it is
right when it matches the true value computed from the learner's inputs, or the value that step gives
when done right on the learner's own earlier claimed steps that are right (as they wrote them, so a
learner who rounds and carries on is right). The first step with a cell matching neither is the first
error; a later cell that follows from the learner's own earlier values once one of them was wrong is
"consistent with it" (errors carried forward, as in grading). A likely mistake is looked up in the
misconception catalog (pipeline.run with that mistake, on the learner's own earlier values). This is
not an exam: the report holds the correct value of every step. All messages are catalog Msgs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..i18n import DEFAULT_LANG, Msg, catalog, msg, plural
from . import misconceptions, pipeline
from . import steps as registry
from .grading import CONSISTENT, RIGHT, WRONG
from .model import Part
from .numbers import decimals_for
from .parser import AnswerError, parse_answer

# the step lists, read from the step registry: the claimable steps forward and backward, the
# projections' inputs (X, W_Q, W_K, W_V) and outputs (Q, K, V), and the backward steps needing X's path
FORWARD: tuple[str, ...] = registry.of_direction("forward", checkable=True)
BACKWARD: tuple[str, ...] = registry.of_direction("backward", checkable=True)
FROM_QKV: tuple[str, ...] = tuple(name for name in FORWARD if "X" in registry.STEP_BY_NAME[name].inputs)
FROM_X: tuple[str, ...] = tuple(dict.fromkeys(i for name in FROM_QKV for i in registry.STEP_BY_NAME[name].inputs))
NEEDS_X: tuple[str, ...] = tuple(name for name in BACKWARD if set(FROM_X) & set(registry.STEP_BY_NAME[name].inputs))
ORDER = [s.output for s in pipeline.STEPS]  # the pipeline's step order: forward, then backward
MAX_SIZE = 8  # rows and columns of any matrix: the sizes a hand calculation has (n, d ≤ 8)
MAX_BOXES = 40  # inputs and claimed steps read in one check


@dataclass
class StepCheck:
    """One claimed step: the learner's value beside the true one and the one their own values give."""

    name: str
    value: np.ndarray  # what the learner claimed
    true: np.ndarray  # the step from the learner's inputs, every step done right
    own: np.ndarray | None  # the step done right on the learner's own earlier claimed values
    status: np.ndarray  # per cell: "right", "consistent" or "wrong"
    decimals: int  # 0: exact whole numbers
    mistake: str | None = None  # a catalogued mistake that gives the learner's value

    @property
    def own_differs(self) -> bool:
        """The learner's own earlier values lead somewhere else than the truth (worth showing)."""
        return self.own is not None and not np.allclose(self.own, self.true, atol=1e-9, equal_nan=True)

    @property
    def verdict(self) -> str:
        """right: every cell right; consistent: no cell wrong; wrong: some cell matches neither."""
        if (self.status == RIGHT).all():
            return RIGHT
        return WRONG if (self.status == WRONG).any() else CONSISTENT


@dataclass
class Report:
    steps: dict[str, StepCheck] = field(default_factory=dict)  # the claimed steps, in pipeline order
    reference: dict[str, np.ndarray] = field(default_factory=dict)  # the correct value of every step
    inputs: dict[str, np.ndarray] = field(default_factory=dict)  # the inputs as read
    errors: list[Msg] = field(default_factory=list)  # problems with the inputs: nothing was checked
    claim_errors: dict[str, Msg] = field(default_factory=dict)  # claimed steps that could not be read
    first_error: str | None = None
    consistent_after: list[str] = field(default_factory=list)  # later steps right from the learner's values
    wrong_after: list[str] = field(default_factory=list)  # later steps wrong even from the learner's values
    likely_mistake: str | None = None  # misconception id for the first error
    causal: bool = False
    d_k: int | None = None

    @property
    def ok(self) -> bool:
        """The inputs were read and fit together, so the steps could be checked."""
        return not self.errors

    @property
    def all_right(self) -> bool:
        return self.ok and bool(self.steps) and all(s.verdict == RIGHT for s in self.steps.values())

    def summary(self) -> list[Msg]:
        """What the report says, most important first."""
        if self.errors:
            return list(self.errors)
        lines: list[Msg] = []
        if not self.steps and not self.claim_errors:
            lines.append(msg("checkwork.no_claims"))
        elif self.all_right and not self.claim_errors:
            lines.append(plural("checkwork.all_right", len(self.steps)))
        if self.first_error:
            lines.append(msg("checkwork.first_error", step=label(self.first_error)))
            if self.likely_mistake:
                lines.append(msg("checkwork.likely_mistake", why=Msg(f"misconception.{self.likely_mistake}")))
            if self.consistent_after:
                lines.append(msg("checkwork.consistent_after", step=label(self.first_error),
                                 steps=_names(self.consistent_after)))
            if self.wrong_after:
                lines.append(msg("checkwork.wrong_after", steps=_names(self.wrong_after)))
        else:
            drifted = [name for name, s in self.steps.items() if s.verdict == CONSISTENT]
            if drifted:
                lines.append(msg("checkwork.rounding", steps=_names(drifted)))
        if self.claim_errors:
            lines.append(msg("checkwork.unread", steps=_names(list(self.claim_errors))))
        return lines


def label(name: str) -> Msg:
    """A step's name in words; a name that is no step at all is quoted as the learner wrote it."""
    key = f"part.{name}"
    return Msg(key) if key in catalog(DEFAULT_LANG) else Msg("where.part", {"part": name})


def _names(names: list[str]) -> Msg:
    """Step labels as one message, "a, b, c", joined by the catalog's own list pattern."""
    if len(names) == 1:
        return label(names[0])
    return msg("checkwork.list", first=label(names[0]), rest=_names(names[1:]))


# ---------------------------------------------------------------- reading


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def read_matrix(name: str, value: Any) -> np.ndarray:
    """Text (any format the answer parser reads) or numbers → a 2-D float array; AnswerError if not."""
    where = msg("where.part", part=label(name))
    if isinstance(value, str):
        return parse_answer(value, where)
    try:
        array = np.atleast_2d(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise AnswerError(msg("parse.no_rows", where=where)) from None
    if array.ndim != 2 or array.size == 0 or np.isnan(array).any():
        raise AnswerError(msg("parse.no_rows", where=where))
    return array


def _shape_msg(key: str, left: str, A: np.ndarray, right: str, B: np.ndarray) -> Msg:
    return msg(key, left=label(left), right=label(right), lr=A.shape[0], lc=A.shape[1],
               rr=B.shape[0], rc=B.shape[1])


def _conformable(values: dict[str, np.ndarray], causal: bool) -> list[Msg]:
    """Messages naming both shapes wherever the inputs cannot be multiplied as attention needs."""
    problems = []
    if "X" in values:
        X = values["X"]
        for name in ("W_Q", "W_K", "W_V"):
            if values[name].shape[0] != X.shape[1]:
                problems.append(_shape_msg("checkwork.product_rows", "X", X, name, values[name]))
        if values["W_Q"].shape[1] != values["W_K"].shape[1]:
            problems.append(_shape_msg("checkwork.same_width", "W_Q", values["W_Q"], "W_K", values["W_K"]))
        out_shape = (X.shape[0], values["W_V"].shape[1])  # O: (n, d_v)
    else:
        Q, K, V = values["Q"], values["K"], values["V"]
        if Q.shape[1] != K.shape[1]:
            problems.append(_shape_msg("checkwork.same_width", "Q", Q, "K", K))
        if K.shape[0] != V.shape[0]:
            problems.append(_shape_msg("checkwork.same_rows", "K", K, "V", V))
        if causal and Q.shape[0] != K.shape[0]:
            problems.append(_shape_msg("checkwork.causal_square", "Q", Q, "K", K))
        out_shape = (Q.shape[0], V.shape[1])
    G_O = values.get("G_O")
    if G_O is not None and G_O.shape != out_shape:
        problems.append(msg("checkwork.g_o_shape", gr=G_O.shape[0], gc=G_O.shape[1],
                            er=out_shape[0], ec=out_shape[1]))
    return problems


def _read_inputs(inputs: Mapping[str, Any], causal: bool, report: Report) -> dict[str, Any] | None:
    """The given values for the pipeline (inputs, d_k, causal), or None with report.errors filled."""
    present = {k: v for k, v in inputs.items() if not _blank(v)}
    unknown = [k for k in present if k not in FROM_X + FROM_QKV + ("G_O",)]
    if unknown:
        report.errors.append(msg("checkwork.unknown_input", name=unknown[0]))
        return None
    if any(k in present for k in FROM_X):
        names = FROM_X  # Q, K, V typed beside X are ignored: they are steps to claim, not inputs
    elif any(k in present for k in FROM_QKV):
        names = FROM_QKV
    else:
        report.errors.append(msg("checkwork.no_inputs"))
        return None
    missing = [k for k in names if k not in present]
    if missing:
        report.errors.append(msg("checkwork.missing_inputs", names=_names(missing)))
    values: dict[str, np.ndarray] = {}
    for name in (*names, "G_O"):
        if name in present:
            try:
                values[name] = read_matrix(name, present[name])
            except AnswerError as err:
                report.errors.append(err.message)
    if report.errors:
        return None
    report.errors.extend(_conformable(values, causal))
    if report.errors:
        return None
    report.inputs = dict(values)
    d_k = int(values["W_Q"].shape[1] if "X" in values else values["Q"].shape[1])
    return {**values, "d_k": d_k, "causal": bool(causal)}


# ---------------------------------------------------------------- checking


def _tolerance(decimals: int) -> float:
    """The grading tolerance for `decimals` places (Part's own rule: exact for whole numbers)."""
    return Part(name="step", shape=(1, 1), reference=[[0.0]], decimals=decimals).tolerance


def _likely_mistake(name: str, value: np.ndarray, base: dict[str, Any], tolerance: float) -> str | None:
    """A catalogued mistake that, made at this step on the learner's own earlier values, gives `value`."""
    tolerance = max(tolerance, misconceptions.DIAGNOSIS_TOLERANCE)
    right = pipeline.run(base, until={name}).get(name)
    for mid in misconceptions.CATALOG:
        env = pipeline.run(base, mistakes={mid}, until={name})
        if name not in env.tainted:
            continue
        alt = env[name]
        if right is not None and misconceptions.matches(alt, right, tolerance):
            continue  # this mistake changes nothing here
        if misconceptions.matches(value, alt, tolerance):
            return mid
    return None


def check_work(inputs: Mapping[str, Any], claimed: Mapping[str, Any] | None = None, causal: bool = False,
               decimals: int = 2) -> Report:
    """Check the learner's claimed steps against their own inputs. Never raises on bad input.

    Matrices beyond MAX_SIZE rows or columns are refused with a message before anything is computed."""
    report = Report(causal=bool(causal))
    report.errors.extend(_over_budget(inputs, claimed or {}))
    if report.errors:
        return report
    given = _read_inputs(inputs, causal, report)
    if given is None:
        return report
    report.d_k = given["d_k"]
    truth = pipeline.run(given)
    inputs_read = set(report.inputs)
    steps = [s for s in ORDER if s in truth and s not in given and s in FORWARD + BACKWARD]
    report.reference = {s: np.asarray(truth[s]) for s in steps}

    values: dict[str, np.ndarray] = {}
    for name, text in (claimed or {}).items():
        if _blank(text):
            continue
        if name in inputs_read:
            report.claim_errors[name] = msg("checkwork.step_is_input", step=label(name))
            continue
        if name not in report.reference:
            report.claim_errors[name] = _not_a_step(name, given)
            continue
        try:
            value = read_matrix(name, text)
        except AnswerError as err:
            report.claim_errors[name] = err.message
            continue
        true = report.reference[name]
        if value.shape != true.shape:
            report.claim_errors[name] = msg("grade.shape", part=label(name), expected_rows=true.shape[0],
                                            expected_cols=true.shape[1], got_rows=value.shape[0],
                                            got_cols=value.shape[1])
            continue
        values[name] = value

    # round what you write, then compute (as grading does): a step is right when it matches the truth
    # or the step redone from the learner's earlier claims that are entirely right (as they wrote them;
    # unclaimed steps between redone exact or rounded half-up to `decimals`); "consistent" only once an
    # earlier claimed step had a cell that is not right.
    earlier: dict[str, np.ndarray] = {}
    earlier_right: dict[str, np.ndarray] = {}
    for name in (s for s in steps if s in values):
        check = _check_step(name, values[name], report.reference[name], given, earlier, earlier_right, decimals)
        report.steps[name] = check
        earlier[name] = values[name]
        if check.verdict == RIGHT:
            earlier_right[name] = values[name]

    wrong = [name for name, s in report.steps.items() if s.verdict == WRONG]
    if wrong:
        first = report.first_error = wrong[0]
        later = list(report.steps)[list(report.steps).index(first) + 1:]
        report.consistent_after = [s for s in later if report.steps[s].verdict == CONSISTENT]
        report.wrong_after = [s for s in later if report.steps[s].verdict == WRONG]
        for name in wrong:
            earlier = {k: v for k, v in values.items() if ORDER.index(k) < ORDER.index(name)}
            step = report.steps[name]
            step.mistake = _likely_mistake(name, step.value, {**given, **earlier}, _tolerance(step.decimals))
        report.likely_mistake = report.steps[first].mistake
    return report


def _shape_of(value: Any) -> tuple[int, int] | None:
    """The (rows, columns) of a value given as numbers, read without converting it; None for text."""
    if isinstance(value, str) or value is None:
        return None
    shape = getattr(value, "shape", None)
    if shape is not None:  # an array: a row for 1-D, everything after the first axis as columns
        dims = [int(x) for x in shape] or [1]
        return (1, dims[0]) if len(dims) == 1 else (dims[0], int(np.prod(dims[1:])))
    try:
        rows = len(value)
        first = value[0] if rows else ()
    except (TypeError, KeyError, IndexError):
        return None
    if isinstance(first, (str, bytes)) or not hasattr(first, "__len__"):
        return (1, rows)  # one row of numbers
    return (rows, len(first))


def _over_budget(inputs: Mapping[str, Any], claimed: Mapping[str, Any]) -> list[Msg]:
    """The caps of one check: at most MAX_BOXES boxes, every matrix at most MAX_SIZE × MAX_SIZE."""
    if len(inputs) + len(claimed) > MAX_BOXES:
        return [msg("checkwork.too_many_inputs", limit=MAX_BOXES)]
    problems = []
    for name, value in [*inputs.items(), *claimed.items()]:
        if _blank(value):
            continue
        shape = _shape_of(value)
        if shape is None and isinstance(value, str) and name in FROM_X + FROM_QKV + ("G_O",):
            try:  # an input as text: read it (the parser caps its length) to know its size
                shape = read_matrix(str(name), value).shape
            except AnswerError:
                shape = None  # reported where the inputs are read
        if shape is not None and max(shape) > MAX_SIZE:
            problems.append(msg("checkwork.too_big", name=label(str(name)), rows=shape[0], cols=shape[1],
                                limit=MAX_SIZE))
    return problems


def _redone(name: str, given: dict[str, Any], claims: dict[str, np.ndarray], decimals: int) -> list[np.ndarray]:
    """Step `name` redone from the given inputs and `claims`: exact, then with every redone value
    rounded half-up to `decimals` places."""
    found = []
    for rounding in (None, decimals):
        try:
            value = pipeline.run({**given, **claims}, until={name}, rounding=rounding).get(name)
        except (ValueError, IndexError):  # claims of shapes that cannot combine
            continue
        if value is not None:
            found.append(np.asarray(value, dtype=float))
    return found


def _best(value: np.ndarray, candidates: list[np.ndarray], tolerance: float, among: np.ndarray) -> np.ndarray:
    """The cells (of `among`) matching the one candidate that matches most of them (never a mix)."""
    best = np.zeros(value.shape, dtype=bool)
    for candidate in candidates:
        if candidate.shape == value.shape:
            hit = among & misconceptions.cell_matches(value, candidate, tolerance)
            if hit.sum() > best.sum():
                best = hit
    return best


def _check_step(name: str, value: np.ndarray, true: np.ndarray, given: dict[str, Any],
                earlier: dict[str, np.ndarray], earlier_right: dict[str, np.ndarray], decimals: int) -> StepCheck:
    places = decimals_for(true, decimals)  # whole-number steps are exact
    tolerance = _tolerance(places)
    everything = np.ones(value.shape, dtype=bool)
    right = _best(value, [true, *_redone(name, given, earlier_right, decimals)], tolerance, everything)
    status = np.where(right, RIGHT, WRONG).astype(object)
    mine = _redone(name, given, earlier, decimals)
    own = mine[0] if mine and mine[0].shape == true.shape else None
    if own is not None and not right.all() and len(earlier) != len(earlier_right):
        own_tolerance = _tolerance(decimals_for(own, decimals) if np.isfinite(own).any() else places)
        status[_best(value, mine, own_tolerance, ~right)] = CONSISTENT
    return StepCheck(name=name, value=value, true=true, own=own, status=status, decimals=places)


def _not_a_step(name: str, given: dict[str, Any]) -> Msg:
    if name in BACKWARD and "G_O" not in given:
        return msg("checkwork.needs_g_o", step=label(name))
    if name in NEEDS_X and "X" not in given:
        return msg("checkwork.needs_x", step=label(name))
    return msg("checkwork.unknown_step", name=name, steps=", ".join(FORWARD + BACKWARD))
