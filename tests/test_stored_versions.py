"""Exercises stored before their kind's VERSION changed (a level resized, or another candidate drawn once the
time count changed) still show and grade as their students saw them: kinds without a stored-exercise test
of their own (tests/kinds/stored/<kind>-v<version>.json, {level: exercise})."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import exercises
from tests.stored_exercise import still_shows_and_grades

STORED = Path(__file__).parent / "kinds" / "stored"
FILES = {("attention_block", 2): ("1", "2", "3"), ("mla", 2): ("3",), ("softmax", 2): ("1",), ("temperature", 1): ("1",)}


@pytest.mark.parametrize("kind,version,level", [(k, v, lv) for (k, v), levels in FILES.items() for lv in levels])
def test_an_exercise_stored_at_an_earlier_version_still_shows_and_grades(kind, version, level):
    ex = exercises.Exercise.from_dict(json.loads((STORED / f"{kind}-v{version}.json").read_text())[level])
    where = f"{kind} version {version} level {level} seed {ex.seed}"
    assert ex.kind == kind and ex.version == version < exercises.KINDS[kind].VERSION, where
    today = {**exercises.generate(kind, ex.seed, ex.level).to_dict(), "version": version}
    assert today != ex.to_dict(), f"{where}: not what is made today"
    still_shows_and_grades(ex)
