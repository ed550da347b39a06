"""Practice: pick a topic and a level, solve on paper, type the answer, check it."""

import streamlit as st

import exercises
from ui import aids, answer_grid, attempts, cache, feedback, hints, problem, solution
from ui import practice_state as ps
from ui.i18n import render, tr

kind, level, seed = ps.ensure()
ex = cache.exercise(kind, seed, level)
ps.sync_url(kind, level, seed)
prefix = f"ans-{ex.id}"

st.title(tr("practice.title"))
for notice in st.session_state.get(ps.NOTICES, []):
    st.warning(render(notice, untrusted=True), icon=":material/link_off:")

left, right, button = st.columns([3, 1, 1], vertical_alignment="bottom")
kinds = list(exercises.KINDS)
left.selectbox(tr("practice.topic"), kinds, index=kinds.index(kind), format_func=ps.kind_label,
               key=ps.kind_widget_key(), on_change=ps.on_kind_change, args=(ps.kind_widget_key(),))
levels = list(exercises.KINDS[kind].LEVELS)
right.selectbox(tr("practice.level"), levels, index=levels.index(level), key=f"practice.level_widget.{kind}",
                on_change=ps.on_level_change, args=(f"practice.level_widget.{kind}",))
button.button(tr("practice.new_problem"), on_click=ps.on_new_problem, icon=":material/casino:",
              use_container_width=True)

st.caption(tr("practice.share", kind=kind, level=level, seed=seed))
problem.show(ex)
aids.show(ex)


def check() -> None:
    """Form callback: grade what is in the cells now, remember the feedback, record the attempt."""
    fb = exercises.grade(ex, answer_grid.collect(ex, prefix))
    st.session_state[ps.FEEDBACK] = (ex.id, fb)
    if fb.graded:
        attempts.record(ex, fb, st.session_state.get(ps.STARTED), solution_shown=solution.was_shown(ex),
                        hints_used=hints.used(ex))


stored = st.session_state.get(ps.FEEDBACK)
fb = stored[1] if stored and stored[0] == ex.id else None

with st.form(key=f"form-{ex.id}", border=True):
    answer_grid.draw(ex, prefix, fb)
    st.form_submit_button(tr("practice.check"), type="primary", on_click=check, icon=":material/done_all:")

if fb is not None:
    feedback.show(fb)

hints.show(ex, graded_attempts=len(attempts.for_exercise(ex)))

if solution.show_button(ex, key=f"sol-{ex.id}"):
    solution.show(ex, key=f"sol-{ex.id}")
