"""Attention by Hand: the router and the frame (sidebar). Pages live in pages/."""

import streamlit as st

from ui.i18n import tr

st.set_page_config(page_title="Attention by Hand", page_icon=":material/grid_on:", layout="wide")

pages = [
    st.Page("pages/home.py", title=tr("nav.home"), icon=":material/home:", default=True),
    st.Page("pages/practice.py", title=tr("nav.practice"), icon=":material/edit:"),
]
st.navigation(pages).run()
