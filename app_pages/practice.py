"""Practice: pick a topic and a level, solve on paper, type the answer, check it."""

import streamlit as st

import exercises
from services import exams
from ui import aids, answer_grid, attempts, budget, cache, check_work, feedback, hints, print_problem, problem, solution
from ui import practice_state as ps
from ui.i18n import render, tr

kind, level, seed = ps.ensure()
ex = cache.exercise(kind, seed, level)
ps.sync_url(kind, level, seed)
prefix = ps.answer_boxes(ex)  # the grid's boxes, emptied when the problem changed

st.title(tr("practice.title"))
for notice in st.session_state.get(ps.NOTICES, []):
    st.warning(render(notice, untrusted=True), icon=":material/link_off:")
exam_item = exams.locked(ex.matrices())  # an open exam's item is shown and graded nowhere else

left, right, button = st.columns([3, 1, 1], vertical_alignment="bottom")
kinds = list(exercises.KINDS)
left.selectbox(tr("practice.topic"), kinds, index=kinds.index(kind), format_func=ps.kind_label,
               key=ps.kind_widget_key(), on_change=ps.on_kind_change, args=(ps.kind_widget_key(),))
levels = list(exercises.KINDS[kind].LEVELS)
right.selectbox(tr("practice.level"), levels, index=levels.index(level), key=f"practice.level_widget.{kind}",
                on_change=ps.on_level_change, args=(f"practice.level_widget.{kind}",))
button.button(tr("practice.new_problem"), on_click=ps.on_new_problem, icon=":material/casino:",
              use_container_width=True)

if exam_item:
    st.error(tr("practice.exam_locked"), icon=":material/lock_clock:")
    st.stop()
st.caption(tr("practice.share", kind=ps.kind_label(kind), level=level, seed=seed))  # the title, not the id
problem.show(ex)
budget.show(ex)  # "about N minutes" by hand, and what each level means
aids.show(ex)
print_problem.show(ex)  # on paper: a one-problem PDF, or the LaTeX source to copy


def check() -> None:
    """Check callback: a matrix still in a paste box goes into its grid first; then the grid, exactly
    as it shows, is graded, and the feedback is kept with the answer it grades."""
    state = st.session_state
    if not answer_grid.fill_from_pastes(ex, prefix):
        state[ps.PASTE_UNREAD] = ex.id  # nothing is graded: the learner meant the paste, not the grid
        return
    state.pop(ps.PASTE_UNREAD, None)
    answer = answer_grid.collect(ex, prefix)
    fb = exercises.grade(ex, answer)
    again = ps.same_check(state.get(ps.FEEDBACK), ex, answer)  # the very answer checked before: no new attempt
    state[ps.FEEDBACK] = (ex.id, fb, answer)
    if fb.graded and not again:
        attempts.record(ex, fb, state.get(ps.STARTED), solution_shown=solution.was_shown(ex),
                        hints_used=hints.used(ex))


@st.fragment
def answer_form(ex: exercises.Exercise, prefix: str) -> None:
    """The answer grid, its feedback and the hints: a Check or a hint reruns this alone, not the page
    (the statement, aids and solution above and below it do not change with an answer)."""
    fb, graded = ps.feedback_for(ex)
    with st.container(border=True):
        answer_grid.paste_boxes(ex, prefix)
        with st.form(key=f"form-{ex.id}", border=False):
            answer_grid.draw(ex, prefix, fb, graded=graded, paste=False)
            st.form_submit_button(tr("practice.check"), type="primary", on_click=check, icon=":material/done_all:")

    if st.session_state.get(ps.PASTE_UNREAD) == ex.id:
        st.warning(tr("practice.paste_unread"), icon=":material/content_paste_off:")
    if fb is not None:
        feedback.show(fb)
        if not answer_grid.still_shows(ex, prefix, graded):
            st.caption(":material/edit: " + tr("practice.changed_since_check"))

    hints.show(ex, graded_attempts=len(attempts.for_exercise(ex)), checked=fb)


answer_form(ex, prefix)

if check_work.offers(ex.kind) and st.button(tr("practice.check_my_work"), key=f"checkwork-{ex.id}",
                                                 icon=":material/fact_check:", help=tr("practice.check_my_work_help")):
    check_work.start_from(ex)  # its given data in Check my work's boxes, the steps left to the learner
    st.switch_page("app_pages/check_work.py")

if solution.show_button(ex, key=f"sol-{ex.id}"):
    solution.show(ex, key=f"sol-{ex.id}")
