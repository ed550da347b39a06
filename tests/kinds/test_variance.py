"""variance: why scores are divided by √d_k (Var(q·k) = d_k), the softmax of a scaled and an unscaled row."""

from __future__ import annotations

import math

import numpy as np
import pytest

import exercises
from attention_core import softmax
from exercises.cli import selftest
from exercises.core import engine, misconceptions
from exercises.i18n import t
from exercises.kinds import variance
from tests import generated
from tests.kinds.common import find

SEEDS = range(60)


LEVELS = (1, 2, 3)


def _grade(ex, name, value):
    return exercises.grade(ex, {**selftest.correct_answer(ex), name: selftest.as_text(value)}).parts[name]


@pytest.mark.parametrize("level", LEVELS)
def test_dividing_by_the_row_sum_without_e_x_is_never_the_right_softmax(level):
    """S = [0, 16] once gave z / Σz = [0, 1], the unscaled softmax to 2 decimals (14 of 60 variants)."""
    for seed in SEEDS:
        ex = generated.exercise("variance", seed, level)
        z = ex.given["scores"]
        if np.all(z >= 0):
            part = _grade(ex, "A_unscaled", z / z.sum())
            assert not part.cells.all() and part.misconception == "no_exp", (level, seed, z)


@pytest.mark.parametrize("level", LEVELS)
def test_skipping_e_x_on_the_scaled_row_is_named_no_exp(level):
    """Level 1 seed 1 (S = [0, 4], d_k = 16) once named it no_scaling."""
    for seed in SEEDS:
        ex = generated.exercise("variance", seed, level)
        scaled = ex.given["scores"] / np.sqrt(ex.given["d_k"])
        if np.all(scaled >= 0):
            part = _grade(ex, "A_scaled", scaled / scaled.sum())
            assert not part.cells.all() and part.misconception == "no_exp", (level, seed, scaled)


@pytest.mark.parametrize("level", LEVELS)
def test_every_mistake_differs_from_the_answer_and_from_the_others(level):
    for seed in SEEDS:
        ex = generated.exercise("variance", seed, level)
        for part in ex.parts:
            alts = variance._mistakes(ex, part.name)
            assert misconceptions.clashes(part.reference, alts, misconceptions.separation(part)) == [], (seed, part.name)
            for mid, alt in alts.items():
                assert _grade(ex, part.name, alt).misconception == mid, (level, seed, part.name, mid)


def _readable(needed: set[float], listed: set[float]) -> bool:
    """Every exponent needed is on the level's eˣ grid, or its eˣ rounds to 0.000 (e⁻¹² and below)
    and lies within the grid's range."""
    return all(x in listed or (math.exp(x) < 0.0005 and min(listed) <= x <= max(listed)) for x in needed)


def test_level_3_aid_lists_max_shifted_exponents_and_says_so():
    """Level 3 once listed e⁴⁰ (and e⁻²⁰ = 0.000) for S as given."""
    shifted = 0
    for seed in range(30):
        ex = generated.exercise("variance", seed, 3)
        z = ex.given["scores"][0]
        scaled = z / np.sqrt(ex.given["d_k"])
        listed = {round(e.x, 9) for e in exercises.aids(ex).exp_table}
        assert max(listed) <= 10  # e¹⁰ at most: a row with larger scores is shifted below its maximum
        if np.abs(z).max() > 10:
            shifted += 1
            needed = {round(x, 9) for x in np.concatenate([z - z.max(), scaled])}
            assert _readable(needed, listed), seed
            assert max(listed) <= 10  # the level's grid: nothing beyond e¹⁰
            for lang in ("en", "zh"):
                assert t("kind.variance.prompt_shifted", lang) in engine.prompt(ex, lang)
                assert "S_j − max S" in engine.prompt(ex, lang)
            step = {s.name: s for s in exercises.solve(ex)}["A_unscaled"]
            assert r"\hat{S}" in step.display() and "e^{40}" not in step.display()
            assert step.note.key == "solution.variance.A_unscaled.shifted"
    assert shifted >= 20


def test_variance_golden_dk_64_gives_8_then_1():
    ex = find("variance", 1, lambda e: e.given["d_k"] == 64)
    refs = {p.name: float(p.reference[0, 0]) for p in ex.parts if p.shape == (1, 1)}
    assert refs == {"var_before": 64.0, "std_before": 8.0, "var_after": 1.0, "std_after": 1.0}
    assert all(ex.part(name).decimals == 0 for name in refs)


