"""Practice's paper tools: print this one problem (a PDF from the worksheet machinery, compiled by
Typst in a child process when the button is clicked) and copy it as LaTeX source."""

from __future__ import annotations

import functools

import streamlit as st

import exercises
from exercises import worksheets

from . import cache
from .i18n import lang, tr


def pdf(ex: exercises.Exercise, language: str) -> bytes:
    """The one-problem worksheet of `ex` as a PDF (what the print button hands out)."""
    return worksheets.files.pdf_isolated(worksheets.single(ex, language))


@st.cache_resource(max_entries=1024, show_spinner=False)
def _latex(key: str, language: str, _ex: exercises.Exercise) -> str:
    return worksheets.problem_latex(_ex, language)


def latex(ex: exercises.Exercise, language: str) -> str:
    """The problem's statement and given values as LaTeX source (cached per exercise and language)."""
    return _latex(cache.exercise_key(ex), language, ex)


def show(ex: exercises.Exercise) -> None:
    """The print button and the copy-as-LaTeX box, side by side."""
    language = lang()
    left, right = st.columns([1, 3], vertical_alignment="top")
    left.download_button(tr("practice.print"), data=functools.partial(pdf, ex, language),
                         file_name=f"{ex.kind}-level{ex.level}-seed{ex.seed}.pdf", mime="application/pdf",
                         key=f"practice.print.{ex.id}.{language}", icon=":material/print:", on_click="ignore")
    with right.expander(tr("practice.copy_latex"), icon=":material/content_copy:"):
        st.caption(tr("practice.copy_latex_caption"))
        st.code(latex(ex, language), language="latex", wrap_lines=True)
