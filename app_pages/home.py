"""Home: the attention pipeline as a map, each stage linked to its practice, with the learner's standing."""

import streamlit as st

import exercises
from ui import mathview, progress
from ui import pipeline_map as pm
from ui.i18n import tr

st.title(tr("app.title"))
st.markdown(tr("home.intro"))

progress.notice()
table = progress.summary()
up_next = progress.up_next(list(exercises.KINDS))
with st.container(border=True):
    st.markdown(f"**{tr('home.next')}** · " + progress.next_text(up_next))
    st.caption(progress.due_text(list(exercises.KINDS)))
    progress.next_link(up_next)

for row in pm.ROWS:  # each kind's stage, in the row its folder names
    stages = pm.stages(row.key)
    if not stages:
        continue
    st.header(tr(row.title))
    if row.caption:
        st.caption(tr(row.caption))
    if row.path:
        mathview.show(row.path)
    pm.draw_row(stages, table, numbered=row.numbered, per_row=row.per_row)

others = pm.unmapped()
if others:
    st.header(tr("home.more"))
    pm.draw_row(others, table, numbered=False)

st.page_link("app_pages/progress.py", label=tr("home.see_progress"), icon=":material/insights:")
