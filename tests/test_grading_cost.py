"""The cheaper grading paths decide exactly as the code they stand in for (issue 14, grading cost).

- a sanity rule asked with say=False (and a known finiteness) is True exactly when it warns;
- grading._judged == (_cells_right, all of them, _statuses), _cells_right == misconceptions.cell_matches
  (tests/test_fast_grading) with infinite references too;
- grading._diagnosis == misconceptions.diagnose, on answers that are a mistake's values and others.
"""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from exercises.core import grading, misconceptions, pipeline, sanity


def _answers(ex, rng):
    """Values near the references: some cells off, some −∞, some of another sign."""
    for _ in range(6):
        values = {}
        for part in ex.parts:
            value = np.array(part.reference, dtype=float)
            if rng.random() < 0.6:
                value = value + rng.choice([0.0, 0.004, -0.3, 1.0, -1.0], size=part.shape)
            if rng.random() < 0.2:
                value[tuple(rng.integers(s) for s in part.shape)] = rng.choice([-np.inf, 2.0, -1.0, 0.0])
            if rng.random() < 0.1:
                value = -value
            values[part.name] = value
        yield values


@pytest.mark.parametrize("kind", list(exercises.KINDS))
def test_a_quiet_rule_decides_as_its_warnings(kind):
    rng = np.random.default_rng(21)
    asked = 0
    for level in exercises.KINDS[kind].LEVELS:
        for seed in range(2):
            ex = exercises.generate(kind, seed, level)
            env = pipeline.reference_env(ex)
            for values in [{p.name: np.array(p.reference, dtype=float) for p in ex.parts}, *_answers(ex, rng)]:
                for part in ex.parts:
                    value = values[part.name]
                    if part.is_choice or np.isnan(value).any():
                        continue
                    for rule in sanity._checks(part.name):
                        said = bool(rule(ex, part, value, env))
                        assert rule(ex, part, value, env, say=False) is said, (kind, part.name, rule.__name__)
                        finite = bool(np.isfinite(value).all())
                        assert rule(ex, part, value, env, say=False, finite=finite) is said
                        asked += 1
    assert asked


def test_judged_is_cells_right_all_and_statuses():
    rng = np.random.default_rng(5)
    specials = [np.inf, -np.inf, np.nan]
    for _ in range(3000):
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        decimals = int(rng.integers(0, 4))
        reference = np.round(rng.normal(size=shape), decimals)
        value = reference + rng.choice([0.0, 0.0, 0.004, -0.005, 0.0051, 0.1, 1e-10], size=shape)
        for array in (value, reference):
            if rng.random() < 0.3:
                array[tuple(rng.integers(s) for s in shape)] = rng.choice(specials)
        part = exercises.Part("X", shape, reference, decimals=decimals)
        want = misconceptions.cell_matches(value, part.reference, part.tolerance)
        assert np.array_equal(grading._cells_right(value, part), want)
        finite = bool(np.isfinite(value).all())
        for known in {False, finite}:  # `finite` is only ever claimed when true
            right, all_right, status = grading._judged(value, part, known)
            assert right.dtype == want.dtype and np.array_equal(right, want)
            assert all_right is bool(want.all())
            old = np.where(want, grading.RIGHT, grading.WRONG).astype(object)
            assert status.dtype == old.dtype and np.array_equal(status, old)
            right[...] = False  # a copy: the next all-right part of this shape is right still
            status[...] = grading.WRONG


@pytest.mark.parametrize("kind", list(exercises.KINDS))
def test_diagnosis_names_what_diagnose_names(kind):
    rng = np.random.default_rng(8)
    for level in exercises.KINDS[kind].LEVELS:
        for seed in range(2):
            ex = exercises.generate(kind, seed, level)
            mistaken = list(misconceptions.alternatives(exercises.Exercise.from_dict(ex.to_dict())).values())
            candidates = [*mistaken, *_answers(ex, rng)]
            for values in candidates:
                for part in ex.parts:
                    if part.is_choice or part.name not in values:
                        continue
                    value = np.asarray(values[part.name], dtype=float)
                    if misconceptions.matches(value, part.reference, part.tolerance):
                        continue  # right: grading diagnoses only a part that is not
                    fresh = exercises.Exercise.from_dict(ex.to_dict())  # nothing memoised
                    want = misconceptions.diagnose(ex, part, value)
                    assert grading._diagnosis(fresh, part, value) == want, (kind, level, seed, part.name)


def test_an_answer_right_in_every_cell_is_not_sanity_checked_and_would_have_had_no_warning(monkeypatch):
    """grade skips the sanity rules when every cell is right: over every kind and level, the careful
    student's answer (rounded as told) would have had no warning either; a wrong answer is still checked."""
    from exercises.cli import selftest

    checked = []
    real = sanity.check
    monkeypatch.setattr(sanity, "check", lambda ex, values: checked.append(ex.kind) or real(ex, values))
    for kind, k in exercises.KINDS.items():
        for level in k.LEVELS:
            for seed in range(4):
                ex = exercises.generate(kind, seed, level)
                answer = selftest.correct_answer(ex)
                fb = exercises.grade(ex, answer)
                assert fb.correct and fb.warnings == [] and not checked, (kind, level, seed)
                read = {p.name: np.asarray(fb.parts[p.name].value, dtype=float) for p in ex.parts}
                assert real(ex, sanity.Values(read, set())) == [], (kind, level, seed)
    ex = exercises.generate("softmax", 0, 1)
    wrong = {p.name: np.full(p.shape, 0.9) for p in ex.parts}
    fb = exercises.grade(ex, wrong)
    assert checked == ["softmax"] and fb.warnings


def test_an_answer_right_at_the_edge_of_its_tolerance_gets_no_false_alarm():
    """G_O and G_A typed just under the reference and G_V just over it (each cell within its tolerance)
    is right in every cell; the G_V column rule, comparing two typed sums, would have warned (before
    grade skipped the rules for right answers it did: sanity.grad_v_columns)."""
    ex = exercises.generate("backprop_loss", 0, 1)
    shift = {"G_O": -0.98, "G_A": -0.98, "G_V": 0.98}
    answer = {p.name: p.reference + shift.get(p.name, 0.0) * p.tolerance for p in ex.parts}
    fb = exercises.grade(ex, answer)
    assert fb.correct and fb.warnings == []
    read = {name: np.asarray(value, dtype=float) for name, value in answer.items()}
    assert [w.key for w in sanity.check(ex, sanity.Values(read, set(read)))] == ["sanity.grad_v_columns"]
