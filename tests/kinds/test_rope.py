"""The RoPE kind: its references against attention_core's rotation and the exact rotation of sympy, the
angles from the prompt's table, every mistake named exactly and rounded, a careful student who rounds
graded right, each level's sizes and minutes, the solution's score from the position difference, and
exercises stored by earlier versions still showing and grading."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import sympy

import exercises
from attention_core.positions import rope, rope_loop, rope_scores, rotation_angles
from exercises.core import budget, engine, grading
from exercises.core.numbers import round_half_up
from exercises.kinds import rope as R
from tests import generated
from tests.stored_exercise import still_shows_and_grades

SEEDS = range(30)
LEVELS = R.LEVELS
STORED = json.loads((Path(__file__).parent / "stored" / "rope.json").read_text())


def _case(ex) -> str:
    return f"rope level {ex.level} seed {ex.seed}"


def _rotated(ex, name: str) -> np.ndarray:
    g = ex.given
    return rope(g[name], g["pos"], g["theta"])


@pytest.mark.parametrize("seed", range(20))
def test_rope_rotates_pairs_like_the_loop_and_scores_see_only_the_distance(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(2, 6)), int(rng.integers(1, 4))
    Q, K = rng.normal(size=(n, 2 * m)), rng.normal(size=(n, 2 * m))
    pos, theta = np.arange(n, dtype=float), rng.uniform(1, 90, size=m)
    np.testing.assert_allclose(rope(Q, pos, theta), rope_loop(Q, pos, theta), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(rope(Q, pos, theta), axis=1), np.linalg.norm(Q, axis=1))  # a turn
    shift = float(rng.integers(1, 50))  # the same distances, further along: the same scores
    np.testing.assert_allclose(rope_scores(Q, K, pos + shift, theta), rope_scores(Q, K, pos, theta), atol=1e-9)


@pytest.mark.parametrize("level", LEVELS)
def test_references_are_the_rotation_exactly_and_the_angles_come_from_the_table(level):
    for seed in SEEDS:
        ex = generated.exercise("rope", seed, level)
        g, where = ex.given, _case(ex)
        Q_rot, K_rot = _rotated(ex, "Q"), _rotated(ex, "K")
        np.testing.assert_allclose(ex.part("Q_rot").reference, Q_rot, atol=1e-12, err_msg=where)
        np.testing.assert_allclose(ex.part("K_rot").reference, K_rot, atol=1e-12, err_msg=where)
        np.testing.assert_allclose(ex.part("scores").reference, Q_rot @ K_rot.T, atol=1e-12, err_msg=where)
        if seed < 5:  # the floats of the exact values, to the last bit or one step from it
            exact = R.exact_rotated(g["Q"], g["pos"], g["theta"]) * R.exact_rotated(g["K"], g["pos"], g["theta"]).T
            floats = np.array(sympy.N(exact, 30).tolist(), dtype=float)
            np.testing.assert_array_almost_equal_nulp(ex.part("scores").reference + 8, floats + 8, nulp=2)
        angles = rotation_angles(g["pos"], g["theta"]).ravel()
        assert all(a % 30 == 0 for a in angles) and (level > 1 or all(a % 90 == 0 for a in angles)), where
        for a in angles:
            assert f"cos {int(a)}° = " in ex.params["table"], where


def test_the_prompts_table_writes_the_exact_values():
    table = R.angle_table(np.array([0.0, 1.0, 2.0]), np.array([90.0, 30.0]))
    assert table == ("cos 0° = 1, sin 0° = 0; cos 30° = √3/2 ≈ 0.866, sin 30° = 1/2; cos 60° = 1/2, sin 60° = "
                     "√3/2 ≈ 0.866; cos 90° = 0, sin 90° = 1; cos 180° = -1, sin 180° = 0")
    assert "cos 210° = -√3/2 ≈ -0.866, sin 210° = -1/2" in R.angle_table(np.array([7.0]), np.array([30.0]))


def _careful(ex, places):
    Q_rot = round_half_up(_rotated(ex, "Q"), places)
    K_rot = round_half_up(_rotated(ex, "K"), places)
    return {"Q_rot": Q_rot, "K_rot": K_rot, "scores": round_half_up(Q_rot @ K_rot.T, places)}


@pytest.mark.parametrize("level", LEVELS)
def test_a_careful_student_who_rounds_is_right(level):
    for seed in SEEDS:
        ex = generated.exercise("rope", seed, level)
        for places in (2, 3, None):
            fb = exercises.grade(ex, _careful(ex, places))
            assert fb.correct and fb.score == 1.0 and all((p.status == grading.RIGHT).all() for p in fb.parts.values()), \
                f"{_case(ex)}, rounding to {places}"


@pytest.mark.parametrize("level", LEVELS)
def test_every_mistake_is_named_exact_and_rounded(level):
    named = set()
    for seed in SEEDS:
        ex = generated.exercise("rope", seed, level)
        right = {p.name: p.reference for p in ex.parts}
        g = ex.given
        for part in ex.parts:
            found = R.mistakes_of(ex, part.name)
            if part.name == "scores":  # the records' guarded mistakes, of the given Q and K
                found = {**found, "transposed_scores (of Q, K)": g["K"] @ g["Q"].T}
            for mid, alt in found.items():
                for value in (alt, round_half_up(alt, 2)):
                    got = exercises.grade(ex, {**right, part.name: value}).misconception
                    assert got == mid.split(" ")[0], f"{_case(ex)} part {part.name} mistake {mid}: named {got}"
                named.add(mid)
    assert {"rope_one_angle", "rope_sin_sign", "rope_not_applied", "rope_query_only", "rope_transposed_scores"} <= named


def test_the_mistakes_are_what_their_messages_say():
    ex = exercises.generate("rope", 4, 3)
    g = ex.given
    Q_rot, K_rot = _rotated(ex, "Q"), _rotated(ex, "K")
    one = rope(g["Q"], np.ones(len(g["pos"])), g["theta"])
    np.testing.assert_allclose(R.mistakes_of(ex, "Q_rot")["rope_one_angle"], one, atol=1e-12)
    back = rope(g["Q"], g["pos"], -g["theta"]), rope(g["K"], g["pos"], -g["theta"])
    scores = R.mistakes_of(ex, "scores")
    np.testing.assert_allclose(scores["rope_sin_sign"], back[0] @ back[1].T, atol=1e-12)
    np.testing.assert_allclose(scores["rope_not_applied"], g["Q"] @ g["K"].T, atol=1e-12)
    np.testing.assert_allclose(scores["rope_query_only"], Q_rot @ g["K"].T, atol=1e-12)
    np.testing.assert_allclose(scores["rope_transposed_scores"], K_rot @ Q_rot.T, atol=1e-12)


@pytest.mark.parametrize("level", LEVELS)
def test_each_level_has_its_sizes_and_minutes(level):
    n, m, thetas, starts = R.SIZES[level]
    for seed in SEEDS:
        ex = generated.exercise("rope", seed, level)
        g, where = ex.given, _case(ex)
        assert g["Q"].shape == g["K"].shape == (n, 2 * m) and tuple(g["theta"]) in thetas, where
        assert g["pos"][0] in starts and (np.diff(g["pos"]) == 1).all(), where
        assert set(np.unique(np.concatenate([g["Q"], g["K"]]))) <= set(R.VALUES[level]), where
        for M in (g["Q"], g["K"]):
            assert (M != 0).any(axis=1).all() and (M != 0).any(axis=0).all(), where  # no line all zeros
        assert engine.minutes(ex) <= budget.BUDGET_MINUTES[level], f"{where}: {engine.minutes(ex)} minutes"


def test_the_solution_shows_the_score_from_the_position_difference():
    ex = exercises.generate("rope", 3, 2)
    step = {s.name: s for s in exercises.solve(ex)}["relative"]
    n = ex.given["Q"].shape[0]
    assert step.value[0, 0] == ex.part("scores").reference[0, n - 1], _case(ex)
    assert rf"R({n - 1}\theta)" in step.cell(0, 0).latex, _case(ex)


def _card_rotation(degrees: np.ndarray) -> np.ndarray:
    """R(φ) of the Home card's q' = q R(pos θ) and the sheet's row-vector matrix [[cos, sin], [−sin, cos]], one
    2×2 block per pair."""
    blocks = [np.array([[np.cos(a), np.sin(a)], [-np.sin(a), np.cos(a)]]) for a in np.deg2rad(degrees)]
    out = np.zeros((2 * len(blocks), 2 * len(blocks)))
    for i, b in enumerate(blocks):
        out[2 * i:2 * i + 2, 2 * i:2 * i + 2] = b
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_the_distance_line_and_the_home_card_give_the_computed_scores(level):
    """S_pr = q_p R((pos_p − pos_r)θ) k_rᵀ with the card's R: the solution line, the sheet and the card agree with
    the scores (the other order of the difference turns the wrong way)."""
    assert R.HOME.formula == r"q' = q\,R(\mathrm{pos}\,\theta)"
    assert r"(\mathrm{pos}_{p} - \mathrm{pos}_{r})\theta" in R.SHEET.formulas[1].source
    for seed in range(20):
        ex = generated.exercise("rope", seed, level)
        g, S = ex.given, ex.part("scores").reference
        n = g["Q"].shape[0]
        step = {s.name: s for s in exercises.solve(ex)}["relative"]
        assert rf"(\mathrm{{pos}}_{{1}} - \mathrm{{pos}}_{{{n}}})\theta" in step.latex, _case(ex)
        np.testing.assert_allclose(g["Q"][:1] @ _card_rotation(g["pos"][0] * g["theta"]), _rotated(ex, "Q")[:1],
                                   atol=1e-12, err_msg=_case(ex))  # the card's R turns as the exercise does
        for p in range(n):
            for r in range(n):
                line = g["Q"][p] @ _card_rotation((g["pos"][p] - g["pos"][r]) * g["theta"]) @ g["K"][r]
                assert abs(line - S[p, r]) < 1e-9, f"{_case(ex)} cell S_{p + 1}{r + 1}: {line} against {S[p, r]}"


@pytest.mark.parametrize("level", LEVELS)
def test_theta_is_shown_in_degrees_and_the_positions_as_plain_numbers(level):
    from exercises.solutions import given_latex
    from exercises.worksheets import model, text, typst

    for seed in range(5):
        ex = generated.exercise("rope", seed, level)
        g, where = ex.given, _case(ex)
        degrees = ", ".join(f"{int(a)}^{{\\circ}}" for a in g["theta"])
        positions = ", ".join(str(int(p)) for p in g["pos"])
        lines = dict(given_latex(ex))
        assert lines["theta"] == rf"\theta = \left({degrees}\right)", (where, lines["theta"])
        assert lines["pos"] == rf"\mathrm{{pos}} = \left({positions}\right)", (where, lines["pos"])
        shown = {s.name: s for s in model.problem(ex, 1, "en").given}
        assert typst._typst_given(shown["theta"]) == "theta = (" + ", ".join(
            f"{int(a)} degree" for a in g["theta"]) + ")", where
        assert typst._typst_given(shown["pos"]) == f'upright("pos") = ({positions})', where
        assert text.latex_given(shown["theta"]) == rf"\theta = ({degrees})", where


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_scores_box_and_its_mistake_name_the_rotated_scores(lang):
    from exercises.i18n import t
    from exercises.worksheets import model

    ex = exercises.generate("rope", 5, 3)
    answer = {p.name: p.reference for p in ex.parts}
    answer["scores"] = answer["scores"].T  # K_rot Q_rotᵀ
    fb = exercises.grade(ex, answer)
    part = fb.parts["scores"]
    assert part.misconception == "rope_transposed_scores", _case(ex)
    assert "K_rot Q_rotᵀ" in t(f"misconception.{part.misconception}", lang), (_case(ex), lang)
    label = t(part.label, lang)
    assert "Q_rot K_rotᵀ" in label and "Q Kᵀ" not in label, (_case(ex), lang, label)
    asks = dict((p.name, words) for p, words in model.problem(ex, 1, lang).asks)
    assert "Q_rot K_rotᵀ" in asks["scores"], (_case(ex), lang, asks["scores"])


def test_the_scores_step_says_which_of_its_two_matrices_is_which():
    """Level 3 seed 5: the rotated rows as written give −1.36, the exact scores −1.37: the note says which is which."""
    ex = exercises.generate("rope", 5, 3)
    step = {s.name: s for s in exercises.solve(ex)}["scores"]
    assert step.work_result != step.decimals, _case(ex)  # two matrices in a row
    assert step.note.key == "solution.rope.scores.note_rounded", f"{_case(ex)} step scores"
    assert "first" in str(step.note) and "exact" in str(step.note)
    plain = {s.name: s for s in exercises.solve(exercises.generate("rope", 0, 1))}["scores"]
    assert plain.note.key == "solution.rope.scores.note", "rope level 1 seed 0 step scores: one matrix, no such note"


def _pairs_of_halves(X: np.ndarray, pos: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """X rotated with pair i = columns (i, i + m): the half-split layout, written out independently."""
    m = len(theta)
    out = np.array(X, dtype=float)
    for p in range(X.shape[0]):
        for i in range(m):
            a = np.deg2rad(pos[p] * theta[i])
            x, y = X[p, i], X[p, i + m]
            out[p, i], out[p, i + m] = x * np.cos(a) - y * np.sin(a), x * np.sin(a) + y * np.cos(a)
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_positions_off_by_one_and_the_half_split_are_named_in_the_rotated_rows(level):
    """Off by one leaves the scores unchanged (only distances count), so Q_rot and K_rot, asked at every level,
    name it; the half split (level 3, m = 2) is named in the rows and the scores; both stay apart from the rest."""
    for seed in range(20):
        ex = generated.exercise("rope", seed, level)
        g, right, where = ex.given, {p.name: p.reference for p in ex.parts}, _case(ex)
        assert {"Q_rot", "K_rot"} <= set(right), where
        shift = 1.0 if g["pos"][0] == 0 else -1.0
        off = {"Q_rot": rope(g["Q"], g["pos"] + shift, g["theta"]), "K_rot": rope(g["K"], g["pos"] + shift, g["theta"])}
        np.testing.assert_allclose(off["Q_rot"] @ off["K_rot"].T, right["scores"], atol=1e-9, err_msg=where)
        cases = [("rope_position_off_by_one", name, value) for name, value in off.items()]
        if len(g["theta"]) > 1:
            half = {"Q_rot": _pairs_of_halves(g["Q"], g["pos"], g["theta"]),
                    "K_rot": _pairs_of_halves(g["K"], g["pos"], g["theta"])}
            half["scores"] = half["Q_rot"] @ half["K_rot"].T
            cases += [("rope_half_split", name, value) for name, value in half.items()]
        for mid, name, value in cases:
            for typed in (value, round_half_up(value, 2)):
                fb = exercises.grade(ex, {**right, name: typed})
                got = fb.parts[name].misconception
                assert not fb.parts[name].correct and got == mid, f"{where} part {name} mistake {mid}: named {got}"
    for lang in ("en", "zh"):
        for mid in ("rope_position_off_by_one", "rope_half_split"):
            catalog = exercises.i18n.catalog(lang)
            assert catalog.get("misconception." + mid) and catalog.get("progress.mistake." + mid), (lang, mid)


@pytest.mark.parametrize("stored", STORED, ids=lambda d: f"version {d['version']} level {d['level']}")
def test_an_exercise_of_an_earlier_version_still_shows_solves_and_grades(stored):
    ex = exercises.Exercise.from_dict(stored)
    assert ex.version < R.VERSION
    still_shows_and_grades(ex)
    for name in ("Q", "K"):
        np.testing.assert_allclose(ex.part(f"{name}_rot").reference, _rotated(ex, name), atol=1e-12)
    assert ex.params["table"] == R.angle_table(ex.given["pos"], ex.given["theta"]), f"stored version {ex.version}"
