"""Hints in three levels for any exercise: a nudge, the formula, the first cell worked.

    hs = hints(ex)                 # [Hint] for levels 1, 2, 3; memoised on the exercise
    available(graded_attempts)     # how many of them are unlocked

Unlocking (the Practice page follows it): hint 1 is unlocked from the start and hint k after k − 1
graded attempts on the exercise (an unreadable answer is not an attempt). An unlocked hint is shown
only when the learner asks for it, one level at a time; the number shown before a check is recorded
with that attempt (``hints_used``).

What each level gives away:
1. a nudge: the idea of the step, in words (``hint.<kind>.nudge`` in the kind's locales), no numbers;
2. the formula of every asked part, from the worked solution's own steps (no values);
3. one cell worked out, from the solution's derivation of that cell: of the first part the learner got
   wrong when an answer was checked (a cell they got wrong), else of the first part; the first such
   cell whose value is not trivially 0, 1 or −∞ (a causal row 1 of A is just [1, 0, …]); for a
   multiple-choice part, one wrong option ruled out with its reason.

A kind may define its own ``hints(ex) -> list[Hint]`` (its contract's ``hints``); it is used instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import solutions
from ..core import engine
from ..core.grading import WRONG, Feedback
from ..core.model import Exercise, Part
from ..i18n import Msg, catalog, msg, part_key
from ..rendering import latex as L

LEVELS = 3
NUDGE, FORMULA, WORKED = 1, 2, 3
# the whole forward pass: the frame every concept question refers to
FORWARD_PASS = r"O = \operatorname{softmax}\left(\frac{Q K^{\top}}{\sqrt{d_k}}\right) V"


@dataclass(frozen=True)
class Hint:
    """One hint: a sentence, LaTeX lines shown under it, and a note after them."""

    level: int  # 1 nudge, 2 formula, 3 first cell worked
    text: Msg
    latex: tuple[str, ...] = ()
    note: Msg | None = None
    cell: tuple[str, int, int] | None = None  # (part, row, col), 0-based: the cell a level-3 hint reveals


def available(graded_attempts: int) -> int:
    """How many hints are unlocked after `graded_attempts` graded attempts: 1, then one more each."""
    return max(1, min(LEVELS, 1 + int(graded_attempts)))


def hints(ex: Exercise, checked: Feedback | None = None) -> list[Hint]:
    """The three hints of `ex` (the kind's own when it defines hints(ex)); `checked`, the feedback on the
    learner's last answer, points the worked cell at the first part they got wrong."""
    memo = ex.__dict__.setdefault("_memo", {})
    target = first_wrong(ex, checked)
    key = ("hints", target[0] if target else None, target[1].tobytes() if target else None)
    if key not in memo:
        kind = engine.KINDS.get(ex.kind)
        own = kind.hints if kind is not None else None
        memo[key] = tuple(own(ex) if own is not None else (nudge(ex), formula(ex), worked(ex, target)))
    return list(memo[key])


def first_wrong(ex: Exercise, checked: Feedback | None) -> tuple[str, np.ndarray] | None:
    """(the first part, in the exercise's order, with a cell marked wrong; those cells), or None when
    nothing was checked, the answer was not graded or no cell is wrong."""
    if checked is None or not checked.graded:
        return None
    for part in ex.parts:
        fb = checked.parts.get(part.name)
        if fb is not None and fb.status is not None and fb.status.shape == part.shape:
            wrong = fb.status == WRONG
            if wrong.any():
                return part.name, wrong
    return None


# ---------------------------------------------------------------- the three levels


def _label(ex: Exercise, part: Part) -> Msg:
    """A part's name as the grid heads it: the kind's own where it has one (RoPE's rotated scores)."""
    return msg(part_key(part.name, ex.kind))


def _key(kind: str, what: str) -> str | None:
    key = f"hint.{kind}.{what}"
    return key if key in catalog("en") else None


def nudge(ex: Exercise) -> Hint:
    """Level 1: the idea, in words."""
    key = _key(ex.kind, "nudge")
    text = Msg(key, dict(ex.params)) if key else msg("hint.generic.nudge", part=_label(ex, ex.parts[0]))
    return Hint(NUDGE, text)


def _steps(ex: Exercise) -> dict[str, solutions.Step]:
    return {step.name: step for step in solutions.solve(ex)}


def formula(ex: Exercise) -> Hint:
    """Level 2: the formula of each asked part, as the worked solution writes it."""
    steps = _steps(ex)
    lines = [steps[p.name].latex for p in ex.parts if not p.is_choice and p.name in steps]
    if any(p.is_choice for p in ex.parts):
        lines.insert(0, FORWARD_PASS)
    key = _key(ex.kind, "formula")
    text = Msg(key, dict(ex.params)) if key else msg("hint.formula")
    return Hint(FORMULA, text, tuple(dict.fromkeys(lines)))  # each formula once, in part order


def worked_cell(part: Part, among: np.ndarray | None = None) -> tuple[int, int]:
    """The cell a level-3 hint works out: the first (row-major) of `among` (default every cell) whose
    value is not 0, 1 or ±∞; else the first of `among`."""
    ref = np.asarray(part.reference, dtype=float)
    among = np.ones(ref.shape, dtype=bool) if among is None else among
    telling = among & np.isfinite(ref) & ~np.isclose(ref, 0) & ~np.isclose(ref, 1)
    found = np.argwhere(telling) if telling.any() else np.argwhere(among)
    return (int(found[0][0]), int(found[0][1])) if len(found) else (0, 0)


def worked(ex: Exercise, target: tuple[str, np.ndarray] | None = None) -> Hint:
    """Level 3: a telling cell derived, of the part `target` names among the cells it marks (the first
    part the learner got wrong), else of the first part; or a wrong option ruled out."""
    part = ex.part(target[0]) if target else ex.parts[0]
    among = target[1] if target else None
    if part.is_choice:
        return _rule_out(ex, part)
    step = _steps(ex).get(part.name)
    i, j = worked_cell(part, among)
    label = _label(ex, part)
    text = msg("hint.worked_one", part=label) if part.shape == (1, 1) else msg("hint.worked", part=label,
                                                                               row=i + 1, col=j + 1)
    if step is None or step.shape != part.shape:  # no derivation: the value alone
        value = f"{L.cell(L.symbol(part.name), i, j)} = {L.decimal(part.reference[i, j], part.decimals)}"
        return Hint(WORKED, text, (value,), cell=(part.name, i, j))
    derivation = step.cell(i, j)
    return Hint(WORKED, text, (derivation.latex,), derivation.note, cell=(part.name, i, j))


def _rule_out(ex: Exercise, part: Part) -> Hint:
    """A multiple-choice part: the first wrong option, with the kind's reason when it gives one.
    With two options that would give the answer away, so the hint only says how to decide."""
    right = int(part.reference[0, 0])
    if len(part.options) <= 2:
        return Hint(WORKED, msg("hint.two_options", part=_label(ex, part)))
    wrong = next(k for k in range(len(part.options)) if k != right)
    kind = engine.KINDS.get(ex.kind)
    explain = kind.explain if kind is not None else None
    why = explain(ex, part, np.array([[float(wrong)]])) if explain is not None else None
    return Hint(WORKED, msg("hint.rule_out", letter=chr(ord("A") + wrong), part=_label(ex, part)), note=why)
