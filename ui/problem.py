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
    st.markdown(prompt_text(ex))
    policy = rounding_text(ex)
    if policy:
        st.caption(policy)
    if ex.given.get("causal") is True:
        st.caption(tr("problem.causal"))
    elif ex.given.get("causal") is False:  # a kind that can mask says so when it does not (issue 19)
        st.caption(tr("problem.no_mask"))
    lines = cache.given_lines_of(ex)
    columns = st.columns(min(len(lines), 3) or 1)
    for index, (_name, latex) in enumerate(lines):
        with columns[index % len(columns)]:
            mathview.show(latex)
