"""Pure, cached computations shared by every session (exercises are immutable)."""

from __future__ import annotations

import hashlib
import json

import streamlit as st

import exercises
from exercises.solutions import given_latex


@st.cache_resource(max_entries=4096, show_spinner=False)
def exercise(kind: str, seed: int, level: int) -> exercises.Exercise:
    """The exercise (kind, seed, level): generated once per process, shared read-only."""
    return exercises.generate(kind, seed, level)


def exercise_key(ex: exercises.Exercise) -> str:
    """A cache key for the exercise itself (a stored one may differ from what its triple gives now)."""
    text = json.dumps(ex.to_dict(), sort_keys=True)
    return f"{ex.id}:v{ex.version}:{hashlib.sha1(text.encode()).hexdigest()[:16]}"


@st.cache_resource(max_entries=4096, show_spinner=False)
def _given_lines(key: str, _ex: exercises.Exercise) -> list[tuple[str, str]]:
    return given_latex(_ex)


def given_lines_of(ex: exercises.Exercise) -> list[tuple[str, str]]:
    """The given matrices of this very exercise in LaTeX (a stored exercise shows what it stored)."""
    return _given_lines(exercise_key(ex), ex)


def given_lines(kind: str, seed: int, level: int) -> list[tuple[str, str]]:
    """The given matrices of the exercise (kind, seed, level) as generated now."""
    return given_lines_of(exercise(kind, seed, level))
