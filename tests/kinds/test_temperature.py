"""temperature: softmax(s / τ) for a few τ and the soft cap c·tanh(s / c), against a direct formula written
out here; careful students right; each level's sizes and minutes. (Its mistakes are the step records': each
named exact and rounded, and each made in temperature, by tests/test_misconceptions.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

import exercises
from attention_core.temperature import soft_cap, soft_cap_backward, softmax_temperature
from exercises.core import engine
from exercises.core.numbers import round_half_up
from exercises.kinds import temperature as K
from tests.kinds.common import (
    assert_moodle_round_trip,
    careful_and_selftest_answers_grade_as_such,
    central_difference,
    levels_hold_without_runaway,
    references_agree,
    solution_steps,
)


def _direct(given) -> dict[str, np.ndarray]:
    """Each weight e^(s_j/τ) / Σ_k e^(s_k/τ) and each capped score c·tanh(s/c), one number at a time."""
    s = [float(x) for x in np.ravel(given["s"])]
    out = {}
    for k, tau in enumerate(np.ravel(given["tau"])):
        e = [math.exp(x / tau) for x in s]
        out[f"a_tau{k + 1}"] = np.array([[x / sum(e) for x in e]])
    if "cap" in given:
        c = given["cap"]
        capped = [c * math.tanh(x / c) for x in s]
        e = [math.exp(x) for x in capped]
        out["s_capped"] = np.array([capped])
        out["a_capped"] = np.array([[x / sum(e) for x in e]])
    return out


def careful(ex, places):
    """A student who rounds every value they write (s / τ, the capped scores, the weights) to `places`."""
    s = np.asarray(ex.given["s"], dtype=float)
    out = {}
    for k, tau in enumerate(np.ravel(ex.given["tau"])):
        z = round_half_up(s / tau, places)
        out[f"a_tau{k + 1}"] = round_half_up(np.exp(z) / np.exp(z).sum(), places)
    if "cap" in ex.given:
        capped = round_half_up(ex.given["cap"] * np.round(np.tanh(s / ex.given["cap"]), K.TABLE_PLACES), places)
        out["s_capped"] = capped
        out["a_capped"] = round_half_up(np.exp(capped) / np.exp(capped).sum(), places)
    return out


def test_references_are_the_direct_formula():
    references_agree(K.ID, _direct)


def test_the_temperature_limits_and_the_cap_gradient():
    s = np.array([[1.0, 2.0, 4.0]])
    np.testing.assert_allclose(softmax_temperature(s, 1e-3), [[0, 0, 1]], atol=1e-12, err_msg="τ → 0: one-hot")
    np.testing.assert_allclose(softmax_temperature(s, 1e6), [[1 / 3] * 3], atol=1e-5, err_msg="τ → ∞: uniform")
    assert np.all(np.abs(soft_cap(np.array([-50.0, 50.0]), 3.0)) < 3.0), "the cap bounds every score"
    g = np.array([0.3, -1.0, 2.0])
    x = np.array([-1.5, 0.5, 2.0])
    numeric = central_difference(lambda v: soft_cap(v, 2.0) @ g, x)[0]
    np.testing.assert_allclose(soft_cap_backward(x, g, 2.0), numeric, atol=1e-8, err_msg="soft cap backward")
    with pytest.raises(ValueError, match="positive"):
        softmax_temperature(s, 0.0)


def test_each_level_has_its_sizes_and_minutes():
    def check(ex):
        n, values, taus, cap = K.SIZES[ex.level]
        case = f"temperature level {ex.level} seed {ex.seed}"
        assert ex.given["s"].shape == (1, n) and set(np.ravel(ex.given["s"])) <= set(values), case
        assert np.ravel(ex.given["tau"]).tolist() == list(taus) and 1.0 not in taus, case
        assert ("s_capped" in ex.part_names) == (cap is not None), case

    levels_hold_without_runaway(K.ID, check, distinct_at_least=12)


@pytest.mark.parametrize("level", K.LEVELS)
def test_careful_students_are_right(level):
    careful_and_selftest_answers_grade_as_such(K.ID, level, careful, range(12))


def test_the_solution_and_the_table():
    ex = exercises.generate(K.ID, 3, 2)
    for step in solution_steps(ex).values():
        np.testing.assert_allclose(step.value, ex.part(step.name).reference, err_msg=f"step {step.name}")
        assert step.cell(0, 0).latex, f"step {step.name}: cell (1, 1) has no derivation"
    text = engine.prompt(ex)
    assert "tanh(x/2) ≈ 0.462" in text and "e^(2·tanh(x/2)) ≈" in text, text
    assert "τ = 1/2, 2" in text and "{" not in engine.prompt(ex, "zh"), text


def test_moodle_cloze_round_trips_through_the_grader():
    assert_moodle_round_trip(K.ID)
