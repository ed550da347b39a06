"""The statement of a problem: its prompt and its given matrices in LaTeX."""

from __future__ import annotations

import streamlit as st

from exercises import Exercise
from exercises.core import engine, grading

from . import cache, mathview
from .i18n import lang, tr


def prompt_text(ex: Exercise) -> str:
    """The exercise's statement as its kind words it (the worksheets print the same)."""
    return engine.prompt(ex, lang())


def rounding_text(ex: Exercise) -> str | None:
    """How to round and what to carry on, when a part asks for decimals (the worksheets say the same)."""
    return grading.rounding_policy(ex, lang())


def show(ex: Exercise) -> None:
    """The statement, then how to round and whether a mask applies (one caption, its own paragraphs),
    then the given matrices side by side, three to a row, each row its own columns so that a phone,
    which stacks columns, shows W_Q1, W_Q2, W_Q3 … in reading order (one alone needs no columns: every
    element drawn costs server time on every run)."""
    st.markdown(prompt_text(ex))
    notes = [rounding_text(ex)]
    if ex.given.get("causal") is True:
        notes.append(tr("problem.causal"))
    elif ex.given.get("causal") is False:  # a kind that can mask says so when it does not
        notes.append(tr("problem.no_mask"))
    if any(notes):
        st.caption("\n\n".join(note for note in notes if note))
    lines = cache.given_lines_of(ex)
    if len(lines) == 1:
        mathview.show(lines[0][1])
        return
    for start in range(0, len(lines), 3):  # a row of columns per three: a phone stacks them in reading order
        row = lines[start:start + 3]
        for column, (_name, latex) in zip(st.columns(min(len(lines), 3)), row):
            with column:
                mathview.show(latex)
