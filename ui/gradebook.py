"""The gradebook on a page: opened with an assignment's code and teacher key; students × items,
the mistakes made most per item, CSV export. The key stays in this session only. The data come
from services.gradebook; this module draws them."""

from __future__ import annotations

import hashlib
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from exercises.i18n import plural
from exercises.i18n.escape import untrusted
from exercises.teacher.assignments import slots
from services import db
from services import gradebook as service
from services.assignments import AccessDenied, Assignment, AssignmentError, MalformedCode, UnknownAssignment, parse_code

from . import feedback, guard, paper, theme
from . import lti as lti_ui
from .i18n import render, tr, user_text
from .progress import mistake_name

AUTH = "gradebook.auth"  # (code, key) of the gradebook on screen
KEYS = "gradebook.keys"  # {code: key} of every gradebook this session opened (or its dashboard's key owns)


def remember(code: str, key: str) -> None:
    """This session knows `key` opens `code`'s gradebook: it opens again without asking (never in the URL)."""
    st.session_state.setdefault(KEYS, {})[code] = key


def item_labels(a: Assignment) -> list[str]:
    return [tr("gradebook.item", n=s.index + 1, title=tr(f"kind.{s.kind}.title"), level=s.level)
            for s in slots(a.items)]


def table(book: service.Gradebook) -> pd.DataFrame:
    """One row per person: Total (percent), each item's score from the attempt that counts, attempts,
    last submission, blank items and a same-name flag."""
    columns = {c: tr(f"gradebook.col.{c}") for c in ("attempts", "submitted", "blank", "duplicate")}
    return service.table(book, item_labels(book.assignment), tr("gradebook.student"), tr("gradebook.total"), columns,
                         tr("paper.from_paper"))


BOOK_TABLE = "abh-book-table"  # the students × items table's container (its toolbar has room: ui.theme)
SMALL_TABLE = "abh-small-table"  # a small table's container: no toolbar over what is drawn above it


def table_columns(a: Assignment, labels: list[str]) -> dict[str, Any]:
    """Column settings that fit five items and more beside the name at 1280 px: each item headed by its
    number and level only (its whole name in the header's tooltip and in Item statistics), narrow
    percent columns, the name pinned while the rest scrolls on a phone."""
    number = st.column_config.NumberColumn
    config: dict[str, Any] = {
        tr("gradebook.student"): st.column_config.TextColumn(tr("gradebook.student"), pinned=True, width="medium"),
        tr("gradebook.total"): number(tr("gradebook.total"), format="%.1f %%", width="small"),
        tr("gradebook.col.attempts"): number(tr("gradebook.col.attempts"), width="small"),
        tr("gradebook.col.blank"): st.column_config.TextColumn(tr("gradebook.col.blank"), width="small"),
        tr("gradebook.col.duplicate"): st.column_config.TextColumn(tr("gradebook.col.duplicate"), width="small"),
    }
    for s, label in zip(slots(a.items), labels):
        config[label] = number(tr("gradebook.item_short", n=s.index + 1, level=s.level), help=label,
                               format="%.1f %%", width="small")
    return config


def mistakes_frame(book: service.Gradebook) -> pd.DataFrame:
    """(item, mistake, students) for every misconception named in a latest answer."""
    return service.mistakes_frame(book, item_labels(book.assignment), mistake_name)


def mistakes_chart(frame: pd.DataFrame) -> alt.Chart:
    """One bar per item, split by mistake: how many students made each."""
    order = frame.drop_duplicates("item").sort_values("order")["item"].tolist()
    return (alt.Chart(frame).mark_bar()
            .encode(x=alt.X("students:Q", title=tr("gradebook.chart_students"), axis=alt.Axis(tickMinStep=1)),
                    y=alt.Y("item:N", sort=order, title=None, axis=alt.Axis(labelLimit=320)),
                    color=alt.Color("mistake:N", title=tr("gradebook.chart_mistake"),
                                    legend=alt.Legend(orient="bottom", columns=1, labelLimit=600)),
                    tooltip=[alt.Tooltip("item:N", title=tr("gradebook.chart_item")),
                             alt.Tooltip("mistake:N", title=tr("gradebook.chart_mistake")),
                             alt.Tooltip("students:Q", title=tr("gradebook.chart_students"))])
            .properties(title=tr("gradebook.chart_title")))


# ---------------------------------------------------------------- opening it


def _asked_code() -> str | None:
    """The code in the address (?code=…) in canonical form, or None."""
    try:
        return parse_code(st.query_params.get("code", ""))
    except MalformedCode:
        return None


