"""The hand-calculation aids shown with a problem: eˣ on the level's fixed grid, √d_k, shapes."""

from __future__ import annotations

from typing import Any

import streamlit as st

import exercises
from exercises import Exercise

from . import mathview
from .i18n import render, tr
from .solution import fingerprint


@st.cache_data(max_entries=4096, show_spinner=False)
def aids_view(key: str, _ex: Exercise) -> dict[str, Any]:
    """The aids as LaTeX strings (plain data, cached per exercise)."""
    a = exercises.aids(_ex)
    return {"table": a.table_latex(), "sqrt_dk": a.sqrt_dk,
            "shapes": [latex for _, _, latex in a.shapes] or None, "table_caption": a.exp_caption}


def table_caption(view: dict[str, Any]) -> str:
    """What the eˣ table lists, in words (its grid and steps)."""
    caption = view.get("table_caption")
    return render(caption) if caption is not None else tr("aids.exp_table")


def show(ex: Exercise, expanded: bool = True) -> None:
    """An expander with the aids (nothing when the problem needs none)."""
    view = aids_view(fingerprint(ex), ex)
    if not any(view.values()):
        return
    with st.expander(tr("aids.title"), expanded=expanded, icon=":material/calculate:"):
        if view["shapes"]:
            st.caption(tr("aids.shapes"))
            # inline, one formula per matrix: on a narrow screen they wrap instead of running off the side
            # (each in braces: KaTeX breaks a line only between top-level symbols, never inside a group)
            st.markdown(" &emsp; ".join(f"${{{latex}}}$" for latex in view["shapes"]))
        if view["sqrt_dk"]:
            st.caption(tr("aids.sqrt_dk"))
            mathview.show(view["sqrt_dk"])
        if view["table"]:
            st.caption(table_caption(view))
            mathview.show(view["table"])
