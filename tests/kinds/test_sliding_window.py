"""sliding_window: the mask of a causal window of w keys with s sinks, the weights, the output and the cache
sizes, against a dense mask written out cell by cell here; its cache mistakes named exact and rounded (the
mask's are the record M's: tests/test_misconceptions.py); careful students right; each level's sizes and
minutes; an exercise stored at version 1 still shows and grades."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import exercises
from attention_core.windows import window_mask, window_mask_loop
from exercises.core import engine, pipeline
from exercises.core.numbers import round_half_up
from exercises.kinds import sliding_window as K
from tests.kinds.common import (
    assert_moodle_round_trip,
    assert_named_exactly,
    careful_and_selftest_answers_grade_as_such,
    levels_hold_without_runaway,
    references_agree,
    solution_steps,
)
from tests.stored_exercise import still_shows_and_grades

STORED = json.loads((Path(__file__).parent / "stored" / "sliding_window-v1.json").read_text())


def _dense(given, params=None) -> dict[str, np.ndarray]:
    """A dense 0/1 matrix of what each query sees, then −∞ where it sees nothing, the softmax and A V."""
    Z = np.asarray(given["scaled"], dtype=float)
    n, w, s = len(Z), int(given["window"]), int(given["sinks"])
    sees = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            sees[i, j] = 1 if j <= i and (j >= i - w + 1 or j < s) else 0
    M = np.where(sees == 1, 0.0, -np.inf)
    e = np.where(sees == 1, np.exp(Z), 0.0)
    out = {"M": M, "A": e / e.sum(axis=1, keepdims=True)}
    if "V" in given:
        out["O"] = out["A"] @ given["V"]
    return out


def careful(ex, places):
    """A student who rounds each value they write (the weights, the output) to `places`."""
    ref = _dense(ex.given)
    out = {"M": ref["M"], "cache_floats": ex.part("cache_floats").reference}
    if "A" in ex.part_names:
        out["A"] = round_half_up(ref["A"], places)
    if "O" in ex.part_names:
        out["O"] = round_half_up(out["A"] @ ex.given["V"], places)
    return out


def test_references_are_a_dense_mask():
    references_agree(K.ID, _dense)


def test_the_mask_rule_and_its_loop_agree_and_the_cache_sizes():
    for n in range(1, 9):
        for w in range(1, n + 1):
            for s in range(0, n):
                np.testing.assert_array_equal(window_mask(n, w, s), window_mask_loop(n, w, s), err_msg=f"{n} {w} {s}")
    # a window as wide as the text with no sinks is the plain causal mask
    np.testing.assert_array_equal(np.isneginf(window_mask(4, 4, 0)), np.triu(np.ones((4, 4)), 1) == 1)
    for seed in range(10):
        ex = exercises.generate(K.ID, seed, 1)
        p, g = ex.params, ex.given
        expected = [2 * (g["window"] + g["sinks"]) * p["d_head"], 2 * p["tokens"] * p["d_head"]]
        assert ex.part("cache_floats").reference.tolist() == [expected], f"sliding_window level 1 seed {seed}"


def test_each_level_has_its_sizes_and_minutes():
    def check(ex):
        n, shapes, names, _ = K.SIZES[ex.level]
        case = f"sliding_window level {ex.level} seed {ex.seed}"
        assert ex.part_names == names and ex.given["scaled"].shape == (n, n), case
        assert (ex.given["window"], ex.given["sinks"]) in shapes, case
        M = ex.part("M").reference
        # the window hides some key that the causal mask alone would show, and a sink is seen from afar
        assert (np.isneginf(M) & (np.tril(np.ones((n, n))) == 1)).any(), case

    levels_hold_without_runaway(K.ID, check, distinct_at_least=36)


def _cache_mistakes(ex, name: str) -> dict[str, np.ndarray]:
    if name != "cache_floats":
        return {}  # the mask's mistakes are the record M's: named with the catalog's (test_misconceptions)
    sizes = K.caches(ex.given["window"], ex.given["sinks"], ex.params)
    return {mid: np.array([floats], dtype=float) for mid, floats in sizes.items() if mid}


@pytest.mark.parametrize("level", K.LEVELS)
def test_its_cache_mistakes_are_named(level):
    assert_named_exactly(K.ID, level, _cache_mistakes, set(K.MISTAKES))


@pytest.mark.parametrize("level", K.LEVELS)
def test_careful_students_are_right(level):
    careful_and_selftest_answers_grade_as_such(K.ID, level, careful, range(12))


def test_the_solution_derives_every_mask_cell():
    ex = exercises.generate(K.ID, 2, 3)
    steps = solution_steps(ex)
    n, w = len(ex.given["scaled"]), ex.given["window"]
    notes = {str(steps["M"].cell(i, j).note) for i in range(n) for j in range(n)}
    assert any("slid out" in x for x in notes) and any("sink" in x for x in notes), notes
    assert steps["M"].cell(n - 1, 0).latex.endswith(f"(j = 1 \\le s = {ex.given['sinks']})") or w >= n, \
        steps["M"].cell(n - 1, 0).latex
    assert "T = " in engine.prompt(ex) and "{" not in engine.prompt(ex, "zh"), engine.prompt(ex)


def test_moodle_cloze_round_trips_through_the_grader():
    assert_moodle_round_trip(K.ID)


@pytest.mark.parametrize("level", ["1", "2", "3"])
def test_an_exercise_stored_at_version_1_still_shows_and_grades(level):
    """Version 1 gave the scaled scores as Z: read back, they are `scaled`, and the records compute its parts."""
    ex = exercises.Exercise.from_dict(STORED[level])
    case = f"sliding_window level {level} stored at version 1"
    assert ex.version == 1 < K.VERSION and "scaled" in ex.given and "Z" not in ex.given, case
    env = pipeline.run(ex.given)
    for part in ex.parts:
        if part.name != "cache_floats":
            np.testing.assert_allclose(part.reference, env[part.name], err_msg=f"{case} part {part.name}")
    assert [s.name for s in still_shows_and_grades(ex)] == ex.part_names, case
