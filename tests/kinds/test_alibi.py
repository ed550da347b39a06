"""alibi: slopes 2^(−8h/H), the bias −m(i − j) on the causal triangle, the biased scores and the weights,
against a direct loop written out here; careful students right; each level's sizes, heads and minutes; an
exercise stored at version 1 (the scores called S) still shows and grades. (Its mistakes are the step records':
each named exact and rounded, and each made in alibi, by tests/test_misconceptions.py.)"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import exercises
from attention_core.alibi import alibi_bias, alibi_slope, biased
from attention_core.ops import softmax
from exercises.core import engine
from exercises.core.numbers import round_half_up
from exercises.kinds import alibi as K
from tests.kinds.common import (
    assert_moodle_round_trip,
    careful_and_selftest_answers_grade_as_such,
    levels_hold_without_runaway,
    references_agree,
    solution_steps,
)
from tests.stored_exercise import still_shows_and_grades

STORED = json.loads((Path(__file__).parent / "stored" / "alibi-v1.json").read_text())  # by level, at version 1


def _loop(given) -> dict[str, np.ndarray]:
    """Cell by cell: the slope, −m (i − j) or −∞, the biased score, then e^z over the row's sum."""
    S = np.asarray(given["scores"], dtype=float)
    n, root = len(S), math.sqrt(given["d_k"])
    out = {"slope": np.array([[2.0 ** (-8 * h / given["H"]) for h in given["h"]]])}
    for k, m in enumerate(out["slope"][0]):
        B, Z, A = np.zeros((n, n)), np.zeros((n, n)), np.zeros((n, n))
        for i in range(n):
            for j in range(n):
                B[i, j] = -m * (i - j) if j <= i else -np.inf
                Z[i, j] = S[i, j] / root + B[i, j]
            total = sum(math.exp(Z[i, j]) for j in range(i + 1))
            for j in range(i + 1):
                A[i, j] = math.exp(Z[i, j]) / total
        if len(given["h"]) == 1:
            out.update(bias=B, masked=Z, A=A)
        else:
            out[f"A{k + 1}"] = A
    return out


def careful(ex, places):
    """A student who rounds every value they write (the scaled scores, the biased ones, the weights)."""
    S = np.asarray(ex.given["scores"], dtype=float)
    ref = _loop(ex.given)
    out = {"slope": ref["slope"]}
    for k, _m in enumerate(ref["slope"][0]):
        heads = len(ex.given["h"])
        Z = round_half_up(round_half_up(S / math.sqrt(ex.given["d_k"]), places) + _loop(
            {**ex.given, "h": ex.given["h"][k:k + 1]})["bias"], places)
        suffix = f"{k + 1}" if heads > 1 else ""
        if not suffix:
            out.update(bias=ref["bias"], masked=Z)
        out[f"A{suffix}"] = round_half_up(np.exp(Z) / np.exp(Z).sum(axis=1, keepdims=True), places)
    return {name: out[name] for name in ex.part_names}


def test_references_are_a_direct_loop():
    references_agree(K.ID, _loop)


def test_the_slopes_and_the_reference_function():
    assert alibi_slope(np.arange(1, 9), 8).tolist() == [2.0 ** -h for h in range(1, 9)], "H = 8: 1/2 … 1/256"
    masked = biased(np.zeros((3, 3)), alibi_bias(3, 0.5))
    A = softmax(masked)
    assert masked[2].tolist() == [-1.0, -0.5, 0.0] and np.isneginf(masked[0, 1:]).all(), masked
    np.testing.assert_allclose(A.sum(axis=1), 1.0, err_msg="rows of A sum to 1")


def test_each_level_has_its_sizes_heads_and_minutes():
    models = Counter()

    def check(ex):
        n, values, widths, choices = K.SIZES[ex.level]
        case = f"alibi level {ex.level} seed {ex.seed}"
        assert ex.given["scores"].shape == (n, n) and ex.given["d_k"] in widths, case
        assert (ex.given["H"], tuple(int(h) for h in ex.given["h"])) in choices, case
        assert ex.part_names == K.part_names(ex.level, len(ex.given["h"])), case
        models[ex.level, ex.given["H"], tuple(ex.given["h"])] += 1

    levels_hold_without_runaway(K.ID, check)
    for level in K.LEVELS:
        assert sum(1 for key in models if key[0] == level) >= 2, f"alibi level {level}: one model only {models}"


@pytest.mark.parametrize("level", K.LEVELS)
def test_careful_students_are_right(level):
    careful_and_selftest_answers_grade_as_such(K.ID, level, careful, range(12))


def test_the_solution_derives_the_bias_and_says_so():
    ex = exercises.generate(K.ID, 1, 2)
    steps = solution_steps(ex)
    n = len(ex.given["scores"])
    assert "positions back" in str(steps["bias"].cell(n - 1, 0).note), steps["bias"].cell(n - 1, 0)
    assert r"-\infty" in steps["bias"].cell(0, n - 1).latex
    assert "m_h = 2^(−8h/H)" in engine.prompt(ex) and "{" not in engine.prompt(ex, "zh"), engine.prompt(ex)


def test_moodle_cloze_round_trips_through_the_grader():
    assert_moodle_round_trip(K.ID)


@pytest.mark.parametrize("level", ["1", "2", "3"])
def test_an_exercise_stored_at_version_1_still_shows_and_grades(level):
    ex = exercises.Exercise.from_dict(STORED[level])
    case = f"alibi level {level} stored at version 1"
    assert ex.version == 1 < K.VERSION and "S" in STORED[level]["given"] and "scores" in ex.given, case
    expected = _loop(ex.given)
    for part in ex.parts:
        np.testing.assert_allclose(part.reference, expected[part.name], err_msg=f"{case} part {part.name}")
    steps = still_shows_and_grades(ex)
    assert [s.name for s in steps] == list(ex.part_names), case
