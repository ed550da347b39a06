"""What an LMS launch (ui/lti_routes.py) hands the pages: the session, in the HttpOnly cookie the
launch set, or spent once from the one-time `?lti_code=` the launch's page moved on to (a page in the
LMS's iframe may not get the cookie) and then kept for this browser session. The address grants
nothing: the code is gone from it and from the database once this page has spent it. A launched
learner works under their course identity (no typed name); an instructor of the owning course opens
its gradebook without a teacher key."""

from __future__ import annotations

import streamlit as st

from services import db, lti

from .progress import server_cookie

SESSION_KEY = "lti.token"


def token() -> str | None:
    """The launch's session: handed to this browser session by a one-time code, else the launch's cookie."""
    code = st.query_params.get(lti.HANDOFF_PARAM)
    if code:
        del st.query_params[lti.HANDOFF_PARAM]
        try:
            handed = lti.take_handoff(code)
        except db.Unavailable:
            handed = None
        if handed:
            st.session_state[SESSION_KEY] = handed
    return st.session_state.get(SESSION_KEY) or server_cookie(lti.SESSION_COOKIE)


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
