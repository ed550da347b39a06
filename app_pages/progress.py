"""Progress: accuracy per topic over time, the mistakes made most, and what to practise next."""

import streamlit as st

import exercises
from exercises.i18n.escape import untrusted
from ui import pipeline_map as pm
from ui import progress
from ui.i18n import tr

st.title(tr("progress.title"))
name = progress.profile_input("progress.profile.page")
attempts = progress.load(name)

if not attempts:
    st.info(tr("progress.empty", profile=untrusted(name)), icon=":material/hourglass_empty:")
    pm.practice_link(progress.suggest({}, list(exercises.KINDS)).kind, icon=":material/arrow_forward:",
                     label=tr("progress.start"))
    st.stop()

table = progress.standings(attempts)
st.caption(tr("progress.intro", profile=untrusted(name)))
totals = progress.totals(attempts)
for column, (label, value) in zip(st.columns(4), [
        (tr("progress.metric.attempts"), str(totals.attempts)),
        (tr("progress.metric.mean"), f"{totals.mean:.0%}"),
        (tr("progress.metric.topics"), str(len(table))),
        (tr("progress.metric.time"), tr("progress.minutes", minutes=round(totals.seconds / 60)))]):
    column.metric(label, value)

suggestion = progress.suggest(table, list(exercises.KINDS))
st.subheader(tr("progress.next"))
st.markdown(progress.suggestion_text(suggestion))
pm.practice_link(suggestion.kind, suggestion.level, icon=":material/arrow_forward:",
                 label=tr("suggest.go", topic=tr(f"kind.{suggestion.kind}.title"), level=suggestion.level))

st.subheader(tr("progress.chart"))
st.caption(tr("progress.chart_caption", last=progress.RECENT))
st.altair_chart(progress.accuracy_chart(attempts), width="stretch")

st.subheader(tr("progress.topics"))
st.dataframe(progress.topic_table(table), hide_index=True, width="stretch")

st.subheader(tr("progress.mistakes"))
mistakes = progress.top_mistakes(attempts)
if not mistakes:
    st.caption(tr("progress.no_mistakes"))
for mistake, count in mistakes:
    with st.expander(tr("progress.mistake_line", count=count, mistake=progress.mistake_name(mistake))):
        st.markdown(tr(f"misconception.{mistake}"))
