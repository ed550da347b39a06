"""Check my work: a learner's own given data and hand-computed steps, on any topic Practice teaches.

    report = check("gqa", {"X": "1 0; 0 1", "W_Q1": "…", …, "groups": 2}, {"O1": "…", "concat": "…"})
    report = check_work({"X": "1 0; 0 1; 1 1", "W_Q": "1 0; 0 1", …}, {"scores": "…", "A": "…"}, causal=True)

Built from the step records and the kinds, never per topic: a topic is a kind, its given names are those
of its exercises (one form per level), its steps are what the kind's chain computes from them (the step
pipeline for most kinds). The learner's numbers become their own exercise of that kind, whose parts are
the steps they claimed, each judged to the places they wrote; the grader grades it: round what you write,
then compute; errors carried forward ("consistent with" the learner's earlier value); the likely mistake
from the same catalog as Practice (the kind's own diagnosis, the records' mistakes), also on the learner's
own earlier values. The first step with a wrong cell is the first error. This is not an exam: the report
holds the correct value of every step. All messages are catalog Msgs.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..i18n import DEFAULT_LANG, Msg, catalog, msg, plural
from . import grading
from . import steps as registry
from .grading import CONSISTENT, RIGHT, WRONG
from .model import Exercise, Part
from .numbers import decimals_for
from .parser import AnswerError, parse_answer

# the step lists, read from the step registry: the claimable steps forward and backward, the
# projections' inputs (X, W_Q, W_K, W_V) and outputs (Q, K, V), and the backward steps needing X's path
FORWARD: tuple[str, ...] = registry.of_direction("forward", checkable=True)
BACKWARD: tuple[str, ...] = registry.of_direction("backward", checkable=True)
FROM_QKV: tuple[str, ...] = tuple(name for name in FORWARD if "X" in registry.STEP_BY_NAME[name].inputs)
FROM_X: tuple[str, ...] = tuple(dict.fromkeys(i for name in FROM_QKV for i in registry.STEP_BY_NAME[name].inputs))
NEEDS_X: tuple[str, ...] = tuple(name for name in BACKWARD if set(FROM_X) & set(registry.STEP_BY_NAME[name].inputs))
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
    topic: str | None = None  # the kind whose steps were checked

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


def _conformable(values: dict[str, Any], causal: bool) -> list[Msg]:
    """Messages naming both shapes wherever the inputs cannot be multiplied as attention needs."""
    problems = []
    out_shape = None
    if all(n in values for n in FROM_X):
        X = values["X"]
        for name in ("W_Q",) if "H" in values else ("W_Q", "W_K", "W_V"):  # keys and values from H
            if values[name].shape[0] != X.shape[1]:
                problems.append(_shape_msg("checkwork.product_rows", "X", X, name, values[name]))
        if values["W_Q"].shape[1] != values["W_K"].shape[1]:
            problems.append(_shape_msg("checkwork.same_width", "W_Q", values["W_Q"], "W_K", values["W_K"]))
        out_shape = (X.shape[0], values["W_V"].shape[1])  # O: (n, d_v)
    elif all(n in values for n in FROM_QKV):
        Q, K, V = values["Q"], values["K"], values["V"]
        if Q.shape[1] != K.shape[1]:
            problems.append(_shape_msg("checkwork.same_width", "Q", Q, "K", K))
        if K.shape[0] != V.shape[0]:
            problems.append(_shape_msg("checkwork.same_rows", "K", K, "V", V))
        if causal and Q.shape[0] != K.shape[0]:
            problems.append(_shape_msg("checkwork.causal_square", "Q", Q, "K", K))
        out_shape = (Q.shape[0], V.shape[1])
    G_O = values.get("G_O")
    if G_O is not None and out_shape is not None and G_O.shape != out_shape:
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


# ---------------------------------------------------------------- topics


def _kinds() -> dict[str, Any]:
    """engine.KINDS, imported late: engine imports every kind, and a kind may import this module."""
    from .engine import KINDS  # late: see above

    return KINDS


@dataclass(frozen=True)
class Form:
    """One way a topic can be given (a level of its kind): the given names and the steps they lead to."""

    level: int
    inputs: tuple[str, ...]
    steps: tuple[str, ...]


@dataclass(frozen=True)
class Topic:
    """A kind whose steps a learner can check on their own numbers (Practice's topic of that name).

    kinds: how each given is typed: "matrix", "row" (a list: positions, angles, token ids), "number" (whole),
    "decimal" (a positive number: a cap, a temperature) or
    "flag"; optional: the record inputs a topic computed by the step records also reads (G_O, T, H …)."""

    id: str
    forms: tuple[Form, ...]
    kinds: dict[str, str]
    optional: tuple[str, ...] = ()
    stated: tuple[str, ...] = ()  # numbers beyond the given data (a model's layers and heads)
    conventions: tuple[str, ...] = ()  # flags of the learner's conventions (RoPE's pairs from the halves)
    defaulted: tuple[str, ...] = ()  # given values a convention fills in when none are typed
    implied: dict[str, bool] = field(default_factory=dict)  # flags the topic itself sets (linear attention's)
    rows: dict[str, str] = field(default_factory=dict)  # one row per column of another given (γ, β of X)

    @property
    def steps(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for form in self.forms for s in form.steps))


def _value_kind(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "flag"
    array = np.asarray(value)
    if array.ndim == 0:
        return "number" if np.issubdtype(array.dtype, np.integer) else "decimal"
    return {1: "row"}.get(array.ndim, "matrix")


def _steps_of(kind: Any, ex: Exercise, values: Mapping[str, Any] | None = None,
              rounding: int | None = None) -> dict[str, np.ndarray]:
    """Every value the kind's chain computes from the exercise's given data (and `values`), as matrices."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        env = kind.chain(ex, dict(values or {}), rounding)
    out = {}
    for name, value in env.items():
        if name in ex.given or value is None:
            continue
        array = np.asarray(value, dtype=float)
        if array.ndim <= 2 and array.size:
            out[name] = np.atleast_2d(array)
    return out


def _merged(known: tuple[str, ...], steps: list[str], order: list[str]) -> tuple[str, ...]:
    """The steps of two levels as one list: each new step before the first known one the chain computes
    after it (`order`), else at the end."""
    merged = list(known)
    for name in (s for s in steps if s not in known):
        after = order[order.index(name) + 1:]
        place = next((merged.index(s) for s in after if s in merged), len(merged))
        merged.insert(place, name)
    return tuple(merged)


TEMPLATE_SEEDS = (0, 1, 2)  # the exercises of each level whose given names make a topic's forms


@functools.lru_cache(maxsize=512)  # the topics' templates: TEMPLATE_SEEDS per level of some 30 kinds
def template(topic_id: str, level: int, seed: int) -> Exercise:
    """A generated exercise of kind `topic_id` (read only: cached)."""
    from .engine import generate  # engine imports every kind

    return generate(topic_id, seed=seed, level=level)


@functools.cache
def topic(topic_id: str) -> Topic | None:
    """The topic of kind `topic_id`, read from its generated exercises (TEMPLATE_SEEDS per level); None when its
    parts are not matrices a chain computes (choices, shapes)."""
    from .engine import KINDS, default_chain  # engine imports every kind

    kind = KINDS.get(topic_id)
    if kind is None:
        return None
    forms: dict[tuple[str, ...], Form] = {}
    kinds: dict[str, str] = {}
    examples: list[Mapping[str, Any]] = []  # the given data of the templates the forms were read from
    for level, seed in ((level, seed) for level in kind.LEVELS for seed in TEMPLATE_SEEDS):
        ex = template(topic_id, level, seed)
        if any(p.is_choice for p in ex.parts):
            continue
        order = list(_steps_of(kind, ex))  # the chain's order
        steps = [name for name in order if name in ex.part_names or kind.chain is default_chain]
        if not steps:
            continue
        inputs = tuple(ex.given)
        examples.append(ex.given)
        kinds.update({name: _value_kind(v) for name, v in ex.given.items()})
        known = forms.get(inputs)  # levels given alike ask more of the same chain (A, a third τ): one form
        forms[inputs] = Form(known.level, inputs, _merged(known.steps, steps, order)) if known else \
            Form(level, inputs, tuple(steps))
    if not forms:
        return None
    # a topic the step records compute reads every record input: the backward pass from G_O, a target T …
    optional = tuple(n for n in registry.INPUT_SHAPES if n not in kinds) if kind.chain is default_chain else ()
    kinds.update({n: ("number", "row", "matrix")[len(registry.INPUT_SHAPES[n])] for n in optional})
    kinds.update({n: "flag" for n in kind.CONVENTIONS})
    return Topic(topic_id, tuple(forms.values()), kinds, optional, tuple(kind.STATED), tuple(kind.CONVENTIONS),
                 kind.DEFAULTED, _implied(examples), _rows(examples))


def _implied(examples: list[Mapping[str, Any]]) -> dict[str, bool]:
    """The flags a step record reads that every example sets alike: the topic's own (linear attention's
    `linear`), set by the topic rather than asked of the learner."""
    read = {name for step in registry.STEPS for name in step.inputs}
    flags = {name for ex in examples for name, v in ex.items() if isinstance(v, (bool, np.bool_)) and name in read}
    return {name: bool(examples[0][name]) for name in sorted(flags)
            if all(name in ex and bool(ex[name]) == bool(examples[0][name]) for ex in examples)}


def _rows(examples: list[Mapping[str, Any]]) -> dict[str, str]:
    """The givens that are one row in every example, as wide as another given of several rows (γ and β:
    one number per column of X), each with that given."""
    def matrices(ex: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return {n: v for n, v in ex.items() if isinstance(v, np.ndarray) and v.ndim == 2}

    found = {}
    names = dict.fromkeys(n for ex in examples for n in matrices(ex))
    for name in (n for n in names if all(len(ex[n]) == 1 for ex in examples if n in matrices(ex))):
        having = [ex for ex in examples if name in matrices(ex)]
        other = next((o for o in names if o != name and all(o in matrices(ex) for ex in having) and all(
            len(ex[o]) > 1 and ex[o].shape[1] == ex[name].shape[1] for ex in having)), None)
        if other is not None:
            found[name] = other
    return found


@functools.cache
def topic_ids() -> tuple[str, ...]:
    """Every topic Check my work offers, in Practice's order."""
    return tuple(k for k in _kinds() if topic(k) is not None)


# ---------------------------------------------------------------- checking

_PLACES = re.compile(r"(?<![\w.])\d*\.(\d+)")  # the decimals of each number typed: 0.5403 → 4
MAX_PLACES = 6  # more decimals than this were not written by hand (a computed value kept in full)
DEFAULT_PLACES = 2  # a step typed in whole numbers (or fractions, or in full) where decimals are due: 2 places


def typed_places(value: Any) -> int:
    """The most decimals the learner wrote in a box (text as typed, or numbers as JSON gives them); 0
    for whole numbers, fractions and values kept in full precision (those are judged to DEFAULT_PLACES)."""
    if isinstance(value, str):
        places = [len(m.group(1)) for m in _PLACES.finditer(value)]
    else:
        try:
            cells = np.asarray(value, dtype=float).ravel()
        except (TypeError, ValueError):
            return 0
        texts = [np.format_float_positional(x, trim="-") for x in cells if np.isfinite(x)]
        places = [len(t.partition(".")[2]) for t in texts]
    most = max(places, default=0)
    return most if most <= MAX_PLACES else 0


def _check_claims(kind_id: str, given: dict[str, Any], claimed: Mapping[str, Any], report: Report,
                  decimals: int | None, level: int, params: dict[str, Any]) -> Report:
    """Grade the claimed steps as the parts of the learner's own exercise of kind `kind_id` (the grader:
    round what you write, carry forward, the same catalog of mistakes). Fills `report`."""
    kind = _kinds()[kind_id]
    ex = Exercise(kind=kind_id, seed=0, level=level, version=kind.VERSION, given=given, parts=(), params=params)
    try:
        truth = _steps_of(kind, ex)
    except (ValueError, KeyError, IndexError, TypeError):  # givens that do not combine
        report.errors.append(msg("checkwork.do_not_fit", inputs=_shapes(given)))
        return report
    report.reference = truth

    values: dict[str, np.ndarray] = {}
    misshapen: dict[str, np.ndarray] = {}  # claims of another shape: a mistake the kind knows by it is named
    places: dict[str, int] = {}
    for name, text in claimed.items():
        if _blank(text):
            continue
        if name in given:
            report.claim_errors[name] = msg("checkwork.step_is_input", step=label(name))
            continue
        if name not in truth:
            report.claim_errors[name] = _not_a_step(name, given, truth, kind)
            continue
        try:
            value = read_matrix(name, text)
        except AnswerError as err:
            report.claim_errors[name] = err.message
            continue
        true = truth[name]
        if value.shape != true.shape:
            report.claim_errors[name] = msg("grade.shape", part=label(name), expected_rows=true.shape[0],
                                            expected_cols=true.shape[1], got_rows=value.shape[0],
                                            got_cols=value.shape[1])
            misshapen[name] = value
            continue
        values[name] = value
        places[name] = decimals if decimals is not None else (typed_places(text) or DEFAULT_PLACES)

    # tolerance follows what the learner wrote; the steps they left out are rounded (under the rounding
    # policy) to the most places they wrote
    most = max(places.values(), default=DEFAULT_PLACES)
    parts = [Part(name=name, shape=true.shape, reference=true, decimals=decimals_for(true, places.get(name, most)))
             for name, true in truth.items()]
    ex = Exercise(kind=kind_id, seed=0, level=level, version=kind.VERSION, given=given, parts=parts, params=params)
    for name, value in misshapen.items():
        mistake = grading.shape_mistake(ex, ex.part(name), value)
        if mistake:
            report.claim_errors[name] = msg("grade.explained", summary=report.claim_errors[name],
                                            why=Msg(f"misconception.{mistake}"))
    if not values:
        return report
    try:
        feedback = grading.grade(ex, values, partial=True)
    except (ValueError, KeyError, IndexError, TypeError):  # a kind's hook on values it cannot combine
        report.errors.append(msg("checkwork.do_not_fit", inputs=_shapes(given)))
        return report
    earlier: dict[str, np.ndarray] = {}
    for part in ex.parts:
        if part.name not in values:
            continue
        fb = feedback.parts[part.name]
        own = _own(kind, ex, part, earlier)
        report.steps[part.name] = StepCheck(name=part.name, value=values[part.name], true=part.reference, own=own,
                                            status=fb.status, decimals=part.decimals, mistake=fb.misconception)
        if fb.status is not None and (fb.status == WRONG).any() and fb.misconception is None and earlier:
            report.steps[part.name].mistake = _own_mistake(ex, part, values[part.name], earlier, own)
        earlier[part.name] = values[part.name]

    wrong = [name for name, s in report.steps.items() if s.verdict == WRONG]
    if wrong:
        first = report.first_error = wrong[0]
        later = list(report.steps)[list(report.steps).index(first) + 1:]
        report.consistent_after = [s for s in later if report.steps[s].verdict == CONSISTENT]
        report.wrong_after = [s for s in later if report.steps[s].verdict == WRONG]
        report.likely_mistake = report.steps[first].mistake
    return report


def _own(kind: Any, ex: Exercise, part: Part, earlier: dict[str, np.ndarray]) -> np.ndarray | None:
    """The step done right on the learner's own earlier claimed values (None when it cannot be)."""
    if not earlier:
        return part.reference
    try:
        own = _steps_of(kind, ex, earlier).get(part.name)
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return own if own is not None and own.shape == part.shape else None


def _own_mistake(ex: Exercise, part: Part, value: np.ndarray, earlier: dict[str, np.ndarray],
                 own: np.ndarray | None) -> str | None:
    """A catalogued mistake made at this step on the learner's own earlier values (taken as given)."""
    if own is None:
        return None
    mine = replace(ex, given={**ex.given, **earlier},
                   parts=tuple(replace(p, reference=own) if p.name == part.name else p for p in ex.parts))
    try:
        return grading.diagnose_part(mine, mine.part(part.name), value)
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _shapes(given: Mapping[str, Any]) -> str:
    """The given matrices' shapes, "X 3×2, W_Q 2×2", for a message about inputs that do not fit."""
    return ", ".join(f"{name} {'×'.join(str(n) for n in np.shape(v))}" for name, v in given.items()
                     if np.ndim(v) == 2)


def check(topic_id: str, inputs: Mapping[str, Any], claimed: Mapping[str, Any] | None = None,
          stated: Mapping[str, Any] | None = None, decimals: int | None = None) -> Report:
    """Check the learner's claimed steps of topic `topic_id` (a Practice kind) on their own given data.

    inputs: the given matrices, lists, numbers and flags by name (text in any format Practice reads, or
    numbers); stated: the numbers beyond them the topic asks (kv_cache: layers, heads, d_head). Never
    raises on bad input: problems are messages in the report."""
    claimed = claimed or {}
    spec = topic(topic_id) if isinstance(topic_id, str) else None
    report = Report(topic=topic_id if spec else None)
    if spec is None:
        report.errors.append(msg("checkwork.unknown_topic", name=str(topic_id)[:40], topics=", ".join(topic_ids())))
        return report
    report.errors.extend(_over_budget(inputs, claimed, spec))
    if report.errors:
        return report
    read = _read_topic_inputs(spec, inputs, report)
    if read is None:
        return report
    given, form = read
    report.causal = bool(given.get("causal", False))
    report.d_k = int(given["d_k"]) if "d_k" in given else None
    numbers = _read_stated(spec, stated or {}, report)
    if report.errors:
        return report
    kind = _kinds()[topic_id]
    params = kind.stated_params(given, numbers) if kind.stated_params else {}
    return _check_claims(topic_id, given, claimed, report, decimals, form.level, params)


MAX_NUMBER = 100_000  # d_k, heads, layers …: far beyond any model a hand calculation states


def _read_number(name: str, value: Any) -> int:
    """A whole number between 1 and MAX_NUMBER (typed or given); AnswerError naming the box if not."""
    where = msg("where.part", part=label(name))
    array = read_matrix(name, value) if isinstance(value, str) else np.atleast_2d(np.asarray(value, dtype=float))
    x = float(array.ravel()[0]) if array.size == 1 else math.nan
    if not (math.isfinite(x) and x.is_integer() and 1 <= x <= MAX_NUMBER):
        raise AnswerError(msg("checkwork.whole_number", where=where, limit=MAX_NUMBER))
    return int(x)


def _read_decimal(name: str, value: Any) -> float:
    """A number above 0 and at most MAX_NUMBER, decimals allowed (typed or given); AnswerError naming the box."""
    where = msg("where.part", part=label(name))
    array = read_matrix(name, value) if isinstance(value, str) else np.atleast_2d(np.asarray(value, dtype=float))
    x = float(array.ravel()[0]) if array.size == 1 else math.nan
    if not (math.isfinite(x) and 0 < x <= MAX_NUMBER):
        raise AnswerError(msg("checkwork.positive_number", where=where, limit=MAX_NUMBER))
    return x


def _read_flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "y", "是")
    return bool(value)


def _read_topic_inputs(spec: Topic, inputs: Mapping[str, Any], report: Report) -> tuple[dict, Form] | None:
    """The given values, read by kind, and the form they fit; None with report.errors filled."""
    present = {k: v for k, v in inputs.items() if not _blank(v)}
    kinds = {**spec.kinds, **{k: _family_kind(spec, k) for k in present if k not in spec.kinds}}
    unknown = [k for k in present if kinds[k] is None]
    if unknown:
        report.errors.append(msg("checkwork.not_an_input", name=str(unknown[0])[:40],
                                 names=", ".join(n for n in spec.kinds if n not in spec.optional)))
        return None
    flags = {n for n, k in spec.kinds.items() if k == "flag"}
    have = set(present) | flags | set(spec.defaulted) | ({"d_k"} if _width(present) else set())
    if spec.optional:  # computed by the step records: what the learner's inputs lead to need not be typed
        have = _reachable(have)
    form = min(spec.forms, key=lambda f: len(set(f.inputs) - have))
    missing = [n for n in form.inputs if n not in have]
    if missing:
        report.errors.append(msg("checkwork.missing_inputs", names=_names(missing)))
    given: dict[str, Any] = {}
    for name in (*form.inputs, *(n for n in present if n not in form.inputs)):
        kind = kinds[name]
        try:
            if name in spec.implied:
                given[name] = spec.implied[name]
            elif kind == "flag":
                given[name] = _read_flag(present.get(name, False))
            elif name not in present:
                continue
            elif kind == "number":
                given[name] = _read_number(name, present[name])
            elif kind == "decimal":
                given[name] = _read_decimal(name, present[name])
            elif kind == "row":
                row = read_matrix(name, present[name])
                if min(row.shape) != 1:
                    raise AnswerError(msg("checkwork.one_row", where=msg("where.part", part=label(name))))
                given[name] = row.ravel()
            else:
                given[name] = read_matrix(name, present[name])
        except AnswerError as err:
            report.errors.append(err.message)
    if report.errors:
        return None
    if "d_k" in form.inputs and "d_k" not in given:
        given["d_k"] = _width(given)
    report.errors.extend(_one_row_each(spec, given))
    report.errors.extend(_conformable(given, bool(given.get("causal", False))))
    if report.errors:
        return None
    report.inputs = {k: v for k, v in given.items() if isinstance(v, np.ndarray) and v.ndim == 2}
    return given, form


def _one_row_each(spec: Topic, given: Mapping[str, Any]) -> list[Msg]:
    """Messages naming both shapes where a given of one number per column of another (γ, β) is not one row
    as wide as that given."""
    problems = []
    for name, other in spec.rows.items():
        row, full = given.get(name), given.get(other)
        if isinstance(row, np.ndarray) and row.ndim == 2 and isinstance(full, np.ndarray) and (
                row.shape[0] != 1 or row.shape[1] != full.shape[1]):
            problems.append(_shape_msg("checkwork.row_width", other, full, name, row))
    return problems


_NUMBERED = re.compile(r"(\D+?)([1-9]\d?)")  # W_Q3: the third of a family of numbered inputs (heads, groups)


def _family_kind(spec: Topic, name: Any) -> str | None:
    """How a numbered input beyond the topic's examples is typed (W_Q3 like W_Q1: a third head), or None
    for a name that is no input of the topic; at most MAX_SIZE of a family."""
    found = _NUMBERED.fullmatch(name) if isinstance(name, str) else None
    if found is None or int(found.group(2)) > MAX_SIZE:
        return None
    return next((kind for known, kind in spec.kinds.items()
                 if (match := _NUMBERED.fullmatch(known)) and match.group(1) == found.group(1)), None)


def _reachable(names: set[str]) -> set[str]:
    """`names` and every value the step records compute from them."""
    have = set(names)
    for step in registry.STEPS:
        if step.runs_on(have) is not None:
            have.add(step.name)
    return have


WIDTH_FROM = ("Q", "K", "W_Q", "W_K", "q", "k", "W_Q1", "W_K1")  # d_k, when not typed: the keys' width


def _width(values: Mapping[str, Any]) -> int | None:
    for name in WIDTH_FROM:
        if name in values and not _blank(values[name]):
            try:
                return int(read_matrix(name, values[name]).shape[1])
            except AnswerError:
                return None
    return None


def _read_stated(spec: Topic, stated: Mapping[str, Any], report: Report) -> dict[str, int]:
    numbers = {}
    for name in spec.stated:
        if not _blank(stated.get(name)):
            try:
                numbers[name] = _read_number(name, stated[name])
            except AnswerError as err:
                report.errors.append(err.message)
    return numbers


def fits(topic_id: str, inputs: Mapping[str, Any], claimed: Mapping[str, Any],
         stated: Mapping[str, Any] | None = None) -> list[tuple[Msg, ...]]:
    """Which conventions the learner's numbers fit: every setting of the topic's convention flags, each
    value a convention fills in (DEFAULTED) as typed or left to the convention, checked; the settings
    under which every claimed step is right, each as its labels (checkwork.convention.<name>.<value>)."""
    spec = topic(topic_id)
    if spec is None or not (spec.conventions or spec.defaulted):
        return []
    typed = [n for n in spec.defaulted if not _blank(inputs.get(n))]
    found = []
    for flags in itertools.product((False, True), repeat=len(spec.conventions)):
        for kept in itertools.product((True, False), repeat=len(typed)):
            trial = {k: v for k, v in inputs.items() if k not in spec.conventions}
            trial.update(zip(spec.conventions, flags))
            trial.update({n: None for n, keep in zip(typed, kept) if not keep})
            report = check(topic_id, trial, claimed, stated)
            if report.all_right and not report.claim_errors:
                found.append(_convention_labels(spec, _kinds()[topic_id].CONVENTIONS, trial))
    return list({tuple(m.key for m in labels): labels for labels in found}.values())


def _convention_labels(spec: Topic, fills: Mapping[str, str | None], trial: Mapping[str, Any]) -> tuple[Msg, ...]:
    """A setting in words: each flag (unless the value it fills in was typed), each defaulted value typed
    or left to its convention (unless a flag says how it is filled in)."""
    typed = {n for n in spec.defaulted if not _blank(trial.get(n))}
    labels = [f"{n}.{str(bool(trial[n])).lower()}" for n in spec.conventions if fills.get(n) not in typed]
    labels += [f"{n}.{'typed' if n in typed else 'default'}" for n in spec.defaulted
               if n in typed or n not in fills.values()]
    return tuple(Msg(f"checkwork.convention.{label}") for label in labels)


def check_work(inputs: Mapping[str, Any], claimed: Mapping[str, Any] | None = None, causal: bool = False,
               decimals: int | None = None) -> Report:
    """Check single-head attention (forward, and backward with G_O) from X and the weights or from Q, K, V.

    The topic "attention" with causal given apart; `decimals`: judge every step to that many places
    instead of the places the learner wrote. Matrices beyond MAX_SIZE rows or columns are refused
    with a message before anything is computed."""
    report = Report(causal=bool(causal), topic="attention")
    report.errors.extend(_over_budget(inputs, claimed or {}))
    if report.errors:
        return report
    given = _read_inputs(inputs, causal, report)
    if given is None:
        return report
    report.d_k = given["d_k"]
    level = 2 if "X" in given else 1
    return _check_claims("attention", given, claimed or {}, report, decimals, level, {})


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


def _over_budget(inputs: Mapping[str, Any], claimed: Mapping[str, Any], spec: Topic | None = None) -> list[Msg]:
    """The caps of one check: at most MAX_BOXES boxes, every matrix at most MAX_SIZE × MAX_SIZE."""
    if len(inputs) + len(claimed) > MAX_BOXES:
        return [msg("checkwork.too_many_inputs", limit=MAX_BOXES)]
    problems = []
    for name, value in [*inputs.items(), *claimed.items()]:
        if _blank(value):
            continue
        shape = _shape_of(value)
        matrices = spec.kinds if spec is not None else FROM_X + FROM_QKV + ("G_O",)
        if shape is None and isinstance(value, str) and name in matrices:
            try:  # an input as text: read it (the parser caps its length) to know its size
                shape = read_matrix(str(name), value).shape
            except AnswerError:
                shape = None  # reported where the inputs are read
        if shape is not None and max(shape) > MAX_SIZE:
            problems.append(msg("checkwork.too_big", name=label(str(name)), rows=shape[0], cols=shape[1],
                                limit=MAX_SIZE))
    return problems


def _not_a_step(name: str, given: dict[str, Any], truth: Mapping[str, Any], kind: Any) -> Msg:
    """Why `name` cannot be checked here: an input it needs is missing (G_O, X, the model), or it is no step."""
    if name in kind.STATED or name == "cache_floats" and kind.STATED:
        return msg("checkwork.needs_model", step=label(name), names=", ".join(kind.STATED))
    if name in BACKWARD and "G_O" not in truth and "G_O" not in given:
        return msg("checkwork.needs_g_o", step=label(name))
    if name in NEEDS_X and "X" not in given:
        return msg("checkwork.needs_x", step=label(name))
    if name in registry.STEP_BY_NAME and registry.STEP_BY_NAME[name].runs_on({*given, *truth}) is not None:
        return msg("checkwork.do_not_fit", inputs=_shapes(given))
    return msg("checkwork.unknown_step", name=str(name)[:40], steps=", ".join(truth))
