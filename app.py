"""Attention by Hand: the router and the frame (sidebar). Pages live in pages/."""

import streamlit as st

from ui import progress
from ui.i18n import language_switch, resolve, tr

resolve()  # the language first: page titles below are translated
st.set_page_config(page_title=tr("app.title"), page_icon=":material/grid_on:", layout="wide")

pages = [
    st.Page("pages/home.py", title=tr("nav.home"), icon=":material/home:", default=True),
    st.Page("pages/practice.py", title=tr("nav.practice"), icon=":material/edit:"),
    st.Page("pages/check_work.py", title=tr("nav.check_work"), icon=":material/fact_check:"),
    st.Page("pages/progress.py", title=tr("nav.progress"), icon=":material/insights:"),
    st.Page("pages/formulas.py", title=tr("nav.formulas"), icon=":material/functions:"),
    st.Page("pages/assignments.py", title=tr("nav.assignments"), icon=":material/assignment:"),
    st.Page("pages/gradebook.py", title=tr("nav.gradebook"), icon=":material/table_view:"),
]
navigation = st.navigation(pages)
language_switch()
progress.subscribe()  # every graded attempt is stored under the profile below
progress.profile_input("progress.profile.sidebar", st.sidebar)
navigation.run()
