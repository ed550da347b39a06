"""Progress: what is due for review, mastery per topic, accuracy over time, the mistakes made most, and
the learner's own data (where it lives, a recovery code, download, delete)."""

import streamlit as st

import exercises
from ui import pipeline_map as pm
from ui import progress
from ui.i18n import tr

st.title(tr("progress.title"))
progress.notice()
attempts = progress.load()

if not attempts:
    st.info(tr("progress.empty"), icon=":material/hourglass_empty:")
    pm.practice_link(list(exercises.KINDS)[0], icon=":material/arrow_forward:",
                     label=tr("progress.start"))
    progress.data_panel()
    st.stop()

table = progress.standings(attempts)
st.caption(tr("progress.intro"))
totals = progress.totals(attempts)
for column, (label, value) in zip(st.columns(4), [
        (tr("progress.metric.attempts"), str(totals.attempts)),
        (tr("progress.metric.mean"), f"{totals.mean:.0%}"),
        (tr("progress.metric.topics"), str(len(table))),
        (tr("progress.metric.time"), tr("progress.minutes", minutes=round(totals.seconds / 60)))]):
    column.metric(label, value)

kinds = list(exercises.KINDS)
up_next = progress.up_next(kinds)
st.subheader(tr("progress.next"))
st.markdown(progress.next_text(up_next))
st.caption(progress.due_text(kinds))
progress.next_link(up_next)

st.subheader(tr("progress.mastery"))
st.caption(tr("progress.mastery_caption"))
st.dataframe(progress.mastery_table(progress.schedule(), progress.now()), hide_index=True, width="stretch")

st.subheader(tr("progress.chart"))
st.caption(tr("progress.chart_caption", last=progress.RECENT))
st.altair_chart(progress.attempts_chart(attempts), width="content")  # a square per attempt, however wide the page

st.subheader(tr("progress.topics"))
st.dataframe(progress.topic_table(table), hide_index=True, width="stretch")

st.subheader(tr("progress.mistakes"))
mistakes = progress.top_mistakes(attempts)
if not mistakes:
    st.caption(tr("progress.no_mistakes"))
for mistake, count in mistakes:
    with st.expander(tr("progress.mistake_line", count=count, mistake=progress.mistake_name(mistake))):
        st.markdown(tr(f"misconception.{mistake}"))

progress.data_panel()
