"""Assignments on a page: the teacher's builder, and a student's way through a set (?assignment=CODE).

A student's answers go to the database in one transaction when they submit; nothing is graded in
front of them before that, and the answer key is never on this page. Solutions open after
submitting, and only when the teacher allowed it. Creating, loading, grading and storing are
services (services.assignments, services.submissions); this module draws and reads widgets.
"""

from __future__ import annotations

import functools
import secrets
from dataclasses import dataclass
from typing import Any

import streamlit as st

import exercises
from exercises import Exercise, Feedback
from exercises.assignments import clean_student_name
from exercises.i18n import plural
from services import assignments as service
from services import db, submissions
from services.assignments import MAX_COUNT, MAX_SEED, Assignment, AssignmentError

from . import aids as aids_ui
from . import answer_grid, feedback, problem, solution
from .i18n import lang, lang_key, render, tr

MAX_ROWS = 8  # item rows in the builder
CREATED = "assign.created"  # {code, title, key, assignment}: this session's new assignment; the key lives only here
SEED = "assign.seed"


# ---------------------------------------------------------------- teacher: build and create


@dataclass(frozen=True)
class BuilderValues:
    title: str
    items: list[dict[str, Any]]
    seed: int
    per_student: bool
    allow_solutions: bool


def builder_ui() -> BuilderValues | None:
    """The builder's widgets; the values when "Create" was pressed, else None."""
    state = st.session_state
    if SEED not in state:
        state[SEED] = secrets.randbelow(100_000)
    st.text_input(tr("assign.title_label"), key="assign.title", max_chars=120,
                  placeholder=tr("assign.title_placeholder"))
    rows = int(st.number_input(tr("assign.rows"), min_value=1, max_value=MAX_ROWS, value=1, step=1,
                               key="assign.rows"))
    kinds = list(exercises.KINDS)
    items = []
    for r in range(rows):
        left, middle, right = st.columns([3, 1, 1], vertical_alignment="bottom")
        # options are translated titles: one widget per language, the choice carried over on a switch
        kind = left.selectbox(tr("assign.kind", n=r + 1), kinds, format_func=lambda k: tr(f"kind.{k}.title"),
                              key=lang_key(f"assign.kind.{r}", carry=True))
        levels = list(exercises.KINDS[kind].LEVELS)
        level = middle.selectbox(tr("assign.level"), levels, key=f"assign.level.{r}.{kind}")
        count = right.number_input(tr("assign.count"), min_value=1, max_value=MAX_COUNT, value=1, step=1,
                                   key=f"assign.count.{r}")
        items.append({"kind": kind, "level": int(level), "count": int(count)})
    seed = st.number_input(tr("assign.seed"), min_value=0, max_value=MAX_SEED - 1, step=1, key=SEED,
                           help=tr("assign.seed_help"))
    per_student = st.checkbox(tr("assign.per_student"), key="assign.per_student", help=tr("assign.per_student_help"))
    allow = st.checkbox(tr("assign.allow_solutions"), key="assign.allow_solutions")
    if not st.button(tr("assign.create"), type="primary", icon=":material/add_task:", key="assign.create"):
        return None
    return BuilderValues(state.get("assign.title", ""), items, int(seed), bool(per_student), bool(allow))


def create(values: BuilderValues) -> None:
    """Store the assignment; remember its code and key for this session (the key is never stored)."""
    try:
        created = service.create(values.title, values.items, values.seed, values.per_student,
                                 values.allow_solutions)
    except AssignmentError as err:
        st.error(render(err.message), icon=":material/error:")
        return
    except db.Unavailable:
        st.error(tr("assign.error.database"), icon=":material/cloud_off:")
        return
    a = created.assignment
    st.session_state[CREATED] = {"code": a.code, "title": a.title, "key": created.teacher_key, "assignment": a}


def share_link(code: str) -> str:
    """The address a student opens: this page with ?assignment=CODE."""
    base = st.context.url or ""
    return f"{base}?assignment={code}"


def created_ui() -> None:
    """Code, link and teacher key of the assignment just created, and both PDFs."""
    created = st.session_state.get(CREATED)
    if not created:
        return
    code = created["code"]
    st.success(tr("assign.created", title=created["title"]), icon=":material/task_alt:")
    st.markdown(tr("assign.code_label"))
    st.code(code, language=None)
    st.markdown(tr("assign.link_label"))
    st.code(share_link(code), language=None)
    if created.get("key"):
        st.warning(tr("assign.key_once"), icon=":material/key:")
        st.code(created["key"], language=None)
        if st.button(tr("assign.key_saved"), key="assign.key_saved"):
            created["key"] = None  # gone for good: only its hash is in the database
            st.rerun()
    downloads_ui(created["assignment"])


