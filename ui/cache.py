"""Pure, cached computations shared by every session (exercises are immutable)."""

from __future__ import annotations

import streamlit as st

import exercises
from exercises.solutions import given_latex


@st.cache_resource(max_entries=4096, show_spinner=False)
def exercise(kind: str, seed: int, level: int) -> exercises.Exercise:
    """The exercise (kind, seed, level): generated once per process, shared read-only."""
    return exercises.generate(kind, seed, level)


@st.cache_resource(max_entries=4096, show_spinner=False)
def given_lines(kind: str, seed: int, level: int) -> list[tuple[str, str]]:
    return given_latex(exercise(kind, seed, level))
