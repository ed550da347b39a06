"""Home: what this is and where to start."""

import streamlit as st

import exercises
from ui.i18n import tr

st.title(tr("app.title"))
st.markdown(tr("home.intro"))

st.subheader(tr("home.start"))
columns = st.columns(3)
for index, kind in enumerate(exercises.KINDS):
    with columns[index % 3]:
        st.page_link("pages/practice.py", label=tr(f"kind.{kind}.title"), icon=":material/edit:",
                     query_params={"kind": kind, "level": "1"})
        st.caption(tr(f"kind.{kind}.summary"))
