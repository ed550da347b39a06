"""Every kind in exercises.KINDS tests itself (PrairieLearn style): a right, a wrong and an unreadable answer.

Parametrised over the registry, so kinds added later are covered without touching this file.
"""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from exercises.cli import selftest
from tests import generated

SEEDS_PER_LEVEL = 30  # the seeds the pins hold (tests/pins), which every walk of the suite reads: made once
KIND_LEVELS = [(kind_id, level) for kind_id, kind in exercises.KINDS.items() for level in kind.LEVELS]


def test_registry_holds_the_foundation_kinds():
    assert {"projection", "scores", "scaling", "masking", "softmax", "weighted_sum"} <= set(exercises.KINDS)


@pytest.mark.parametrize("kind_id", list(exercises.KINDS))
def test_kind_module_has_the_common_surface(kind_id):
    kind = exercises.KINDS[kind_id]
    assert kind.ID == kind_id
    assert isinstance(kind.ORDER, int) and isinstance(kind.VERSION, int) and kind.VERSION >= 1
    assert len(kind.LEVELS) >= 1 and all(isinstance(level, int) for level in kind.LEVELS)
    assert (callable(kind.generate) or callable(kind.draw))
    assert exercises.t(f"kind.{kind_id}.title") != f"kind.{kind_id}.title"  # a catalog title exists


@pytest.mark.parametrize("kind_id, level", KIND_LEVELS)
def test_kind_grades_its_own_right_wrong_and_unreadable_answers(kind_id, level):
    for seed in range(SEEDS_PER_LEVEL):
        where = f"{kind_id} level {level} seed {seed}"
        ex = generated.exercise(kind_id, seed, level)
        assert (ex.kind, ex.seed, ex.level) == (kind_id, seed, level)
        assert ex.version == exercises.KINDS[kind_id].VERSION
        assert ex.parts, where
        assert exercises.Exercise.from_dict(ex.to_dict()) == ex, where
        assert "{" not in exercises.t(f"kind.{kind_id}.prompt", **ex.params), where  # placeholders filled

        right = exercises.grade(ex, selftest.correct_answer(ex))
        assert right.score == 1.0 and right.correct, where
        assert right.misconception is None, where

        rng = np.random.default_rng(seed)
        wrong = exercises.grade(ex, selftest.incorrect_answer(ex, rng))
        assert wrong.graded and not wrong.correct and wrong.score < 1.0, where

        invalid = exercises.grade(ex, selftest.invalid_answer(ex, rng))
        assert invalid.score is None and not invalid.correct, where
        assert any(p.format_error is not None for p in invalid.parts.values()), where
        assert all(p.score is None for p in invalid.parts.values()), where


@pytest.mark.parametrize("kind_id, level", KIND_LEVELS)
def test_references_are_finite_or_minus_infinity(kind_id, level):
    for seed in range(5):
        ex = generated.exercise(kind_id, seed, level)
        for part in ex.parts:
            ref = part.reference
            assert not np.isnan(ref).any() and not np.isposinf(ref).any(), (kind_id, level, seed, part.name)
            if part.decimals == 0:
                finite = ref[np.isfinite(ref)]
                np.testing.assert_allclose(finite, np.round(finite), rtol=0, atol=part.tolerance)


@pytest.mark.parametrize("kind_id, level", KIND_LEVELS)
def test_no_catalogued_mistake_gives_the_right_answer(kind_id, level):
    from exercises.core import misconceptions

    for seed in range(3):
        ex = generated.exercise(kind_id, seed, level)
        assert misconceptions.collisions(ex) == [], (kind_id, level, seed)
