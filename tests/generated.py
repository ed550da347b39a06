"""Exercises as the generator makes them, each made once per test session: many checks walk the same
(kind, seed, level), and an exercise is immutable (a frozen dataclass whose memo holds only values of its
own). Not for a test that patches a kind or the catalog: it would read exercises made before its patch."""

from __future__ import annotations

from functools import cache

import exercises
from exercises.core.model import Exercise


@cache
def exercise(kind_id: str, seed: int, level: int) -> Exercise:
    """exercises.generate(kind_id, seed, level), made once."""
    return exercises.generate(kind_id, seed, level)
