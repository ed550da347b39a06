"""padding_mask's constructive generator (issue 14, VERSION 2): each query's visible scores drawn from the
tuples that are not all equal, the mistakes of M decided once per padding pattern and those of A by closed
forms (exercises/kinds/padding_mask/distinct.py) instead of the pipeline's mistake runs. Each shortcut is
held here to the general rule it stands for (misconceptions.collides and _shared.apart.apart_from_rounded,
misconceptions' own values), and an exercise stored at VERSION 1 still loads, solves and grades."""

from __future__ import annotations

import json

import numpy as np
import pytest

import exercises
from exercises.core import engine, misconceptions, pipeline
from exercises.core.model import Exercise
from exercises.core.numbers import round_half_up
from exercises.kinds import padding_mask as P
from exercises.kinds._shared.apart import apart_from_rounded
from exercises.kinds.padding_mask import distinct
from tests.stored_exercise import still_shows_and_grades

KIND = "padding_mask"


def _exercise(given: dict, level: int) -> Exercise:
    return Exercise(kind=KIND, seed=0, level=level, version=P.VERSION, given=given, parts=tuple(P._parts(given, level)),
                    params={})


def _kept_by_the_general_rules(ex: Exercise) -> bool:
    return (not misconceptions.collides(ex, guards=P.GUARDS)
            and apart_from_rounded(ex, P.GUARDS, engine.default_chain))


def _closed_form(given: dict, level: int) -> bool:
    key = (tuple(int(p) for p in given["pad"][0]), bool(given["causal"]))
    if not distinct.pattern_apart(*key, P.GUARDS):
        return False
    if "A" not in P.SIZES[level][3]:
        return True
    collides, apart = distinct.check_weights(pipeline.run(given), P.GUARDS)
    return not collides and apart


@pytest.mark.parametrize("level", (1, 2, 3))
def test_closed_forms_decide_as_the_general_rules(level):
    rng = np.random.default_rng(2000 + level)
    refused = 0
    for _ in range(300):
        given, _ = P._draw(rng, level)
        expected = _kept_by_the_general_rules(_exercise(given, level))
        assert _closed_form(given, level) == expected, given
        refused += not expected
    assert refused > 0 or level == 1  # level 1 asks no A: no variant is refused there


def _patterns():
    """Every (pad, causal) the levels draw."""
    for level, (n, pads, sides, _) in P.SIZES.items():
        for count in pads:
            for side in sides:
                pad = tuple(1 if (j >= n - count if side == "right" else j < count) else 0 for j in range(n))
                for causal in ((False, True) if level == 1 else (True,)):
                    yield pad, causal


@pytest.mark.parametrize("level", (1, 2, 3))
def test_the_kinds_references_are_the_pipelines_run(level):
    """generate hands the engine its own values as Draft.env: exactly pipeline.run(given)'s, bit for bit."""
    rng = np.random.default_rng(5000 + level)
    for _ in range(100):
        given, _ = P._draw(rng, level)
        key = (tuple(int(p) for p in given["pad"][0]), bool(given["causal"]))
        for with_mistakes in (False, True):
            mine = P.references(given, key, with_mistakes)[0]
            theirs = pipeline.run(given)
            assert list(mine) == list(theirs)
            for name, value in theirs.items():
                assert np.array_equal(np.asarray(mine[name]), np.asarray(value)) and \
                    np.asarray(mine[name]).dtype == np.asarray(value).dtype, name


def test_every_padding_pattern_keeps_the_mistakes_of_m_apart():
    """pattern_apart is True for every pattern the levels draw: M's mistakes never clash, so no draw is
    refused for them (and at M and Z̃ the scores change nothing)."""
    patterns = list(_patterns())
    assert len(patterns) == 2 + 2 + 4
    for pad, causal in patterns:
        assert distinct.pattern_apart(pad, causal, P.GUARDS), (pad, causal)


@pytest.mark.parametrize("level", (2, 3))
def test_weight_mistakes_are_the_pipelines(level):
    """The rows of weights_table are the reference A and misconceptions.by_part's A of every guarded mistake,
    bit for bit (those with a NaN or an infinity left out on both sides)."""
    rng = np.random.default_rng(3000 + level)
    for _ in range(40):
        given, _ = P._draw(rng, level)
        ex = _exercise(given, level)
        table = distinct.weights_table(pipeline.reference_env(ex), P.GUARDS)
        np.testing.assert_array_equal(table[0], ex.part("A").reference.reshape(-1))
        mine = sorted(row.tobytes() for row in table[1:] if np.isfinite(row).all())
        theirs = sorted(np.asarray(v, dtype=float).reshape(-1).tobytes()
                        for v in misconceptions.by_part(ex, P.GUARDS).get("A", {}).values() if np.isfinite(v).all())
        assert mine == theirs
        rounded = engine.default_chain(ex, {}, 2)
        np.testing.assert_array_equal(rounded["A"], round_half_up(table[0], 2).reshape(rounded["A"].shape))
        np.testing.assert_array_equal(rounded["masked"], ex.part("masked").reference)  # halves: nothing to round
        assert misconceptions.separation(ex.part("A")) == distinct.GAP


@pytest.mark.parametrize("level", (1, 2, 3))
def test_every_draw_teaches(level):
    """No draw is refused for a query whose visible scores are all equal: _draw never makes one."""
    rng = np.random.default_rng(4000 + level)
    for _ in range(300):
        given, _ = P._draw(rng, level)
        assert P._teaches_given(given)


