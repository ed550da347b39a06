"""Glossary: the words of attention, in one short definition each, with the formula where there is one."""

import streamlit as st

from ui import glossary, mathview
from ui.i18n import tr

st.title(tr("glossary.title"))
st.caption(tr("glossary.intro"))

for term in glossary.TERMS:
    st.markdown(f"**{tr(f'glossary.{term.key}.name')}** — {tr(f'glossary.{term.key}.text')}")
    if term.latex:
        mathview.show(term.latex)
