"""The statement of a problem: its prompt and its given matrices in LaTeX."""

from __future__ import annotations

import streamlit as st

from exercises import Exercise

from . import cache
from .i18n import tr

# a sentence added to a kind's prompt when the exercise also asks for this part (levels 2+ of the mask)
PROMPT_FOR_PART = {("masking", "A"): "kind.masking.prompt_softmax"}


def prompt_text(ex: Exercise) -> str:
    """The kind's prompt, with the sentence of every further step the exercise asks for."""
    extra = [tr(PROMPT_FOR_PART[ex.kind, p.name]) for p in ex.parts if (ex.kind, p.name) in PROMPT_FOR_PART]
    return " ".join([tr(f"kind.{ex.kind}.prompt", **ex.params), *extra])


def show(ex: Exercise) -> None:
    st.markdown(prompt_text(ex))
    if ex.given.get("causal") is True:
        st.caption(tr("problem.causal"))
    lines = cache.given_lines_of(ex)
    columns = st.columns(min(len(lines), 3) or 1)
    for index, (_name, latex) in enumerate(lines):
        with columns[index % len(columns)]:
            st.latex(latex)
