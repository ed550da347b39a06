"""What the learner sees after Check: the score, the message, the likely mistake, warnings."""

from __future__ import annotations

import streamlit as st

from exercises import Feedback

from .i18n import render, tr


def database_unavailable() -> None:
    """The one message for a database that cannot be reached (the page goes on; nothing typed is lost)."""
    st.error(tr("assign.error.database"), icon=":material/cloud_off:")


def show(fb: Feedback) -> None:
    if not fb.graded:
        st.warning(render(fb.message) or tr("grade.invalid"), icon=":material/edit_note:")
        _warnings(fb)
        return
    if fb.correct:
        st.success(tr("feedback.correct", score=score_text(fb)), icon=":material/check_circle:")
    else:
        st.error(tr("feedback.score", score=score_text(fb)) + " " + render(fb.message),
                 icon=":material/cancel:")
    if any(p.consistent for p in fb.parts.values()):
        st.info(tr("grade.consistent"), icon=":material/trending_flat:")
    for text, where in _mistakes(fb):
        st.warning(f"**{tr('misconception.title')}**{where}: {text}", icon=":material/lightbulb:")
    _warnings(fb)


def score_text(fb: Feedback) -> str:
    """The score as a whole percent, from fb.score and fb.correct (the cells' own summary): 100% only
    when every cell is right; a not-right score that would round to 100% shows 99%, so "not right
    yet" never sits beside 100%."""
    if fb.correct:
        return "100%"
    text = f"{fb.score:.0%}"
    return "99%" if text == "100%" else text


def _mistakes(fb: Feedback) -> list[tuple[str, str]]:
    """Each likely mistake once, with the parts it shows in when the exercise has several; one that
    the message already explains (a wrong option's reason) is not repeated."""
    found: dict[str, list[str]] = {}
    for part in fb.parts.values():
        mid = part.misconception
        explained = part.explanation is not None and part.explanation.key == f"misconception.{mid}"
        if mid and not explained:
            found.setdefault(mid, []).append(tr(part.label or f"part.{part.name}"))
    several = len(fb.parts) > 1
    return [(tr(f"misconception.{mid}"), f" ({', '.join(names)})" if several else "") for mid, names in found.items()]


def _warnings(fb: Feedback) -> None:
    """Sanity checks: never scored, so shown apart from the grade."""
    for warning in fb.warnings:
        st.info(f"**{tr('sanity.title')}:** " + render(warning), icon=":material/rule:")
