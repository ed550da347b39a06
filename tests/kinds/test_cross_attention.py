"""cross_attention: queries from one sequence, keys and values from another (n_q ≠ n_k).

References against NumPy written out here; every catalogued mistake named, exact and rounded, and apart
from what a careful student writes; careful students graded right; each level's sizes, hand-friendly
numbers and minutes; exercises stored at earlier versions still show and grade."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import exercises
from exercises.core import engine, misconceptions, pipeline, sampler
from exercises.core.model import Exercise
from exercises.kinds import cross_attention as K
from tests import generated
from tests.kinds.common import (
    assert_guarded_mistakes_apart,
    careful_and_selftest_answers_grade_as_such,
    careful_by_pipeline,
    distinct_givens,
)
from tests.stored_exercise import still_shows_and_grades

SEEDS = range(50)
STORED = {version: json.loads((Path(__file__).parent / "stored" / f"cross_attention-v{version}.json").read_text())
          for version in (1, 2)}  # exercises.generate("cross_attention", seed, level).to_dict() by that version's code


def _softmax(Z: np.ndarray) -> np.ndarray:
    """Row-wise softmax written out again (not attention_core's)."""
    e = np.exp(Z - Z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def answers(ex) -> dict[str, np.ndarray]:
    return {p.name: np.array(p.reference) for p in ex.parts}


# ---------------------------------------------------------------- references


@pytest.mark.parametrize("level", K.LEVELS)
def test_references_are_numpys(level):
    for seed in SEEDS:
        ex = generated.exercise(K.ID, seed, level)
        g, ref, case = ex.given, answers(ex), f"cross_attention level {level} seed {seed}"
        if "H" in g:
            Q, K_, V = g["X"] @ g["W_Q"], g["H"] @ g["W_K"], g["H"] @ g["W_V"]
            for name, M in (("Q", Q), ("K", K_), ("V", V)):
                np.testing.assert_allclose(ref[name], M, err_msg=f"{case} part {name}")
        else:
            Q, K_, V = g["Q"], g["K"], g["V"]
        S = np.einsum("ik,jk->ij", Q, K_)  # (n_q, n_k)
        A = _softmax(S / np.sqrt(g["d_k"]))
        np.testing.assert_allclose(ref["scores"], S, err_msg=case)
        np.testing.assert_allclose(ref["scaled"], S / np.sqrt(g["d_k"]), err_msg=case)
        np.testing.assert_allclose(ref["A"], A, atol=1e-12, err_msg=case)
        np.testing.assert_allclose(ref["O"], A @ V, atol=1e-12, err_msg=case)
        assert g["causal"] is False, case  # no mask belongs in cross-attention


# ---------------------------------------------------------------- levels: sizes, numbers, minutes


@pytest.mark.parametrize("level", K.LEVELS)
def test_each_level_has_its_sizes_hand_friendly_numbers_and_minutes(level):
    n_q, n_k, d_k, d_v, d = K.SIZES[level]
    for seed in range(100):
        ex = generated.exercise(K.ID, seed, level)
        g, ref, case = ex.given, answers(ex), f"cross_attention level {level} seed {seed}"
        assert ex.part_names == ([*K.FROM_X, *K.PARTS] if d else K.PARTS), case
        assert ref["scores"].shape == (n_q, n_k) and ref["O"].shape == (n_q, d_v) and g["d_k"] == d_k, case
        drawn = ("X", "H", "W_Q", "W_K", "W_V") if d else ("Q", "K", "V")
        for name in drawn:
            M = g[name]
            assert (M != 0).any(axis=1).all() and (M != 0).any(axis=0).all(), f"{case}: a zero line in {name}"
        if level == 1:
            assert (g["Q"] == 1).all() and set(np.unique(g["K"])) <= {0, 1} and set(np.unique(g["V"])) <= {1, 2}, case
        S = ref["scores"]
        assert np.abs(S).max() <= K.MAX_SCORE and np.array_equal(S, np.round(S)), case
        assert (S.max(axis=1) > S.min(axis=1)).all(), f"{case}: a query's scores all equal"
        assert n_q == 1 or (S[0] != S[-1]).any(), f"{case}: the queries' rows are the same"
        V = ref["V"] if "V" in ref else g["V"]
        assert V.max() > V.min(), f"{case}: every value the same"
        assert engine.within_budget(ex), f"{case}: {engine.minutes(ex):.1f} minutes"


@pytest.mark.parametrize("level", K.LEVELS)
def test_variety_over_200_seeds(level):
    seen = distinct_givens(K.ID, level)
    assert seen >= 180, f"cross_attention level {level}: {seen} distinct exercises in 200 seeds"


# ---------------------------------------------------------------- mistakes


@pytest.mark.parametrize("level", K.LEVELS)
def test_every_guarded_mistake_stays_apart_from_the_answer_and_the_careful_student(level):
    assert_guarded_mistakes_apart(K.ID, level, careful_by_pipeline)


def test_a_mistake_within_a_careful_students_reach_is_refused():
    """S = (3, 2, 2), V = (2, 1, 2): no_exp's O (1.714) is 0.012 from the answer (1.726), apart from it, but
    within what a careful student reaches (A written 0.45, 0.27, 0.27 gives 1.71): graded right, so refused."""
    given = {"Q": np.ones((1, 1, 4)), "K": np.array([[[1, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0]]], dtype=float),
             "V": np.array([[[2], [1], [2]]], dtype=float), "d_k": 4, "causal": False}  # a batch of one
    batch = sampler.Batch(given, ("Q", "K", "V"), K.PARTS, decimals=2)
    env = batch.computed(given)
    assert not sampler.clashing(batch, env, K.GUARDS)[0]
    ex = Exercise(kind=K.ID, seed=0, level=1, version=K.VERSION, given=batch.candidate(0),
                  parts=tuple(sampler._parts(batch, env, 0)))
    assert not sampler.outside_reach(ex, misconceptions.by_part(ex, K.GUARDS), engine.KINDS[ex.kind].chain), "cross_attention S = (3, 2, 2), V = (2, 1, 2)"


@pytest.mark.parametrize("mid", ("cross_causal_mask", "softmax_columns", "no_exp", "no_scaling"))
def test_its_mistakes_are_named_exact_and_rounded(mid):
    named = 0
    for level in K.LEVELS:
        for seed in range(10):
            ex = generated.exercise(K.ID, seed, level)
            alt = misconceptions.alternatives(ex).get(mid)
            if alt is None:
                continue
            for name, value in alt.items():
                for shown in (value, np.round(value, 2)):
                    fb = exercises.grade(ex, {**answers(ex), name: shown})
                    assert fb.parts[name].misconception == mid, f"cross_attention level {level} seed {seed} {name}"
            named += 1
    assert named >= 20, f"{mid} applied to {named} exercises"


def test_the_memory_feeds_keys_and_values_not_x():
    ex = exercises.generate(K.ID, 0, 3)
    env = pipeline.run(ex.given)
    np.testing.assert_allclose(env["K"], ex.given["H"] @ ex.given["W_K"])
    wrong = pipeline.run(ex.given, mistakes={"cross_keys_from_queries"})
    np.testing.assert_allclose(wrong["K"], ex.given["X"] @ ex.given["W_K"])  # self-attention on X
    # its O has the right shape and is named
    fb = exercises.grade(ex, {**answers(ex), "O": np.round(wrong["O"], 2)})
    assert fb.parts["O"].misconception == "cross_keys_from_queries", "cross_attention level 3 seed 0"


@pytest.mark.parametrize("lang", ("en", "zh"))
@pytest.mark.parametrize("seed", (0, 5, 11))
def test_the_solution_says_keys_and_values_come_from_the_memory(seed, lang):
    """Level 3's formula reads K = H W_K, V = H W_V: the sentence under it says H too, never X."""
    ex = generated.exercise(K.ID, seed, 3)
    steps = {s.name: s for s in exercises.solve(ex)}
    for name in ("K", "V"):
        case = f"cross_attention level 3 seed {seed} step {name} ({lang})"
        assert steps[name].latex == f"{name} = H W_{name}", case
        note = steps[name].note.render(lang)
        assert "H" in note and "X" not in note, f"{case}: {note}"


def test_cross_causal_mask_hides_the_keys_right_of_the_square_diagonal():
    scaled = np.zeros((2, 3))
    hidden = np.isneginf(pipeline.run({"scaled": scaled, "causal": False}, mistakes={"cross_causal_mask"})["masked"])
    assert hidden.tolist() == [[False, True, True], [False, False, True]]
    assert not np.isneginf(pipeline.run({"scaled": scaled, "causal": False})["masked"]).any()
    # a square (self-attention) exercise never makes it
    assert not pipeline.run({"scaled": np.zeros((3, 3)), "causal": False}, mistakes={"cross_causal_mask"}).used


# ---------------------------------------------------------------- careful students


@pytest.mark.parametrize("level", K.LEVELS)
def test_careful_students_are_right(level):
    careful_and_selftest_answers_grade_as_such(K.ID, level, careful_by_pipeline, SEEDS)


# ---------------------------------------------------------------- stored exercises


@pytest.mark.parametrize("version", sorted(STORED))
@pytest.mark.parametrize("level", ["1", "2", "3"])
def test_an_exercise_stored_at_an_earlier_version_still_shows_and_grades(version, level):
    ex = exercises.Exercise.from_dict(STORED[version][level])
    case = f"cross_attention level {level} stored at version {version}"
    assert ex.version == version < K.VERSION, case
    env = pipeline.run(ex.given)
    for part in ex.parts:
        np.testing.assert_allclose(part.reference, env[part.name], err_msg=f"{case} part {part.name}")
    steps = still_shows_and_grades(ex)
    assert [s.name for s in steps if s.name in ex.part_names] == list(ex.part_names), case


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_one_query_is_one_query(lang):
    for seed in range(10):
        ex = exercises.generate("cross_attention", seed, 1)
        text = engine.prompt(ex, lang)
        assert ex.params["n_q"] == 1 and "1 queries" not in text and "every query" not in text, \
            f"cross_attention level 1 seed {seed} ({lang}): {text}"
        assert ("one query" if lang == "en" else "1 个查询") in text, f"cross_attention level 1 seed {seed} ({lang})"
    ex = exercises.generate("cross_attention", 0, 2)
    assert f"{ex.params['n_q']} queries" in engine.prompt(ex, "en") or "H" in ex.given
