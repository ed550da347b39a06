"""Hints: three levels for every kind — a nudge, the formula, one cell worked —
built from the worked solution's own steps, unlocked one per graded attempt."""

from __future__ import annotations

import re

import numpy as np
import pytest

import exercises
from exercises import solutions
from exercises.core.grading import WRONG
from exercises.core.model import Exercise, Part
from exercises.i18n import catalog, languages
from exercises.rendering import latex
from exercises.solutions import hints
from tests import generated
from tests.test_katex import katex_errors

SEEDS = range(8)
RAW_KEY = re.compile(r"\b(?:hint|part|sanity|misconception|kind)\.[A-Za-z_]")  # a key the catalog lacks
KINDS = list(exercises.KINDS)


def exercise(kind: str, level: int, seed: int) -> Exercise:
    return generated.exercise(kind, seed, level)


def variants(kind: str):
    for level in exercises.KINDS[kind].LEVELS:
        for seed in SEEDS:
            yield exercise(kind, level, seed)


def test_unlocking_gives_one_more_hint_per_graded_attempt():
    assert [hints.available(n) for n in range(5)] == [1, 2, 3, 3, 3]
    assert hints.LEVELS == 3


@pytest.mark.parametrize("kind", KINDS)
def test_three_levels_that_render_in_every_language(kind):
    for ex in variants(kind):
        found = hints.hints(ex)
        assert [h.level for h in found] == [1, 2, 3], ex.id
        for h in found:
            for lang in languages():
                for message in (h.text, h.note):
                    if message is None:
                        continue
                    text = message.render(lang)
                    assert text and not RAW_KEY.search(text) and "{" not in text, (ex.id, lang, text)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_a_nudge_of_its_own(kind):
    """A new kind needs a catalog nudge hint.<kind>.nudge (or its own hints(ex))."""
    if hasattr(exercises.KINDS[kind], "hints"):
        return
    assert f"hint.{kind}.nudge" in catalog("en")
    ex = exercise(kind, exercises.KINDS[kind].LEVELS[0], 0)
    nudge = hints.hints(ex)[0]
    assert nudge.text.key == f"hint.{kind}.nudge" and nudge.latex == ()


@pytest.mark.parametrize("kind", KINDS)
def test_the_formula_is_the_solution_s_own(kind):
    for ex in variants(kind):
        formula = hints.hints(ex)[1]
        steps = {s.name: s for s in solutions.solve(ex)}
        assert formula.latex, ex.id
        allowed = {steps[p.name].latex for p in ex.parts if p.name in steps and not p.is_choice} | {hints.FORWARD_PASS}
        assert set(formula.latex) <= allowed, ex.id
        asked = [p for p in ex.parts if not p.is_choice and p.name in steps]
        assert {steps[p.name].latex for p in asked} <= set(formula.latex), "every asked part has its formula"


@pytest.mark.parametrize("kind", KINDS)
def test_one_cell_is_worked_out_from_the_solution(kind):
    for ex in variants(kind):
        worked = hints.hints(ex)[2]
        part = ex.parts[0]
        if part.is_choice:
            right = int(part.reference[0, 0])
            assert worked.text.key == "hint.rule_out" and worked.cell is None
            assert worked.text.params["letter"] != chr(ord("A") + right), "never the right option"
            assert worked.note is not None and worked.note.key.startswith("misconception."), "with its reason"
            continue
        i, j = hints.worked_cell(part)
        assert worked.cell == (part.name, i, j), ex.id
        step = {s.name: s for s in solutions.solve(ex)}[part.name]
        assert worked.latex == (step.cell(i, j).latex,), "the solution's own derivation of that cell"
        value = latex.decimal(part.reference[i, j], part.decimals)
        assert value in worked.latex[0] or step.exact_cells[i][j] in worked.latex[0], (ex.id, value)


def test_the_worked_cell_is_of_the_first_step_the_learner_got_wrong():
    """attention level 1 seed 77738: S right, S / √d_k not divided (wrong). Hint 3 works a cell of the
    scaled scores the learner got wrong, not S₁₁; before any answer it works the first step."""
    ex = exercises.generate("attention", 77738, 1)
    answer = {p.name: np.array(p.reference) for p in ex.parts}
    answer["scaled"] = answer["scores"]
    fb = exercises.grade(ex, answer)
    case = "attention level 1 seed 77738, scaled = scores"
    assert fb.parts["scores"].correct and not fb.parts["scaled"].correct, case
    worked = hints.hints(ex, fb)[2]
    assert worked.cell is not None and worked.cell[0] == "scaled", f"{case}: hint 3 works {worked.cell}"
    _, i, j = worked.cell
    assert fb.parts["scaled"].status[i, j] == WRONG, f"{case}: cell ({i + 1}, {j + 1}) was right"
    assert worked.latex[0].startswith(f"Z_{{{i + 1}{j + 1}}}"), f"{case}: {worked.latex[0]}"
    assert worked.text.params["part"].key == "part.scaled", case
    assert hints.hints(ex)[2].cell[0] == "scores", f"{case}: before an answer, the first step"
    unread = exercises.grade(ex, {**answer, "scores": [["x", "1"], ["1", "1"]]})
    assert not unread.graded and hints.hints(ex, unread)[2].cell[0] == "scores", f"{case}: an unread answer"


