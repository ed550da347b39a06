"""An exercise stored before its kind's VERSION bump still shows and grades as its students saw it:
the checks every kind's stored-exercise test makes, in one place."""

from __future__ import annotations

import numpy as np

import exercises
from exercises.cli import selftest
from exercises.core import engine
from exercises.solutions import hints


def still_shows_and_grades(ex: exercises.Exercise) -> list:
    """Its own references grade right and a cell moved by 1 in any part grades wrong; the prompt reads in en
    and zh with no placeholder or key left; every step solves and displays; it has hints and aids. Returns the
    steps, for a kind's own checks of them."""
    right = selftest.correct_answer(ex)
    assert exercises.grade(ex, right).correct
    for part in ex.parts:
        cells = np.array(part.reference, dtype=float)
        i, j = np.argwhere(np.isfinite(cells))[0]  # a −∞ of a mask stays as it is
        cells[i, j] += 1.0
        feedback = exercises.grade(ex, {**right, part.name: selftest.as_text(cells)})
        assert not feedback.correct and not feedback.parts[part.name].correct, part.name
    for lang in ("en", "zh"):
        text = engine.prompt(ex, lang)
        assert "{" not in text and f"kind.{ex.kind}" not in text, text
    steps = exercises.solve(ex)
    for step in steps:
        assert step.value is not None
        step.display(True), step.display(False)
    assert hints.hints(ex)
    for hint in hints.hints(ex):
        hint.text.render("en")
    exercises.aids(ex).latex_strings()
    return steps