@pytest.mark.parametrize("level", [1, 2, 3])
def test_variance_scaling_flattens_the_softmax(level):
    for seed in range(30):
        ex = generated.exercise("variance", seed, level)
        d_k, z = ex.given["d_k"], ex.given["scores"]
        assert np.sqrt(d_k) == int(np.sqrt(d_k))
        np.testing.assert_allclose(ex.part("A_unscaled").reference, softmax(z))
        np.testing.assert_allclose(ex.part("A_scaled").reference, softmax(z / np.sqrt(d_k)))
        assert ex.part("A_unscaled").reference.max() > ex.part("A_scaled").reference.max()  # sharper


def test_variance_names_swapped_std_and_missing_scaling():
    ex = find("variance", 2, lambda e: True)
    d_k = ex.given["d_k"]
    base = selftest.correct_answer(ex)
    fb = exercises.grade(ex, {**base, "std_before": str(d_k)})
    assert fb.parts["std_before"].misconception == "variance_std_confused"
    fb = exercises.grade(ex, {**base, "var_after": str(int(np.sqrt(d_k)))})
    assert fb.parts["var_after"].misconception == "variance_divide_squared"
    fb = exercises.grade(ex, {**base, "A_scaled": selftest.as_text(softmax(ex.given["scores"]))})
    assert fb.parts["A_scaled"].misconception == "no_scaling"


def test_variance_solution_golden_lines():
    ex = find("variance", 1, lambda e: e.given["d_k"] == 64)
    steps = {s.name: s for s in exercises.solve(ex)}
    assert steps["std_before"].display().endswith(r"&= \sqrt{64} \\  &= 8 \end{aligned}")
    # the unscaled row is S (minus its maximum, Ŝ, when it has a score beyond ±10), the scaled one Z
    unscaled = "e^{\\hat{S}_{ij}}" if variance.needs_shift(ex.given["scores"]) else "e^{S_{ij}}"
    assert unscaled in steps["A_unscaled"].display() and "e^{Z_{ij}}" in steps["A_scaled"].display()


def test_variance_aids_hold_every_exponent_of_every_softmax():
    for level in (1, 2, 3):
        for seed in range(6):
            ex = generated.exercise("variance", seed, level)
            table = {round(e.x, 9) for e in exercises.aids(ex).exp_table}
            z = ex.given["scores"]
            z = z - z.max() if variance.needs_shift(z) else z  # a row with large scores: max-shifted
            needed = set(np.round(z, 9).ravel()) | set(np.round(ex.given["scores"] / np.sqrt(ex.given["d_k"]), 9).ravel())
            assert _readable(needed, table), ("variance", level, seed)


@pytest.mark.parametrize("level", LEVELS)
def test_every_exponential_added_by_hand_is_hand_sized(level):
    """No softmax sum of e⁸ = 2980.958 and e⁸ + e⁴ = 3035.556: a row with a score above 4 is worked minus its
    maximum, so every eˣ the solution adds is at most e⁴ ≈ 54.6."""
    for seed in range(30):
        ex = generated.exercise("variance", seed, level)
        z = np.asarray(ex.given["scores"], dtype=float)
        worked = (variance._softmax_input(z), z / np.sqrt(ex.given["d_k"]))
        assert max(row.max() for row in worked) <= 4, (level, seed, z)
        display = {s.name: s for s in exercises.solve(ex)}["A_unscaled"].display()
        assert "2980" not in display and "3035" not in display, (level, seed)


@pytest.mark.parametrize("level", LEVELS)
def test_the_minutes_count_its_real_work(level):
    """The two softmax rows (their exponentials, sums and divisions), z / √d_k and √d_k are counted, not only
    the answer cells (every level once said "about 1 minute")."""
    from exercises.core import budget

    for seed in range(10):
        ex = generated.exercise("variance", seed, level)
        ops = engine.operations(ex)
        m = ex.given["scores"].shape[1]
        cells = sum(int(np.prod(p.shape)) for p in ex.parts)
        assert ops.divisions >= 2 * m and ops.exponentials >= m - 1 and ops.cells > cells, (level, seed, ops)
        assert engine.minutes(ex) <= budget.BUDGET_MINUTES[level], (level, seed, engine.minutes(ex))
    assert engine.minutes(exercises.generate("variance", 0, 3)) > 4
