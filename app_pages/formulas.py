"""Formula sheet: every formula the exercises use, forward and backward, with shapes."""

import streamlit as st

import exercises
from ui import formula_sheet as fs
from ui import mathview
from ui import pipeline_map as pm
from ui.i18n import lang_key, tr

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


# only the open tab is drawn: the browser typesets each formula of a tab even while it is hidden
forward, backward = st.tabs([tr("home.forward"), tr("home.backward")], key=lang_key(fs.TAB_KEY), on_change="rerun")
for tab, sections in ((forward, fs.forward), (backward, fs.backward)):
    if tab.open:
        with tab:
            for sec in sections():
                section(sec)
