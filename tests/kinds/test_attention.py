"""attention: the whole forward pass, one part per step, errors carried forward, hand-friendly scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import exercises
from exercises.core import pipeline
from exercises.core.grading import CONSISTENT, RIGHT, WRONG
from tests.kinds.common import find
from tests.stored_exercise import still_shows_and_grades

SEEDS = range(30)


@pytest.mark.parametrize("level", [1, 2, 3])
def test_attention_scales_by_a_root_that_changes_something_and_never_projects_up(level):
    for seed in SEEDS:
        ex = exercises.generate("attention", seed, level)
        d_k = int(ex.given["d_k"])
        assert d_k >= 2, f"seed {seed}: d_k = 1 makes the asked scaling step a copy"
        assert d_k in (2, 4), f"seed {seed}: √d_k is whole (4) or the one clean root √2"
        if "X" in ex.given:
            assert d_k <= ex.given["X"].shape[1], f"seed {seed}: d_model {ex.given['X'].shape[1]} → d_k {d_k}"
        S, Z = ex.part("scores").reference, ex.part("scaled").reference
        assert not np.allclose(S, Z), f"seed {seed}: the scaled scores equal the scores"


def test_level_3_tells_root_d_model_from_d_k():
    """d_model = 3, d_k = 2: dividing by √d_model = √3 and by d_k = 2 give different scaled scores, and each is
    named for what it is (with d_model = 4 = d_k² both were one computation, named scaled_by_dk)."""
    for seed in range(20):
        ex = exercises.generate("attention", seed, 3)
        d_model, d_k = ex.given["X"].shape[1], int(ex.given["d_k"])
        assert d_model not in (d_k, d_k * d_k), f"seed {seed}: d_model {d_model}, d_k {d_k}"
        right = {p.name: p.reference for p in ex.parts}
        S = ex.part("scores").reference
        for mid, divisor in (("scaled_by_sqrt_d_model", np.sqrt(d_model)), ("scaled_by_dk", d_k)):
            fb = exercises.grade(ex, {**right, "scaled": np.round(S / divisor, 2)})
            assert fb.parts["scaled"].misconception == mid, (seed, mid, fb.parts["scaled"].misconception)


def _chain_answer(ex: exercises.Exercise, wrong_step: str) -> tuple[dict[str, np.ndarray], tuple[int, int]]:
    """A learner's answer: right up to `wrong_step`, one visible cell of it off by one, every later step
    computed correctly from that wrong value."""
    answer = {p.name: np.array(p.reference) for p in ex.parts}
    value = answer[wrong_step].copy()
    cell = (value.shape[0] - 1, 0)  # the last query sees the first key even under a causal mask
    value[cell] += 1.0
    answer[wrong_step] = value
    names = ex.part_names
    own = pipeline.run({**ex.given, **{k: answer[k] for k in names[:names.index(wrong_step) + 1]}})
    for later in names[names.index(wrong_step) + 1:]:
        answer[later] = np.asarray(own[later])
    return answer, cell


@pytest.mark.parametrize("level", [1, 2, 3])
def test_attention_parts_follow_the_steps_and_numbers_are_hand_friendly(level):
    for seed in SEEDS:
        ex = exercises.generate("attention", seed, level)
        causal = ex.given["causal"]
        steps = ["scores", "scaled", "masked", "A", "O"] if level == 1 else \
            ["Q", "K", "V", "scores", "scaled", "masked", "A", "O"]
        if not causal:
            steps.remove("masked")
        assert ex.part_names == steps
        assert ("Q" in ex.given) == (level == 1) and ("X" in ex.given) == (level > 1)
        n = ex.part("scores").shape[0]
        assert n <= 3  # four tokens at level 3 were 45-60 minutes of hand work
        S = ex.part("scores").reference
        step = 1.0 if level < 3 else 0.5
        np.testing.assert_array_equal(S / step, np.round(S / step))  # whole (or half) scores
        assert np.abs(S).max() <= (4 if level < 3 else 6)
        exponents = {round(float(x), 9) for x in pipeline.run(ex.given)["masked"].ravel() if np.isfinite(x)}
        assert len(exponents) <= 13  # a short e^x table covers the softmax


@pytest.mark.parametrize("level", [1, 2, 3])
def test_attention_errors_carry_forward_through_every_step(level):
    checked = set()
    for causal in (True, False):
        ex = find("attention", level, lambda e, c=causal: e.given["causal"] == c)
        for wrong_step in ex.part_names[:-1]:
            answer, cell = _chain_answer(ex, wrong_step)
            fb = exercises.grade(ex, answer)
            where = f"level {level} causal {causal} wrong {wrong_step}"
            assert fb.graded and not fb.correct, where
            assert fb.parts[wrong_step].status[cell] == WRONG, where
            later = ex.part_names[ex.part_names.index(wrong_step) + 1:]
            for name in later:  # nothing after the slip is counted wrong …
                assert not (fb.parts[name].status == WRONG).any(), (where, name, fb.parts[name].status)
            flagged = [name for name in later if fb.parts[name].consistent]
            assert flagged, where  # … and what differs from the reference is flagged as consistent
            share_right = np.mean([np.mean(p.status == RIGHT) for p in fb.parts.values()])
            assert fb.score > share_right, where  # the method earns credit
            checked.add(wrong_step)
    assert checked >= ({"scores", "scaled", "masked", "A"} | ({"Q", "K", "V"} if level > 1 else set()))


def test_attention_consistent_cells_match_recompute_from_the_learners_values():
    ex = find("attention", 2, lambda e: e.given["causal"])
    answer, _ = _chain_answer(ex, "scores")
    fb = exercises.grade(ex, answer)
    learner = pipeline.run({**ex.given, "scores": answer["scores"]})
    for name in ("scaled", "masked", "A", "O"):
        np.testing.assert_allclose(pipeline.recompute(name, learner), answer[name])
        consistent = fb.parts[name].status == CONSISTENT
        differs = ~np.isclose(answer[name], ex.part(name).reference, atol=0.0051)
        np.testing.assert_array_equal(consistent, differs)
        assert consistent.any(), name


def test_attention_two_independent_mistakes_are_not_consistent():
    ex = find("attention", 1, lambda e: not e.given["causal"])
    answer, _ = _chain_answer(ex, "scores")
    answer["O"] = answer["O"] + 1.0  # a second, unrelated slip in the last step
    fb = exercises.grade(ex, answer)
    assert (fb.parts["O"].status == WRONG).all()


def test_attention_names_a_catalogued_mistake():
    ex = find("attention", 2, lambda e: e.given["d_k"] > 1 and e.given["causal"])
    env = pipeline.run(ex.given, mistakes={"no_scaling"})
    answer = {p.name: env[p.name] for p in ex.parts}
    fb = exercises.grade(ex, answer)
    assert fb.parts["scaled"].misconception == "no_scaling"
    assert fb.misconception == "no_scaling"


@pytest.mark.parametrize("version", [5, 6, 7])
@pytest.mark.parametrize("level", ["1", "2", "3"])
def test_an_exercise_stored_at_an_earlier_version_still_shows_and_grades(version, level):
    stored = json.loads((Path(__file__).parent / "stored" / f"attention-v{version}.json").read_text())[level]
    ex = exercises.Exercise.from_dict(stored)
    assert ex.version == version < exercises.KINDS["attention"].VERSION, (version, level)
    still_shows_and_grades(ex)