def downloads_ui(a: Assignment) -> None:
    """The two PDF downloads; for per-student variants, after the class list is entered."""
    code = a.code
    students: tuple[str, ...] = ()
    if a.per_student:
        text = st.text_area(tr("assign.students_label"), key=f"assign.students.{code}",
                            placeholder=tr("assign.students_placeholder"), help=tr("assign.students_help"))
        try:
            students = service.class_list(text or "")
        except AssignmentError as err:
            st.error(render(err.message), icon=":material/error:")
            return
        if not students:
            st.info(tr("assign.students_needed"), icon=":material/group:")
            return
    if service.missing_font(a.spec, students, tr("worksheet.name_line")):
        st.warning(tr("assign.error.pdf_font"), icon=":material/font_download_off:")
        return
    left, right = st.columns(2)
    # the PDFs are made when a button is clicked (data as a callable), not on every rerun
    left.download_button(tr("assign.download_sheet"), data=functools.partial(service.pdf, a, students, lang(),
                                                                             "worksheet.pdf"),
                         file_name=f"worksheet-{code}.pdf", mime="application/pdf", key=f"assign.dl_sheet.{code}",
                         icon=":material/description:", on_click="ignore")
    right.download_button(tr("assign.download_key"), data=functools.partial(service.pdf, a, students, lang(),
                                                                            "answer-key.pdf"),
                          file_name=f"answer-key-{code}.pdf", mime="application/pdf", key=f"assign.dl_key.{code}",
                          icon=":material/key:", on_click="ignore")


def open_code_ui() -> None:
    """A box where a student types the code they were given."""
    with st.form("assign.open", border=True):
        st.markdown(tr("assign.open_intro"))
        text = st.text_input(tr("assign.code_input"), key="assign.open_code", max_chars=40)
        if st.form_submit_button(tr("assign.open"), icon=":material/login:"):
            st.query_params["assignment"] = (text or "").strip()[:40]
            st.rerun()


# ---------------------------------------------------------------- student: open, work, submit


def load(code_text: str) -> Assignment | None:
    """The assignment behind ?assignment=…, or None after a clear message."""
    try:
        a = service.load(code_text)
    except service.MalformedCode:
        st.error(tr("assign.error.code_malformed", code=code_text[:40]), icon=":material/link_off:")
        return None
    except db.Unavailable:
        st.error(tr("assign.error.database"), icon=":material/cloud_off:")
        return None
    if a is None:
        st.error(tr("assign.error.code_unknown", code=service.parse_code(code_text)), icon=":material/link_off:")
    return a


def _key(a: Assignment, what: str) -> str:
    return f"assign.{what}.{a.code}"


def student_name_ui(a: Assignment) -> str | None:
    """The student's name for this assignment (asked once per session), or None until given."""
    state = st.session_state
    name = state.get(_key(a, "student"))
    if name is not None:
        left, right = st.columns([4, 1], vertical_alignment="center")
        left.markdown(tr("assign.working_as", name=name))
        if _key(a, "result") not in state and right.button(tr("assign.change_name"), key=_key(a, "rename")):
            del state[_key(a, "student")]
            state.pop(_key(a, "slot"), None)  # another name: fresh, empty grids
            state.pop(_key(a, "problems"), None)
            state.pop(_key(a, "exercises"), None)
            st.rerun()
        return name
    with st.form(_key(a, "name_form")):
        text = st.text_input(tr("assign.name_label"), key=_key(a, "name_input"), max_chars=80)
        started = st.form_submit_button(tr("assign.start"), type="primary", icon=":material/play_arrow:")
    if started:
        try:
            state[_key(a, "student")] = clean_student_name(text)
        except AssignmentError as err:
            st.error(render(err.message), icon=":material/person_alert:")
            return None
        st.rerun()
    return None


def items_for(a: Assignment, name: str) -> list[Exercise] | None:
    """This student's exercises as stored (their own variants, or the class's set), kept in the
    session; None after a clear message when they cannot be shown as they were set."""
    state = st.session_state
    cached = state.get(_key(a, "exercises"))
    if cached is not None and cached[0] == name:
        return cached[1]
    try:
        items = submissions.exercises_for(a, name)
    except submissions.ExerciseChanged as err:
        st.error(tr("assign.error.changed", items=", ".join(str(i + 1) for i in err.items)),
                 icon=":material/history:")
        return None
    except db.Unavailable:
        st.error(tr("assign.error.database"), icon=":material/cloud_off:")
        return None
    state[_key(a, "exercises")] = (name, items)
    return items


def slot_id(a: Assignment) -> str:
    """A random id for this session's answer grids (new with each name): widget keys carry it and the
    item's position, never the exercise's seed, which would reproduce the problem and its solution."""
    state = st.session_state
    if _key(a, "slot") not in state:
        state[_key(a, "slot")] = secrets.token_hex(4)
    return state[_key(a, "slot")]


