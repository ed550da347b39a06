"""What the learner sees after Check: the score, the message, the likely mistake, warnings."""

from __future__ import annotations

import streamlit as st

from exercises import Feedback

from .i18n import render, tr


def show(fb: Feedback) -> None:
    if not fb.graded:
        st.warning(render(fb.message) or tr("grade.invalid"), icon=":material/edit_note:")
        return
    if fb.correct:
        st.success(tr("feedback.correct", score=f"{fb.score:.0%}"), icon=":material/check_circle:")
    else:
        st.error(tr("feedback.score", score=f"{fb.score:.0%}") + " " + render(fb.message),
                 icon=":material/cancel:")
    if any(p.consistent for p in fb.parts.values()):
        st.info(tr("grade.consistent"), icon=":material/trending_flat:")
    if fb.misconception:
        st.warning(f"**{tr('misconception.title')}:** " + tr("misconception." + fb.misconception),
                   icon=":material/lightbulb:")
    for warning in fb.warnings:
        st.info(render(warning), icon=":material/info:")