def open_ui() -> tuple[str, str] | None:
    """The code-and-key form; (code, key) once the key matched, else None. A key that matched is
    remembered for the session per code: that gradebook opens again without asking."""
    state = st.session_state
    asked, known = _asked_code(), state.get(KEYS, {})
    if AUTH in state and asked in (None, state[AUTH][0]):
        return state[AUTH]
    if asked in known:
        state[AUTH] = (asked, known[asked])
        return state[AUTH]
    launched = lti_ui.teacher_key(asked) if asked else None  # an instructor opened it from the course
    if launched is not None:
        remember(asked, launched)
        state[AUTH] = (asked, launched)
        st.caption(tr("lti.instructor"))
        return state[AUTH]
    with st.form("gradebook.open"):
        code_text = st.text_input(tr("gradebook.code"), value=st.query_params.get("code", ""), max_chars=40,
                                  key="gradebook.code")
        key_text = st.text_input(tr("gradebook.key"), type="password", max_chars=100, key="gradebook.key")
        pressed = st.form_submit_button(tr("gradebook.open"), type="primary", icon=":material/lock_open:")
    if not pressed:
        return None
    # throttled guesses per browser address and for everyone, shared by sessions and replicas
    if guard.refused("gradebook"):
        return None
    problem = service.check(code_text, key_text)
    if problem is not None:
        if problem.key != "assign.error.database":
            guard.failed("gradebook")
        st.error(render(problem, untrusted=True), icon=":material/lock:")
        return None
    guard.succeeded("gradebook")
    state[AUTH] = service.credentials(code_text, key_text)
    remember(*state[AUTH])
    if asked is not None and asked != state[AUTH][0]:
        st.query_params["code"] = state[AUTH][0]  # the address names the gradebook on screen
    st.rerun()


def close() -> None:
    """Lock the gradebook on screen: its key is forgotten by this session."""
    state = st.session_state
    code, _ = state.pop(AUTH, (None, None))
    state.get(KEYS, {}).pop(code, None)
    state.pop("gradebook.key", None)


def show(code: str, key: str) -> None:
    try:
        book = service.load(code, key)
    except (AccessDenied, UnknownAssignment, ValueError):
        close()
        st.error(tr("gradebook.error.key_wrong", code=code), icon=":material/lock:")
        return
    except db.Unavailable:
        feedback.database_unavailable()
        return
    a = book.assignment
    left, right = st.columns([4, 1], vertical_alignment="center")
    left.subheader(tr("gradebook.heading", title=untrusted(a.title), code=a.code))
    right.button(tr("gradebook.close"), on_click=close, key="gradebook.close", icon=":material/lock:")
    st.caption(tr("gradebook.summary", students=plural("gradebook.students", len(book.students)),
                  items=plural("gradebook.items", a.item_count),
                  created=a.created_at.strftime("%Y-%m-%d %H:%M UTC")))
    clashes_ui(code, key)
    paper.marking_ui(a, key)
    if not book.students:
        st.info(tr("gradebook.empty"), icon=":material/hourglass_empty:")
        return
    missing = service.not_submitted(book)
    if missing:
        st.warning(tr("gradebook.not_submitted", names=", ".join(map(user_text, missing))),  # each name escaped
                   icon=":material/person_off:")
    frame = table(book)
    labels = item_labels(a)
    with theme.table(f"{BOOK_TABLE}-{a.code}", toolbar=True):
        st.dataframe(frame, hide_index=True, column_config=table_columns(a, labels))
    if frame[tr("gradebook.col.duplicate")].astype(bool).any():
        st.info(tr("gradebook.duplicates"), icon=":material/group:")
        duplicates_ui(book, code, key)
    st.caption(tr("gradebook.counts", counts=tr(f"assign.counts.{a.rules.counts}")))
    st.download_button(tr("gradebook.csv"), data=service.csv_bytes(frame), file_name=f"gradebook-{a.code}.csv",
                       mime="text/csv", icon=":material/download:", key="gradebook.csv", on_click="ignore")
    stats_ui(book, labels)
    student_ui(book, [p.label for p in service.persons(book)])  # who has answers to show
    mistakes = mistakes_frame(book)
    if mistakes.empty:
        st.caption(tr("gradebook.no_mistakes"))
    else:
        st.altair_chart(mistakes_chart(mistakes), width="stretch")


def _person_text(p: service.Person, markdown: bool = False) -> str:
    """One of the same-name people: name, attempts, last submission (escaped where Markdown renders)."""
    return tr("gradebook.dup_person", name=untrusted(p.label) if markdown else p.label, attempts=len(p.attempts),
              when=p.attempts[-1][-1].submitted_at.strftime("%Y-%m-%d %H:%M UTC"))


def duplicates_ui(book: service.Gradebook, code: str, key: str) -> None:
    """Each name typed in several browsers: merge them into one person, or rename one (different people)."""
    for group in service.duplicates(book):
        _duplicate_ui(group, code, key)