def _prefix(a: Assignment, index: int, ex: Exercise) -> str:
    return f"asg-{index}-{slot_id(a)}"


def _submit(a: Assignment, name: str, items: list[Exercise]) -> None:
    """Form callback: grade everything; store it all in one transaction, or say what to fix first."""
    state = st.session_state
    answers = {index: answer_grid.collect(ex, _prefix(a, index, ex)) for index, ex in enumerate(items)}
    graded = submissions.grade_all(items, answers, allow_blank=bool(state.get(_key(a, "allow_blank"))))
    state[_key(a, "problems")] = graded.unreadable
    state[_key(a, "blank")] = graded.blank
    if not graded.ready:
        return
    try:
        ids = submissions.submit(a, name, items, graded)
    except submissions.NotSaved:
        state[_key(a, "save_failed")] = True
        return
    state.pop(_key(a, "save_failed"), None)
    state[_key(a, "result")] = {"ids": ids, "feedback": graded.feedback, "answers": graded.answers}


def work_ui(a: Assignment, name: str, items: list[Exercise]) -> None:
    """Every item with its answer grid in one form, and Submit."""
    state = st.session_state
    problems: dict[int, Feedback] = state.get(_key(a, "problems"), {})
    blank: list[int] = state.get(_key(a, "blank"), [])
    if problems:
        st.error(tr("assign.fix_first", items=", ".join(str(i + 1) for i in sorted(problems))),
                 icon=":material/edit_note:")
    if blank:
        st.warning(tr("assign.blank_items", items=", ".join(str(i + 1) for i in blank)), icon=":material/help:")
    if state.get(_key(a, "save_failed")):
        st.error(tr("assign.error.save"), icon=":material/cloud_off:")
    st.caption(tr("assign.before_submit"))
    with st.form(_key(a, "work"), border=False):
        for index, ex in enumerate(items):
            st.subheader(tr("assign.item_heading", n=index + 1, title=tr(f"kind.{ex.kind}.title")))
            problem.show(ex)
            aids_ui.show(ex, expanded=False)
            answer_grid.draw(ex, _prefix(a, index, ex), problems.get(index))
            st.divider()
        st.checkbox(tr("assign.allow_blank"), key=_key(a, "allow_blank"))
        st.form_submit_button(tr("assign.submit"), type="primary", icon=":material/send:", on_click=_submit,
                              args=(a, name, items))


def _restore(ex: Exercise, prefix: str, answer: dict[str, Any]) -> None:
    """Put the submitted answer back into the grid's widget keys (the form that held them is gone)."""
    state = st.session_state
    for part in ex.parts:
        value = answer.get(part.name)
        if part.is_choice:
            state[answer_grid.choice_key(prefix, part.name)] = value
        elif isinstance(value, str):
            state[answer_grid.paste_key(prefix, part.name)] = value
        elif value is not None:
            for i, row in enumerate(value):
                for j, text in enumerate(row):
                    state[answer_grid.cell_key(prefix, part.name, i, j)] = text


def results_ui(a: Assignment, items: list[Exercise]) -> None:
    """After submitting: the marks and feedback of each item; solutions when the teacher allows them."""
    result = st.session_state[_key(a, "result")]
    graded: dict[int, Feedback | None] = result["feedback"]
    total = sum(fb.score for fb in graded.values() if fb is not None) / max(len(items), 1)
    st.success(tr("assign.submitted", score=f"{total:.0%}"), icon=":material/task_alt:")
    for index, ex in enumerate(items):
        st.subheader(tr("assign.item_heading", n=index + 1, title=tr(f"kind.{ex.kind}.title")))
        problem.show(ex)
        fb = graded.get(index)
        if fb is None:
            st.info(tr("assign.not_answered"), icon=":material/remove:")
        else:
            _restore(ex, _prefix(a, index, ex), result["answers"][index])
            answer_grid.draw(ex, _prefix(a, index, ex), fb, disabled=True)
            feedback.show(fb)
        if a.allow_solutions and solution.show_button(ex, key=f"asg-sol-{a.code}-{index}"):
            solution.show(ex, key=f"asg-sol-{a.code}-{index}")
        st.divider()
    if not a.allow_solutions:
        st.caption(tr("assign.no_solutions"))


def student_ui(a: Assignment) -> None:
    st.title(a.title)
    st.caption(render(plural("assign.student_intro", a.item_count, code=a.code)))
    name = student_name_ui(a)
    if name is None:
        return
    items = items_for(a, name)
    if items is None:
        return
    if _key(a, "result") in st.session_state:
        results_ui(a, items)
    else:
        work_ui(a, name, items)
