"""Attention by Hand: the router and the frame (sidebar). Pages live in app_pages/."""

import streamlit as st

from ui import progress
from ui.i18n import language_switch, resolve, tr

resolve()  # the language first: page titles below are translated
st.set_page_config(page_title=tr("app.title"), page_icon=":material/grid_on:", layout="wide")

pages = [
    st.Page("app_pages/home.py", title=tr("nav.home"), icon=":material/home:", default=True),
    st.Page("app_pages/practice.py", title=tr("nav.practice"), icon=":material/edit:"),
    st.Page("app_pages/check_work.py", title=tr("nav.check_work"), icon=":material/fact_check:"),
    st.Page("app_pages/progress.py", title=tr("nav.progress"), icon=":material/insights:"),
    st.Page("app_pages/formulas.py", title=tr("nav.formulas"), icon=":material/functions:"),
    st.Page("app_pages/assignments.py", title=tr("nav.assignments"), icon=":material/assignment:"),
    st.Page("app_pages/gradebook.py", title=tr("nav.gradebook"), icon=":material/table_view:"),
]
navigation = st.navigation(pages)
language_switch()
progress.subscribe()  # every graded attempt is stored under the profile below
progress.profile_input("progress.profile.sidebar", st.sidebar)
navigation.run()
