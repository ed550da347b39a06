"""Practice shows the diagnosis, hints and warnings — and the feedback never reveals a
correct value.

The leak test reads every number in what the learner is shown after a wrong answer (the message, each
part's format and cell errors, the named mistake, the warnings, in English and Chinese) and in each hint
before it is unlocked, and fails when one of them is the reference value of a cell the learner got
wrong. Numbers that the learner saw anyway are not counted: the given data, the learner's own entries,
and small whole numbers (row and column numbers, counts, shapes), which is why the integer kinds are
checked less sharply than the decimal ones.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import exercises
from exercises.core import misconceptions
from exercises.core.model import Exercise
from exercises.i18n import Msg, languages, t
from exercises.solutions import hints
from tests import generated
from tests.apptest_helpers import click_check, current_exercise, fill_cells, open_page, reference_cells

SEEDS = range(10)
KINDS = list(exercises.KINDS)
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
SHOWN_TOLERANCE = 0.51e-2  # a value shown to 2 decimals


def exercise(kind: str, level: int, seed: int) -> Exercise:
    return generated.exercise(kind, seed, level)


def numbers(text: str) -> list[float]:
    return [float(x) for x in NUMBER.findall(text)]


def seen_anyway(ex: Exercise, answer: dict) -> np.ndarray:
    """Numbers the learner has in front of them already: the given data, their own entries, the params."""
    found = [float(v) for v in ex.params.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for value in list(ex.given.values()) + [v for v in answer.values() if isinstance(v, np.ndarray)]:
        if isinstance(value, (int, float, np.ndarray)) and not isinstance(value, bool):
            arr = np.asarray(value, dtype=float).ravel()
            found += arr[np.isfinite(arr)].tolist()
    return np.array(found)


def leaks(texts: list[str], ex: Exercise, wrong: dict[str, np.ndarray], answer: dict) -> list[tuple]:
    """(number, part, cell) for every number in `texts` that is the reference of a wrong cell."""
    innocent = seen_anyway(ex, answer)
    small = max(12, sum(p.reference.size for p in ex.parts))  # indices, counts, shapes
    found = []
    for text in texts:
        for x in numbers(text):
            if float(x).is_integer() and abs(x) <= small:
                continue
            if innocent.size and np.any(np.abs(innocent - x) <= SHOWN_TOLERANCE):
                continue
            for part in ex.parts:
                if part.is_choice or part.name not in wrong:
                    continue
                hit = wrong[part.name] & np.isfinite(part.reference) & (np.abs(part.reference - x) <= SHOWN_TOLERANCE)
                if hit.any():
                    found.append((x, part.name, tuple(np.argwhere(hit)[0]), text))
    return found


def shown_after(fb: exercises.Feedback) -> list[Msg | str]:
    """Everything the feedback puts on screen, as messages (rendered per language below)."""
    shown: list[Msg | str] = [fb.message] if fb.message else []
    shown += list(fb.warnings)
    for part in fb.parts.values():
        shown += [m for m in (part.format_error, part.explanation) if m is not None]
        shown += list(part.cell_errors.values())
        if part.misconception:
            shown.append(Msg(f"misconception.{part.misconception}"))
    return shown


def wrong_answers(ex: Exercise) -> list[dict]:
    """Mistakes from the catalog, every cell off, a transposed paste, an unreadable cell."""
    right = {p.name: int(p.reference[0, 0]) if p.is_choice else np.array(p.reference) for p in ex.parts}
    answers = [{**right, **{n: np.round(v, 2) for n, v in values.items()}}
               for values in misconceptions.alternatives(ex).values()]
    shifted = {p.name: (np.where(np.isfinite(p.reference), p.reference, 0.0) + 1.37 if not p.is_choice
                        else (int(p.reference[0, 0]) + 1) % len(p.options)) for p in ex.parts}
    answers.append(shifted)
    for p in ex.parts:
        if not p.is_choice and p.shape[0] != p.shape[1]:
            answers.append({**shifted, p.name: shifted[p.name].T})
            break
    first = next((p for p in ex.parts if not p.is_choice), None)
    if first is not None:
        grid = [[f"{x:.2f}" for x in row] for row in shifted[first.name]]
        grid[0][0] = "1/0"
        answers.append({**shifted, first.name: grid})
    return answers


def wrong_cells(ex: Exercise, fb: exercises.Feedback, answer: dict) -> dict[str, np.ndarray]:
    """Cells not right; a part that was not graded counts as wrong everywhere."""
    out = {}
    for p in ex.parts:
        pfb = fb.parts.get(p.name)
        out[p.name] = ~pfb.cells if pfb is not None and pfb.cells is not None else np.ones(p.shape, dtype=bool)
    return out


def test_the_leak_detector_bites():
    """A message quoting a wrong cell's reference (to 2 decimals) is caught; the learner's own value,
    a given number and a row number are not."""
    ex = exercise("softmax", 2, 4)
    ref = ex.part("A").reference
    i, j = next((i, j) for i, j in np.argwhere(np.isfinite(ref)) if not float(ref[i, j]).is_integer())
    wrong = {"A": np.ones(ref.shape, dtype=bool)}
    assert leaks([f"row {i + 1} should be {ref[i, j]:.2f}"], ex, wrong, {})
    assert not leaks([f"row {i + 1} should be {ref[i, j]:.2f}"], ex, wrong, {"A": np.full(ref.shape, ref[i, j])})
    given = ex.given.get("scaled", ex.given.get("masked"))
    assert not leaks([f"row {i + 1} holds {given[np.isfinite(given)][0]}"], ex, wrong, {})


@pytest.mark.parametrize("kind", KINDS)
def test_feedback_never_reveals_the_value_of_a_wrong_cell(kind):
    checked = 0
    for level in exercises.KINDS[kind].LEVELS:
        for seed in SEEDS:
            ex = exercise(kind, level, seed)
            for answer in wrong_answers(ex):
                fb = exercises.grade(ex, answer)
                wrong = wrong_cells(ex, fb, answer)
                learner = {k: v for k, v in answer.items() if isinstance(v, np.ndarray)}
                for lang in languages():
                    texts = [m.render(lang) if isinstance(m, Msg) else m for m in shown_after(fb)]
                    assert not leaks(texts, ex, wrong, learner), (ex.id, lang, leaks(texts, ex, wrong, learner)[:3])
                checked += 1
    assert checked >= 2 * len(exercises.KINDS[kind].LEVELS) * len(SEEDS), "every cell off, and a bad cell"


def hint_texts(hint: hints.Hint, lang: str) -> list[str]:
    return [hint.text.render(lang), *(hint.latex), *([hint.note.render(lang)] if hint.note else [])]


@pytest.mark.parametrize("kind", KINDS)
def test_hints_reveal_nothing_but_their_one_cell(kind):
    """Before any answer every cell is unknown. The nudge and the formula show no reference value. The
    worked hint's sentence and note show none either; its LaTeX is the derivation of its one cell (an
    exponential or a row sum on the way may equal some other cell by chance, which reveals nothing)."""
    for level in exercises.KINDS[kind].LEVELS:
        for seed in SEEDS:
            ex = exercise(kind, level, seed)
            nudge, formula, worked = hints.hints(ex)
            everything = {p.name: np.ones(p.shape, dtype=bool) for p in ex.parts}
            for lang in languages():
                for hint in (nudge, formula):
                    assert not leaks(hint_texts(hint, lang), ex, everything, {}), (ex.id, hint.level, lang)
                words = [worked.text.render(lang)] + ([worked.note.render(lang)] if worked.note else [])
                assert not leaks(words, ex, everything, {}), (ex.id, lang)
            if worked.cell is not None:
                name, i, j = worked.cell
                assert len(worked.latex) == 1
                assert worked.latex[0] == exercises.solve(ex)[[s.name for s in exercises.solve(ex)].index(name)].cell(i, j).latex


# ---------------------------------------------------------------- the page


def texts_of(at, *kinds: str) -> list[str]:
    return [str(e.value) for kind in kinds for e in getattr(at, kind)]


def hint_button(at, level: int):
    return next(b for b in at.button if b.key and b.key.startswith("hint-") and b.key.endswith(f"-{level}"))


def test_practice_hints_open_without_an_answer_and_are_recorded():
    at = open_page("app_pages/practice.py", {"kind": "softmax", "level": "2", "seed": "5"})
    ex = current_exercise(at)
    assert not at.exception
    assert any(e.label.startswith("Hints (0/3)") for e in at.expander)
    assert not hint_button(at, 1).disabled
    hint_button(at, 1).click().run()
    nudge = t(f"hint.{ex.kind}.nudge")
    assert any(nudge in m for m in texts_of(at, "markdown")), "the nudge is shown"
    # no hint waits for an answer (a stuck student submitted junk to unlock one); opening it
    # early has its cost said beside it
    assert not hint_button(at, 2).disabled, "the formula is reachable without an answer"
    assert any("you can open it now, no answer needed" in c for c in texts_of(at, "caption"))

    # a column-wise softmax: the mistake is named, the rows are flagged, no value is given away
    wrong = misconceptions.alternatives(ex)["softmax_columns"]["A"]
    fill_cells(at, ex, {"A": [[f"{x:.2f}" for x in row] for row in wrong]})
    click_check(at)
    assert not at.exception
    warnings = texts_of(at, "warning")
    assert any(t("misconception.softmax_columns") in w and "Likely mistake" in w for w in warnings)
    assert any("Sanity check" in i and "sums to 1" in i for i in texts_of(at, "info"))
    record = at.session_state["practice.attempts"][-1]
    assert record["hints_used"] == 1 and record["misconception"] == "softmax_columns"
    fb = at.session_state["practice.feedback"][1]
    shown = texts_of(at, "error", "warning", "info", "success")
    assert not leaks(shown, ex, {"A": ~fb.parts["A"].cells}, {"A": np.round(wrong, 2)})

    # the formula after one check; the worked cell
    hint_button(at, 2).click().run()
    assert any("\\frac{e^{" in latex for latex in texts_of(at, "latex")), "the softmax formula"
    assert not hint_button(at, 3).disabled
    fill_cells(at, ex, {"A": [[f"{x + 0.01:.2f}" for x in row] for row in wrong]})  # a changed answer: a new attempt
    click_check(at)
    hint_button(at, 3).click().run()
    assert not at.exception
    worked = hints.hints(ex, at.session_state["practice.feedback"][1])[2]
    assert any(worked.latex[0] in latex for latex in texts_of(at, "latex")), "the worked cell is shown"
    assert any(e.label.startswith("Hints (3/3)") for e in at.expander)
    attempts = len(at.session_state["practice.attempts"])
    click_check(at)
    assert len(at.session_state["practice.attempts"]) == attempts, "the same answer again: no new attempt"
    fill_cells(at, ex, {"A": [[f"{x + 0.02:.2f}" for x in row] for row in wrong]})
    click_check(at)
    assert at.session_state["practice.attempts"][-1]["hints_used"] == 3


def test_a_right_answer_shows_no_mistake_and_no_warning():
    at = open_page("app_pages/practice.py", {"kind": "masking", "level": "2", "seed": "3"})
    ex = current_exercise(at)
    fill_cells(at, ex, reference_cells(ex))
    click_check(at)
    assert not at.exception and at.success
    assert not texts_of(at, "warning") and not any("Sanity check" in i for i in texts_of(at, "info"))
    assert at.session_state["practice.attempts"][-1]["hints_used"] == 0


def test_a_multi_part_mistake_names_the_parts_it_shows_in():
    at = open_page("app_pages/practice.py", {"kind": "masking", "level": "2", "seed": "3"})
    ex = current_exercise(at)
    values = misconceptions.alternatives(ex)["mask_zero_instead_of_inf"]
    cells = reference_cells(ex)
    for name, value in values.items():
        cells[name] = [[f"{x:.2f}" for x in row] for row in value]
    fill_cells(at, ex, cells)
    click_check(at)
    named = [w for w in texts_of(at, "warning") if "Likely mistake" in w]
    assert len(named) == 1, "one mistake, named once"
    assert t("part.masked") in named[0] and t("part.A") in named[0]
    infos = " ".join(texts_of(at, "info"))
    assert "above the diagonal" in infos, "the masked cells with 0 are flagged"


def test_every_hint_opens_before_any_answer_and_no_attempt_is_recorded():
    """A stuck student reaches all three hints without checking anything; nothing is recorded
    as an attempt (so nothing steers Home's suggestion), and the hints count goes with the next check."""
    at = open_page("app_pages/practice.py", {"kind": "attention", "level": "1", "seed": "3"})
    for level in (1, 2, 3):
        button = hint_button(at, level)
        assert not button.disabled, f"hint {level} waits for an answer"
        button.click().run()
        assert not at.exception
    assert any(e.label.endswith("(3/3)") for e in at.expander)
    attempts = at.session_state["practice.attempts"] if "practice.attempts" in at.session_state else []
    assert not attempts, "opening hints records no attempt"


def test_hint_3_works_a_cell_of_the_first_step_the_learner_got_wrong():
    """attention level 1 seed 77738: S right and S / √d_k left undivided. After the check, hint 3 on the
    page works a wrong cell of the scaled scores (Z), not S₁₁."""
    at = open_page("app_pages/practice.py", {"kind": "attention", "level": "1", "seed": "77738"})
    ex = current_exercise(at)
    cells = reference_cells(ex)
    cells["scaled"] = cells["scores"]
    fill_cells(at, ex, cells)
    click_check(at)
    fb = at.session_state["practice.feedback"][1]
    case = "attention level 1 seed 77738, scaled = scores"
    assert fb.parts["scores"].correct and not fb.parts["scaled"].correct, case
    for level in (1, 2, 3):
        hint_button(at, level).click().run()
    assert not at.exception, case
    shown = [latex.strip("$\n ") for latex in texts_of(at, "latex")]
    worked = hints.hints(ex, fb)[2]
    assert worked.cell[0] == "scaled" and worked.latex[0] in shown, f"{case}: hint 3 not shown among {shown}"
    assert any(latex.startswith("Z_{") for latex in shown), f"{case}: no worked cell of Z among {shown}"
    assert not any(latex.startswith("S_{") for latex in shown), f"{case}: a cell of S worked"
