"""Formula sheet: every formula the exercises use, forward and backward, with shapes."""

import streamlit as st

import exercises
from ui import formula_sheet as fs
from ui import mathview
from ui import pipeline_map as pm
from ui.i18n import tr

st.title(tr("formulas.title"))
st.caption(tr("formulas.intro"))


def section(sec: fs.Section) -> None:
    st.subheader(tr(f"formulas.{sec.key}.title"))
    st.caption(tr(f"formulas.{sec.key}.caption"))
    for formula in sec.formulas:
        mathview.show(formula.latex)
        if formula.note:
            st.markdown(tr(formula.note))
    if sec.key in exercises.KINDS:
        pm.practice_link(sec.key, icon=":material/edit:", label=tr("formulas.practise"))


forward, backward = st.tabs([tr("home.forward"), tr("home.backward")])
with forward:
    for sec in fs.forward():
        section(sec)
with backward:
    for sec in fs.backward():
        section(sec)