def _duplicate_ui(group: list[service.Person], code: str, key: str) -> None:
    ident = hashlib.sha256(group[0].who.encode()).hexdigest()[:12]
    with st.expander(tr("gradebook.dup_heading", name=untrusted(group[0].label)), icon=":material/group:"):
        st.caption(" · ".join(_person_text(p, markdown=True) for p in group))
        with st.form(f"gradebook.merge.{ident}"):
            into = st.selectbox(tr("gradebook.dup_into"), range(len(group)), key=f"gradebook.into.{ident}",
                                format_func=lambda i: _person_text(group[i]))
            merge = st.form_submit_button(tr("gradebook.dup_merge"), icon=":material/merge:")
        with st.form(f"gradebook.rename.{ident}"):
            who = st.selectbox(tr("gradebook.dup_who"), range(len(group)), key=f"gradebook.who.{ident}",
                               format_func=lambda i: _person_text(group[i]))
            name = st.text_input(tr("gradebook.dup_name"), max_chars=80, key=f"gradebook.name.{ident}")
            rename = st.form_submit_button(tr("gradebook.dup_rename"), icon=":material/edit:")
    try:
        if merge:
            for other in group:
                if other.who != group[into].who:
                    service.merge(code, key, group[into], other)
            st.rerun()
        if rename:
            service.rename(code, key, group[who], name)
            st.rerun()
    except AssignmentError as err:
        st.error(render(err.message, untrusted=True), icon=":material/person_alert:")
    except (AccessDenied, UnknownAssignment, ValueError):
        st.error(tr("gradebook.error.key_wrong", code=code), icon=":material/lock:")
    except db.Unavailable:
        feedback.database_unavailable()


def clashes_ui(code: str, key: str) -> None:
    """Browsers refused a name another browser holds: admit one (the same person) or release the name."""
    try:
        clashes = service.clashes(code, key)
    except (AccessDenied, UnknownAssignment, ValueError):
        return
    except db.Unavailable:
        feedback.database_unavailable()
        return
    waiting = [c for c in clashes if not c.admitted]
    if not waiting:
        return
    with st.expander(tr("gradebook.clashes_heading", count=len(waiting)), icon=":material/person_alert:"):
        st.caption(tr("gradebook.clashes_intro"))
        for clash in waiting:
            ident = f"{clash.ref}.{hashlib.sha256(clash.student_key.encode()).hexdigest()[:8]}"
            left, middle, right = st.columns([3, 1, 1], vertical_alignment="center")
            left.markdown(tr("gradebook.clash_line", name=untrusted(clash.name), holder=untrusted(clash.holder),
                             ref=clash.ref[:6], when=clash.at.strftime("%Y-%m-%d %H:%M UTC")))
            try:
                if middle.button(tr("gradebook.clash_admit"), key=f"gradebook.admit.{ident}", icon=":material/merge:"):
                    service.admit(code, key, clash)
                    st.rerun()
                if right.button(tr("gradebook.clash_release"), key=f"gradebook.release.{ident}",
                                icon=":material/person_remove:"):
                    service.release(code, key, clash)
                    st.rerun()
            except (AccessDenied, UnknownAssignment):
                st.error(tr("gradebook.error.key_wrong", code=code), icon=":material/lock:")
            except db.Unavailable:
                feedback.database_unavailable()


def stats_ui(book: service.Gradebook, labels: list[str]) -> None:
    """Facility and discrimination per item; items under 0.2 flagged."""
    st.subheader(tr("gradebook.stats_heading"))
    stats = service.item_stats(book, labels)
    stats["flagged"] = stats["flagged"].map(lambda f: "⚠" if f else "")
    stats.columns = [tr("gradebook.chart_item"), tr("gradebook.facility"), tr("gradebook.discrimination"),
                     tr("gradebook.flagged")]
    with theme.table(f"{SMALL_TABLE}-stats", toolbar=False):
        st.dataframe(stats, hide_index=True, column_config={
            tr("gradebook.facility"): st.column_config.NumberColumn(format="%.1f %%"),
            tr("gradebook.discrimination"): st.column_config.NumberColumn(format="%.2f")})
    people = len(service.persons(book))
    if people < service.MIN_FOR_DISCRIMINATION:
        st.caption(tr("gradebook.discrimination_few", min=service.MIN_FOR_DISCRIMINATION, count=people))
    else:
        st.caption(tr("gradebook.stats_help"))


def student_ui(book: service.Gradebook, names: list[str]) -> None:
    """One student's answers cell by cell, every attempt, with marks."""
    st.subheader(tr("gradebook.student_heading"))
    name = st.selectbox(tr("gradebook.student"), names, key="gradebook.one_student")
    if name is None:
        return
    marks = {m: tr(f"gradebook.mark.{m}") for m in ("blank", "right", "wrong", "consistent")}
    cells = service.student_cells(book, name, marks)
    cells.columns = [tr(f"gradebook.cell.{c}") for c in cells.columns]
    with theme.table(f"{SMALL_TABLE}-cells", toolbar=False):  # a toolbar would cover the Student box above
        st.dataframe(cells, hide_index=True)
