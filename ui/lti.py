"""What an LMS launch (ui/lti_routes.py) hands the pages: the signed session in ?lti=…, kept for the
browser session. A launched learner works under their course identity (no typed name); an
instructor of the owning course opens its gradebook without a teacher key."""

from __future__ import annotations

import streamlit as st

from services import db, lti

SESSION_KEY = "lti.token"


def token() -> str | None:
    """The launch's session token (from the address the launch redirected to, then from this session)."""
    sent = st.query_params.get("lti")
    if sent and len(sent) <= 4096:
        st.session_state[SESSION_KEY] = sent
    return st.session_state.get(SESSION_KEY)


def learner(code: str) -> tuple[str, str] | None:
    """(student name, person) of a learner launched into this very assignment, else None."""
    sent = token()
    return None if not sent else lti.learner_name(sent, code)


def teacher_key(code: str) -> str | None:
    """The assignment's teacher key for an instructor launched from the course that owns it, else None."""
    sent = token()
    if not sent:
        return None
    try:
        return lti.teacher_key(sent, code)
    except db.Unavailable:
        return None


def instructor_key() -> str | None:
    """The teacher key of the assignment an instructor launched (its dashboard opens with it), else None."""
    sent = token()
    session = lti.read_session(sent) if sent else None
    if session is None or session.role != "instructor" or not session.code:
        return None
    return teacher_key(session.code)