@pytest.mark.parametrize("level", (1, 2, 3))
def test_variety_over_200_seeds(level):
    """Main (VERSION 1) had 200 distinct given values over seeds 0–199 at every level."""
    seen = {repr(sorted((k, np.asarray(v).tolist()) for k, v in exercises.generate(KIND, s, level).given.items()))
            for s in range(200)}
    assert len(seen) >= 180


def test_generate_runs_no_mistake_through_the_pipeline(monkeypatch):
    for pad, causal in _patterns():  # each pattern's own check is misconceptions' (once per pattern)
        distinct.pattern_apart(pad, causal, P.GUARDS)
    calls = []
    monkeypatch.setattr(pipeline, "run_mistake", lambda *a, **k: calls.append(a[2]))
    for level in P.LEVELS:
        for seed in range(10):
            exercises.generate(KIND, 7000 + seed, level)
    assert calls == []


def test_generated_exercises_keep_every_guarantee():
    for level in P.LEVELS:
        for seed in range(60):
            ex = exercises.generate(KIND, seed, level)
            assert P._teaches_given(ex.given), (level, seed)
            assert _kept_by_the_general_rules(ex), (level, seed)


STORED = json.loads(
    "{\"1\":{\"kind\":\"padding_mask\",\"seed\":3,\"level\":1,\"version\":1,\"given\":{\"scaled\":[[2.0,1.0,2.0],[2.0,0.0,0.0],[2"
    ".0,0.0,1.0]],\"pad\":[[0.0,0.0,1.0]],\"causal\":true},\"parts\":[{\"name\":\"M\",\"shape\":[3,3],\"decimals\":0,\"reference"
    "\":[[0.0,\"-inf\",\"-inf\"],[0.0,0.0,\"-inf\"],[0.0,0.0,\"-inf\"]]},{\"name\":\"masked\",\"shape\":[3,3],\"decimals\":0,\"refe"
    "rence\":[[2.0,\"-inf\",\"-inf\"],[2.0,0.0,\"-inf\"],[2.0,0.0,\"-inf\"]]}],\"params\":{\"n\":3,\"pad\":\"0, 0, 1\",\"padded\":\"3"
    "\"}},\"2\":{\"kind\":\"padding_mask\",\"seed\":3,\"level\":2,\"version\":1,\"given\":{\"scaled\":[[2.0,-2.0,-1.0],[-2.0,0.0,0"
    ".0],[-1.0,2.0,0.0]],\"pad\":[[1.0,0.0,0.0]],\"causal\":true},\"parts\":[{\"name\":\"M\",\"shape\":[3,3],\"decimals\":0,\"re"
    "ference\":[[\"-inf\",\"-inf\",\"-inf\"],[\"-inf\",0.0,\"-inf\"],[\"-inf\",0.0,0.0]]},{\"name\":\"masked\",\"shape\":[3,3],\"deci"
    "mals\":0,\"reference\":[[\"-inf\",\"-inf\",\"-inf\"],[\"-inf\",0.0,\"-inf\"],[\"-inf\",2.0,0.0]]},{\"name\":\"A\",\"shape\":[3,3]"
    ",\"decimals\":2,\"reference\":[[0.0,0.0,0.0],[0.0,1.0,0.0],[0.0,0.8807970779778823,0.11920292202211755]]}],\"para"
    "ms\":{\"n\":3,\"pad\":\"1, 0, 0\",\"padded\":\"1\"}},\"3\":{\"kind\":\"padding_mask\",\"seed\":3,\"level\":3,\"version\":1,\"given\":"
    "{\"scaled\":[[0.0,3.0,0.5,3.0],[-2.0,1.5,1.0,-1.0],[-0.5,3.0,3.0,3.0],[-1.5,1.0,1.5,0.5]],\"pad\":[[0.0,0.0,0.0,"
    "1.0]],\"causal\":true},\"parts\":[{\"name\":\"M\",\"shape\":[4,4],\"decimals\":0,\"reference\":[[0.0,\"-inf\",\"-inf\",\"-inf\"]"
    ",[0.0,0.0,\"-inf\",\"-inf\"],[0.0,0.0,0.0,\"-inf\"],[0.0,0.0,0.0,\"-inf\"]]},{\"name\":\"masked\",\"shape\":[4,4],\"decimal"
    "s\":2,\"reference\":[[0.0,\"-inf\",\"-inf\",\"-inf\"],[-2.0,1.5,\"-inf\",\"-inf\"],[-0.5,3.0,3.0,\"-inf\"],[-1.5,1.0,1.5,\"-"
    "inf\"]]},{\"name\":\"A\",\"shape\":[4,4],\"decimals\":2,\"reference\":[[1.0,0.0,0.0,0.0],[0.029312230751356316,0.970687"
    "7692486436,0.0,0.0],[0.014874112078410105,0.4925629439607949,0.4925629439607949,0.0],[0.030058887569574023,0"
    ".3661922162818002,0.6037488961486258,0.0]]}],\"params\":{\"n\":4,\"pad\":\"0, 0, 0, 1\",\"padded\":\"4\"}}}"
)


@pytest.mark.parametrize("level", ("1", "2", "3"))
def test_an_exercise_stored_at_version_1_still_shows_and_grades(level):
    ex = exercises.Exercise.from_dict(STORED[level])
    assert ex.version == 1 < P.VERSION
    steps = still_shows_and_grades(ex)
    assert [s.name for s in steps] == list(ex.part_names)
    for step in steps:
        np.testing.assert_allclose(step.value, ex.part(step.name).reference)
