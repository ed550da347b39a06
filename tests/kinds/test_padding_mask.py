"""padding_mask: the additive mask of a padded sequence (a padded key hidden from every query), Z̃ = Z + M and
the softmax, with the convention for a query that sees no key (its weights all 0).

References against NumPy written out here; every catalogued mistake named and apart from the answer and
from what a careful student writes; careful students graded right; each level's sizes, patterns and
minutes; exercises stored at earlier versions still show and grade."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import exercises
from attention_core.ops import padding_mask, softmax_visible
from exercises.core import engine, misconceptions, pipeline
from exercises.core.levels import spec
from exercises.kinds import padding_mask as K
from tests.kinds.common import (
    assert_guarded_mistakes_apart,
    careful_and_selftest_answers_grade_as_such,
    careful_by_pipeline,
    distinct_givens,
)
from tests.stored_exercise import still_shows_and_grades

SEEDS = range(50)
STORED = {version: json.loads((Path(__file__).parent / "stored" / f"padding_mask-v{version}.json").read_text())
          for version in (1, 2)}  # exercises.generate("padding_mask", seed, level).to_dict() by that version's code


def _softmax(Z: np.ndarray) -> np.ndarray:
    """Row-wise softmax written out again (not attention_core's): e^z over the row's sum, 0 for −∞."""
    out = np.zeros(Z.shape)
    for i, row in enumerate(Z):
        seen = np.isfinite(row)
        if seen.any():
            e = np.exp(row[seen] - row[seen].max())
            out[i, seen] = e / e.sum()
    return out


def answers(ex) -> dict[str, np.ndarray]:
    return {p.name: np.array(p.reference) for p in ex.parts}


# ---------------------------------------------------------------- references


def test_the_golden_masks():
    M = padding_mask([0, 0, 1], causal=True)
    inf = -np.inf
    assert M.tolist() == [[0, inf, inf], [0, 0, inf], [0, 0, inf]]
    assert padding_mask([1, 0, 0], causal=False).tolist() == [[inf, 0, 0]] * 3
    # left padding under the causal mask: the first query sees no key, and attends to nothing
    A = softmax_visible(np.zeros((3, 3)) + padding_mask([1, 0, 0], causal=True))
    assert A.tolist() == [[0, 0, 0], [0, 1, 0], [0, 0.5, 0.5]]


def test_a_stack_of_paddings_gives_the_stack_of_masks():
    """pad (B, 1, n) → M (B, n, n), each the mask of its own row (the sampler draws candidates stacked)."""
    pads = np.array([[[0, 0, 1]], [[1, 0, 0]], [[1, 1, 0]]])  # (3, 1, 3)
    for causal in (False, True):
        stacked = padding_mask(pads, causal)
        assert stacked.shape == (3, 3, 3)
        for i, pad in enumerate(pads):
            assert np.array_equal(stacked[i], padding_mask(pad, causal)), (i, causal)
            assert np.array_equal(stacked[i], padding_mask(pad.ravel(), causal)), (i, causal)
    given = {"scaled": np.zeros((3, 3, 3)), "pad": pads, "causal": True}
    for mid in ("padding_on_queries", "padding_ignored", "no_mask", None):
        stacked = pipeline.run(given, mistakes=() if mid is None else (mid,))
        for i in range(3):
            one = pipeline.run({"scaled": np.zeros((3, 3)), "pad": pads[i], "causal": True},
                               mistakes=() if mid is None else (mid,))
            for name in ("M", "masked", "A"):
                assert np.array_equal(stacked[name][i], one[name]), (mid, i, name)


@pytest.mark.parametrize("level", K.LEVELS)
def test_references_are_numpys(level):
    empty_rows = 0
    for seed in SEEDS:
        ex = exercises.generate(K.ID, seed, level)
        g, ref, case = ex.given, answers(ex), f"padding_mask level {level} seed {seed}"
        pad = np.asarray(g["pad"], dtype=bool).ravel()
        n = pad.size
        hidden = np.zeros((n, n), dtype=bool)
        hidden[:, pad] = True  # a padded key, for every query
        if g["causal"]:
            hidden |= np.arange(n)[None, :] > np.arange(n)[:, None]
        assert np.array_equal(np.isneginf(ref["M"]), hidden) and np.all(ref["M"][~hidden] == 0), case
        masked = np.where(hidden, -np.inf, g["scaled"])
        np.testing.assert_array_equal(ref["masked"], masked, err_msg=case)
        if "A" in ref:
            np.testing.assert_allclose(ref["A"], _softmax(masked), atol=1e-12, err_msg=case)
            empty_rows += int(np.all(hidden, axis=1).any())
    if level == 3:
        assert empty_rows > 0, "the convention for a query that sees no key is exercised"


# ---------------------------------------------------------------- levels: sizes, patterns, minutes


@pytest.mark.parametrize("level", K.LEVELS)
def test_each_level_has_its_sizes_patterns_and_minutes(level):
    n, counts, sides, names = K.SIZES[level]
    patterns = set()
    for seed in range(100):
        ex = exercises.generate(K.ID, seed, level)
        g, case = ex.given, f"padding_mask level {level} seed {seed}"
        pad = np.asarray(g["pad"], dtype=int).ravel()
        assert ex.part_names == names and g["scaled"].shape == (n, n), case
        assert set(np.unique(g["scaled"])) <= set(spec(level).values), case
        padded = int(pad.sum())
        side = "right" if pad[-1] else "left"
        assert padded in counts and side in sides and np.array_equal(pad, np.sort(pad) if side == "right"
                                                                      else np.sort(pad)[::-1]), case
        assert g["causal"] or level == 1, case
        patterns.add((tuple(pad), bool(g["causal"])))
        visible = np.isfinite(ex.part("masked").reference)
        for i, row in enumerate(ex.part("masked").reference):
            seen = row[visible[i]]
            assert seen.size < 2 or np.ptp(seen) > 0, f"{case}: query {i + 1} sees its keys all score the same"
        assert engine.within_budget(ex), f"{case}: {engine.minutes(ex):.1f} minutes"
        assert ex.params["pad"] == ", ".join(map(str, pad)), case
    assert len(patterns) == len(counts) * len(sides) * (2 if level == 1 else 1), f"level {level}: {patterns}"


@pytest.mark.parametrize("level", K.LEVELS)
def test_variety_over_200_seeds(level):
    seen = distinct_givens(K.ID, level)
    assert seen >= 190, f"padding_mask level {level}: {seen} distinct exercises in 200 seeds"


# ---------------------------------------------------------------- mistakes


@pytest.mark.parametrize("level", K.LEVELS)
def test_every_guarded_mistake_stays_apart_from_the_answer_and_the_careful_student(level):
    assert_guarded_mistakes_apart(K.ID, level, careful_by_pipeline)


@pytest.mark.parametrize("mid, part", [("padding_on_queries", "M"), ("padding_ignored", "M"),
                                       ("padding_after_softmax", "A"), ("no_mask", "M"),
                                       ("mask_zero_instead_of_inf", "A"), ("padding_empty_row_uniform", "A")])
def test_its_mistakes_are_named(mid, part):
    named = 0
    for level in K.LEVELS:
        for seed in range(10):
            ex = exercises.generate(K.ID, seed, level)
            alt = misconceptions.alternatives(ex).get(mid, {})
            if part not in alt:
                continue
            fb = exercises.grade(ex, {**answers(ex), **{k: np.round(v, 2) for k, v in alt.items()}})
            assert fb.parts[part].misconception == mid, f"padding_mask level {level} seed {seed}"
            named += 1
    assert named >= 3, f"{mid} applied to {named} exercises"


def test_padding_on_queries_masks_rows_not_columns():
    given = {"scaled": np.zeros((3, 3)), "pad": np.array([[0, 0, 1]]), "causal": False}
    right = pipeline.run(given)["M"]
    wrong = pipeline.run(given, mistakes={"padding_on_queries"})["M"]
    assert np.isneginf(right[:, 2]).all() and not np.isneginf(right[:, :2]).any()
    assert np.isneginf(wrong[2]).all() and not np.isneginf(wrong[:2]).any()


def test_the_empty_row_convention_is_stated_and_graded():
    ex = next(e for e in (exercises.generate(K.ID, s, 3) for s in SEEDS)
              if np.all(np.isneginf(e.part("M").reference), axis=1).any())
    case = f"padding_mask level 3 seed {ex.seed}"
    assert "all 0" in engine.prompt(ex) and "全部写 0" in engine.prompt(ex, "zh"), case
    rows = np.all(np.isneginf(ex.part("M").reference), axis=1)  # the queries that see no key
    assert np.all(ex.part("A").reference[rows] == 0), case
    uniform = np.array(ex.part("A").reference)
    uniform[rows] = 1 / uniform.shape[1]  # the −1e9 reading
    fb = exercises.grade(ex, {**answers(ex), "A": np.round(uniform, 2)})
    assert not fb.correct and fb.parts["A"].misconception == "padding_empty_row_uniform", case
    right = exercises.grade(ex, answers(ex))
    assert right.correct and not right.warnings, case


# ---------------------------------------------------------------- careful students


@pytest.mark.parametrize("level", K.LEVELS)
def test_careful_students_are_right(level):
    careful_and_selftest_answers_grade_as_such(K.ID, level, careful_by_pipeline, SEEDS)


# ---------------------------------------------------------------- stored exercises


@pytest.mark.parametrize("version", sorted(STORED))
@pytest.mark.parametrize("level", ["1", "2", "3"])
def test_an_exercise_stored_at_an_earlier_version_still_shows_and_grades(version, level):
    ex = exercises.Exercise.from_dict(STORED[version][level])
    case = f"padding_mask level {level} stored at version {version}"
    assert ex.version == version < K.VERSION, case
    env = pipeline.run(ex.given)
    for part in ex.parts:
        np.testing.assert_allclose(part.reference, env[part.name], err_msg=f"{case} part {part.name}")
    steps = still_shows_and_grades(ex)
    assert [s.name for s in steps] == list(ex.part_names), case
    for step in steps:
        np.testing.assert_allclose(step.value, ex.part(step.name).reference, err_msg=f"{case} step {step.name}")


@pytest.mark.parametrize("level", [2, 3])
def test_the_note_on_a_query_that_sees_no_key_agrees_in_number(level):
    from exercises.i18n import t

    seen = 0
    for seed in range(20):
        ex = exercises.generate("padding_mask", seed, level)
        steps = {s.name: s for s in exercises.solve(ex)}
        if "A" not in steps or steps["A"].note is None or "no key" not in str(steps["A"].note):
            continue
        seen += 1
        note, where = steps["A"].note, f"padding_mask level {level} seed {seed}"
        queries = note.params["queries"]
        text = str(note)
        if "," in queries:
            assert text.startswith(f"Queries {queries} see no key"), (where, text)
        else:
            assert text.startswith(f"Query {queries} sees no key (its whole row"), (where, text)
        assert t(note.key, "zh", **note.params).startswith(f"查询 {queries} 看不到任何键"), where
    assert seen, f"padding_mask level {level}: no query without keys in seeds 0–19"