@pytest.mark.parametrize("kind", [k for k in KINDS if getattr(exercises.KINDS[k], "hints", None) is None])
def test_hint_3_follows_the_first_wrong_part_in_every_kind(kind):
    """Every kind with a second part: the first part right, the second off by 1.37 in every finite cell;
    hint 3 works a wrong cell of the second part, with the solution's own derivation of it."""
    checked = 0
    for ex in variants(kind):
        later = [p for p in ex.parts[1:] if not p.is_choice and np.isfinite(p.reference).any()]
        if ex.parts[0].is_choice or not later:
            continue
        target = later[0]
        answer = {p.name: (int(p.reference[0, 0]) if p.is_choice else np.array(p.reference)) for p in ex.parts}
        answer[target.name] = np.where(np.isfinite(target.reference), target.reference + 1.37, target.reference)
        fb = exercises.grade(ex, answer)
        first = next((p.name for p in ex.parts if fb.parts[p.name].status is not None
                      and (fb.parts[p.name].status == WRONG).any()), None)
        case = f"{kind} level {ex.level} seed {ex.seed}, {target.name} off by 1.37"
        assert first == target.name, f"{case}: first wrong part {first}"
        worked = hints.hints(ex, fb)[2]
        assert worked.cell is not None and worked.cell[0] == target.name, f"{case}: hint 3 works {worked.cell}"
        _, i, j = worked.cell
        assert fb.parts[target.name].status[i, j] == WRONG, f"{case}: cell ({i + 1}, {j + 1}) was right"
        step = {s.name: s for s in solutions.solve(ex)}.get(target.name)
        if step is not None and step.shape == target.shape:
            assert worked.latex == (step.cell(i, j).latex,), case
        checked += 1
    if any(len([p for p in ex.parts if not p.is_choice]) > 1 for ex in variants(kind)):
        assert checked, f"{kind}: no exercise with a second part checked"


def test_the_worked_cell_skips_cells_that_teach_nothing():
    causal_A = np.array([[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.2, 0.3, 0.5]])
    assert hints.worked_cell(Part("A", (3, 3), causal_A)) == (1, 0)
    assert hints.worked_cell(Part("masked", (2, 2), np.array([[1.0, -np.inf], [0.0, 3.0]]))) == (1, 1)
    assert hints.worked_cell(Part("scores", (2, 2), np.array([[0.0, 1.0], [1.0, 0.0]]))) == (0, 0)
    assert hints.worked_cell(Part("scores", (1, 2), np.array([[4.0, 2.0]]))) == (0, 0)


def test_a_causal_softmax_works_out_a_real_row():
    ex = next(e for e in variants("softmax") if e.given.get("causal"))
    worked = hints.hints(ex)[2]
    assert worked.cell[1] == 1, "row 1 of a causal A is [1, 0, …]: the hint works on row 2"
    assert "+" in worked.latex[0], "the denominator adds two exponentials"


def test_two_option_questions_are_not_given_away():
    part = Part("q", (1, 1), np.array([[1.0]]), decimals=0, options=("a", "b"))
    ex = Exercise(kind="concepts", seed=0, level=1, version=1, given={}, parts=(part,))
    worked = hints.worked(ex)
    assert worked.text.key == "hint.two_options" and worked.note is None


def test_a_kind_can_bring_its_own_hints(monkeypatch):
    module = exercises.KINDS["scores"]
    own = [hints.Hint(1, exercises.Msg("hint.scores.nudge"))]
    monkeypatch.setattr(module, "hints", lambda ex: own, raising=False)
    ex = exercises.generate("scores", 1234, 1)  # a fresh object: nothing memoised yet
    assert hints.hints(ex) == own


def test_hints_are_the_same_for_the_same_exercise():
    a = hints.hints(exercises.generate("attention", 3, 2))
    b = hints.hints(exercises.Exercise.from_dict(exercises.generate("attention", 3, 2).to_dict()))
    assert a == b


def test_every_hint_formula_and_derivation_renders_in_katex():
    items = [(f"{ex.id} hint {h.level}", line) for kind in KINDS for ex in variants(kind)
             for h in hints.hints(ex) for line in h.latex]
    failures, summary = katex_errors(items)
    assert summary["checked"] == len(items)
    assert failures == [], failures[:5]


OWN_LABELS = sorted(key.split(".")[1:] for key in catalog("en") if key.count(".") == 2 and key.startswith("part.")
                    and key.split(".")[1] in exercises.KINDS)


@pytest.mark.parametrize("kind,name", OWN_LABELS)
def test_a_part_a_kind_names_its_own_way_is_named_so_in_hint_3_and_its_cells(kind, name):
    """RoPE's scores are Q_rot K_rotᵀ: hint 3 on them and their cells' accessible names say so, never the
    general "The scores S = Q Kᵀ" (every earlier part right, this one off by 1.37)."""
    from ui.answer_grid import cell_label

    ex = next(e for e in (exercise(kind, level, 5) for level in exercises.KINDS[kind].LEVELS)
              if name in [p.name for p in e.parts])  # the first level that asks this part
    answer = {p.name: np.array(p.reference, dtype=float) for p in ex.parts}
    answer[name] = np.where(np.isfinite(answer[name]), answer[name] + 1.37, answer[name])
    worked = hints.hints(ex, exercises.grade(ex, answer))[2]
    case = f"{kind} level {ex.level} seed 5, {name} wrong"
    assert worked.cell is not None and worked.cell[0] == name, f"{case}: hint 3 works {worked.cell}"
    for lang in languages():
        own, general = catalog(lang)[f"part.{kind}.{name}"], catalog(lang)[f"part.{name}"]
        text = worked.text.render(lang)
        # the kind's own name may contain the general one ("the output O = o_T / ℓ_T"): look outside it
        assert own in text and general not in text.replace(own, ""), f"{case} ({lang}): {text}"
        label = cell_label(name, 1, 1, lang, kind=kind)
        assert own[1:] in label and general[1:] not in label.replace(own[1:], ""), (
            f"{case} ({lang}): the cell is named {label}")
