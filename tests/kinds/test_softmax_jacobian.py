"""softmax_jacobian: J = diag(a) − aᵀa of one row, and why a sharp row passes almost no gradient back."""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from attention_core import softmax
from attention_core.ops import softmax_jacobian, softmax_jacobian_loop
from exercises.core import grading
from exercises.core.numbers import round_half_up
from tests.kinds.common import (
    assert_careful_students_are_right,
    central_difference,
    named_mistakes,
)

SEEDS = range(50)


def _jacobian_student(ex, places):
    a = round_half_up(softmax(ex.given["z"]), places)
    a_s = round_half_up(softmax(ex.given["z"] / np.sqrt(ex.given["d_k"])), places)
    return {"a": a, "J": round_half_up(np.diag(a.ravel()) - np.outer(a, a), places),
            "a_scaled": a_s, "J_scaled": round_half_up(np.diag(a_s.ravel()) - np.outer(a_s, a_s), places)}


@pytest.mark.parametrize("seed", range(20))
def test_softmax_jacobian_matches_finite_differences_and_the_loop(seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(1, int(rng.integers(2, 7)))) * 3
    J = softmax_jacobian(z)
    np.testing.assert_allclose(J, central_difference(lambda x: softmax(x), z), atol=1e-8)
    np.testing.assert_allclose(J, softmax_jacobian_loop(z), atol=1e-15)
    np.testing.assert_allclose(J.sum(axis=1), 0, atol=1e-12)  # the weights always sum to 1


@pytest.mark.parametrize("level", (1, 2, 3))
def test_softmax_jacobian_references_are_numpy_s(level):
    for seed in SEEDS:
        ex = exercises.generate("softmax_jacobian", seed, level)
        z, root = ex.given["z"], np.sqrt(ex.given["d_k"])
        for name, value in (("a", softmax(z)), ("J", softmax_jacobian(z)), ("a_scaled", softmax(z / root)),
                            ("J_scaled", softmax_jacobian(z / root))):
            np.testing.assert_allclose(ex.part(name).reference, value, atol=1e-12, err_msg=f"{ex.id} {name}")
        # the sharper row passes back less: its largest entry is visibly smaller
        assert np.abs(ex.part("J").reference).max() + 0.02 <= np.abs(ex.part("J_scaled").reference).max() + 1e-12


@pytest.mark.parametrize("level", (1, 2, 3))
def test_softmax_jacobian_careful_student_who_rounds_is_right(level):
    assert_careful_students_are_right("softmax_jacobian", level, _jacobian_student)


@pytest.mark.parametrize("level", (1, 2, 3))
def test_softmax_jacobian_mistakes_are_named_exact_and_rounded(level):
    from exercises.kinds import softmax_jacobian as K

    named = named_mistakes("softmax_jacobian", level, lambda ex, part: K.mistakes_of(ex.given["z"], ex.given["d_k"], part))
    assert {"jacobian_diagonal_only", "jacobian_off_diagonal_sign", "jacobian_no_diagonal",
            "jacobian_unscaled_weights", "no_scaling"} <= named


def test_softmax_jacobian_a_wrong_weight_carries_into_its_jacobian():
    ex = exercises.generate("softmax_jacobian", 0, 2)
    answer = _jacobian_student(ex, 2)
    a = answer["a"].copy()
    a[0, 0] += 0.1  # a wrong weight; J computed from it is consistent, not right
    answer = {**answer, "a": a, "J": np.diag(a.ravel()) - np.outer(a, a)}
    fb = exercises.grade(ex, answer)
    assert not fb.correct
    assert (fb.parts["J"].status == grading.CONSISTENT).any()


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("level", [1, 2, 3])
def test_the_row_in_the_text_and_in_the_grid_read_alike(level, lang):
    """z = [0, 2 ln 2] in the text, [0 1.38629] in the given grid (level 1 seed 5): the text gives the grid's decimals."""
    from exercises.core import engine
    from exercises.rendering import latex as L

    for seed in range(10):
        ex = exercises.generate("softmax_jacobian", seed, level)
        shown = "[" + ", ".join(L.number(float(x)) for x in ex.given["z"][0]) + "]"
        text = engine.prompt(ex, lang)
        assert f"z = {ex.params['z_text']} ≈ {shown}" in text, f"softmax_jacobian level {level} seed {seed} ({lang})"


@pytest.mark.parametrize("level", ["1", "2", "3"])
def test_an_exercise_stored_at_version_1_still_shows_and_grades(level):
    import json
    from pathlib import Path

    from tests.stored_exercise import still_shows_and_grades

    stored = json.loads((Path(__file__).parent / "stored" / "softmax_jacobian-v1.json").read_text())[level]
    ex = exercises.Exercise.from_dict(stored)
    assert ex.version == 1 and "z_decimals" not in ex.params, f"softmax_jacobian level {level} stored at version 1"
    still_shows_and_grades(ex)
