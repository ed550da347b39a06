"""Hints on the Practice page: opened one level at a time, every one reachable without an answer.

Hint 1 whenever the learner asks; hint k is meant for after k − 1 checked answers (exercises.solutions.hints'
`available`), but a stuck learner opens it earlier at a cost shown beside the button: the hints opened
are saved with the attempt (a locked hint made a stuck student submit a junk answer, which
was recorded as an attempt and steered Home's suggestion). Opened hints stay open for that problem;
how many were open at a check is recorded (``used(ex)`` → ``attempts.record(..., hints_used=…)``).
"""

from __future__ import annotations

import streamlit as st

import exercises
from exercises import Exercise, Feedback
from exercises.i18n import plural
from exercises.solutions import hints as exercise_hints

from . import mathview
from .i18n import render, tr

OPENED = "practice.hints"  # {exercise id: how many hints are open}


def used(ex: Exercise) -> int:
    """How many hints the learner has opened for `ex` in this session."""
    return int(st.session_state.get(OPENED, {}).get(ex.id, 0))


def _open(exercise_id: str, level: int) -> None:
    opened = st.session_state.setdefault(OPENED, {})
    opened[exercise_id] = max(int(opened.get(exercise_id, 0)), level)


def _heading(level: int) -> str:
    return tr("hint.show", level=level, name=tr(f"hint.level.{level}"))


def show(ex: Exercise, graded_attempts: int, checked: Feedback | None = None) -> None:
    """The hints expander: the opened hints, then a button for the next one (disabled while locked).
    `checked`: the feedback on the answer last checked, so that the worked cell is of the first step
    the learner got wrong."""
    # none open yet (the usual first load): the generic three levels need no hint worked out (a solve)
    unopened = used(ex) == 0 and getattr(exercises.KINDS.get(ex.kind), "hints", None) is None
    hints = [] if unopened else exercise_hints.hints(ex, checked)
    count = exercise_hints.LEVELS if unopened else len(hints)
    opened = min(used(ex), count)
    unlocked = exercise_hints.available(graded_attempts)
    with st.expander(f"{tr('hint.title')} ({opened}/{count})", expanded=opened > 0, icon=":material/lightbulb:"):
        st.caption(tr("hint.policy"))
        for hint in hints[:opened]:
            st.markdown(f"**{_heading(hint.level)}** · " + render(hint.text))
            for line in hint.latex:
                mathview.show(line)
            if hint.note is not None:
                st.caption(render(hint.note))
        if opened < count:
            level = hints[opened].level if hints else exercise_hints.NUDGE
            st.button(_heading(level), key=f"hint-{ex.id}-{level}",
                      on_click=_open, args=(ex.id, level), icon=":material/lightbulb:")
            if opened >= unlocked:  # early: open it all the same, its cost said beside it
                st.caption(render(plural("hint.early", level - 1 - graded_attempts, level=level)))
