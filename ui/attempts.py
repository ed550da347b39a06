"""Attempts of the current session; listeners (e.g. a progress store) can subscribe."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import streamlit as st

from exercises import Exercise, Feedback

ATTEMPTS = "practice.attempts"
LISTENERS: list[Callable[[dict[str, Any]], None]] = []  # called with each new attempt record


def record(ex: Exercise, fb: Feedback, started: float | None = None, **extra: Any) -> dict[str, Any]:
    """Append a graded attempt to the session and tell the listeners. It keeps the very exercise
    (its to_dict(), with the generator version), so a stored attempt still names the problem seen."""
    entry = {"kind": ex.kind, "level": ex.level, "seed": ex.seed, "version": ex.version, "exercise": ex.to_dict(),
             "score": fb.score, "correct": fb.correct,
             "misconception": fb.misconception, "at": time.time(),
             "seconds": round(time.time() - started, 1) if started else None, "solution_shown": False, **extra}
    st.session_state.setdefault(ATTEMPTS, []).append(entry)
    for listener in LISTENERS:
        listener(entry)
    return entry


def for_exercise(ex: Exercise) -> list[dict[str, Any]]:
    return [a for a in st.session_state.get(ATTEMPTS, [])
            if (a["kind"], a["level"], a["seed"]) == (ex.kind, ex.level, ex.seed)]
