"""Home: the attention pipeline as a map, each stage linked to its practice, with the learner's standing."""

import streamlit as st

import exercises
from ui import pipeline_map as pm
from ui import progress
from ui.i18n import tr

st.title(tr("app.title"))
st.markdown(tr("home.intro"))

table = progress.summary()
suggestion = progress.suggest(table, list(exercises.KINDS))
with st.container(border=True):
    st.markdown(f"**{tr('home.next')}** · " + progress.suggestion_text(suggestion))
    pm.practice_link(suggestion.kind, suggestion.level, icon=":material/arrow_forward:",
                     label=tr("suggest.go", topic=tr(f"kind.{suggestion.kind}.title"), level=suggestion.level))

st.header(tr("home.forward"))
st.caption(tr("home.forward_caption"))
st.latex(pm.FORWARD_PATH)
pm.draw_row(pm.FORWARD, table)

st.header(tr("home.backward"))
st.caption(tr("home.backward_caption"))
st.latex(pm.BACKWARD_PATH)
pm.draw_row(pm.BACKWARD, table)

st.header(tr("home.whole"))
pm.draw_row(pm.WHOLE, table, numbered=False, per_row=2)

st.header(tr("home.around"))
pm.draw_row(pm.AROUND, table, numbered=False, per_row=2)  # 4 abreast clips "Shapes through attention"

others = tuple(pm.Stage(kind, "") for kind in exercises.KINDS if kind not in pm.mapped_kinds())
if others:
    st.header(tr("home.more"))
    pm.draw_row(others, table, numbered=False)

st.page_link("app_pages/progress.py", label=tr("home.see_progress"), icon=":material/insights:")
