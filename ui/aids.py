"""The hand-calculation aids shown with a problem: eˣ for exactly the exponents needed, √d_k, shapes."""

from __future__ import annotations

from typing import Any

import streamlit as st

import exercises
from exercises import Exercise

from . import mathview
from .i18n import tr
from .solution import fingerprint


@st.cache_data(max_entries=4096, show_spinner=False)
def aids_view(key: str, _ex: Exercise) -> dict[str, Any]:
    """The aids as LaTeX strings (plain data, cached per exercise)."""
    a = exercises.aids(_ex)
    return {"table": a.table_latex(), "sqrt_dk": a.sqrt_dk,
            "shapes": [latex for _, _, latex in a.shapes] or None}


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
            st.caption(tr("aids.exp_table"))
            mathview.show(view["table"])
