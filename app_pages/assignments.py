"""Assignments: a teacher builds a set and shares its code; a student opens ?assignment=CODE and works through it."""

import streamlit as st

from ui import assignments as asg
from ui.i18n import tr

code = st.query_params.get("assignment")
if code:
    assignment = asg.load(code)
    if assignment is not None:
        asg.student_ui(assignment, st.query_params.get("t"))
    else:
        asg.open_code_ui()
else:
    st.title(tr("assign.page_title"))
    asg.open_code_ui()
    st.header(tr("assign.builder_heading"))
    st.caption(tr("assign.builder_intro"))
    values = asg.builder_ui()
    if values is not None:
        asg.create(values)
    asg.created_ui()
    asg.dashboard_ui()
