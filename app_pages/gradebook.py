"""Gradebook: an assignment's code and its teacher key open the students × items table."""

import streamlit as st

from ui import gradebook
from ui.i18n import tr

st.title(tr("gradebook.title"))
st.caption(tr("gradebook.intro"))
opened = gradebook.open_ui()
if opened is not None:
    gradebook.show(*opened)
