"""Assignments on a page: the teacher's builder, and a student's way through a set (?assignment=CODE).

A student's answers go to the database in one transaction when they submit; nothing is graded in
front of them before that, and the answer key is never on this page. Solutions open after
submitting, and only when the teacher allowed it. Creating, loading, grading and storing are
services (services.assignments, services.submissions); this module draws and reads widgets.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError

import exercises
from exercises import Exercise, Feedback
from exercises.core.parser import run_budget
from exercises.i18n import msg, plural
from exercises.i18n.escape import untrusted
from exercises.teacher.assignments import MAX_TITLE, clean_student_name, student_key
from exercises.worksheets import MAX_CLASS_LIST_CHARS
from services import assignments as service
from services import db, submissions
from services import gradebook as gradebook_service
from services.assignments import MAX_COUNT, MAX_SEED, Assignment, AssignmentError

from . import aids as aids_ui
from . import answer_grid, feedback, guard, mathview, paper, problem, solution
from . import exports as exports_ui
from . import gradebook as gradebook_ui
from . import lti as lti_ui
from . import progress as progress_ui
from .i18n import lang, lang_key, render, tr, user_text

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
    rules: dict[str, Any] = field(default_factory=dict)
    teacher_key: str = ""
    roster: str = ""

    def request_id(self, nonce: str) -> str:
        """The same values pressed again in this session make no second assignment."""
        text = repr((self.title, self.items, self.seed, self.per_student, self.allow_solutions,
                     sorted(self.rules.items()), self.roster, nonce))
        return hashlib.sha256(text.encode()).hexdigest()[:40]


def _moment(label: str, key: str) -> datetime | None:
    """An optional date and time (UTC): a checkbox, then the two pickers."""
    if not st.checkbox(label, key=f"{key}.on"):
        return None
    left, right = st.columns(2)
    day = left.date_input(tr("assign.date"), key=f"{key}.date")
    at = right.time_input(tr("assign.time"), key=f"{key}.time", value=time(23, 59) if "deadline" in key else time(8))
    return datetime.combine(day, at, tzinfo=UTC)


def rules_ui() -> dict[str, Any]:
    """Attempts, which counts, opening and deadline, exam mode: the rules as a dict."""
    with st.expander(tr("assign.rules_heading"), icon=":material/rule:"):
        left, right = st.columns(2)
        attempts = int(left.number_input(tr("assign.attempts"), min_value=0, max_value=20, value=1, step=1,
                                         key="assign.attempts", help=tr("assign.attempts_help")))
        counts = right.selectbox(tr("assign.counts"), ["last", "best", "first"], key=lang_key("assign.counts", True),
                                 format_func=lambda c: tr(f"assign.counts.{c}"))
        opens = _moment(tr("assign.opens_on"), "assign.opens")
        deadline = _moment(tr("assign.deadline_on"), "assign.deadline")
        exam = st.checkbox(tr("assign.exam"), key="assign.exam", help=tr("assign.exam_help"))
        release, limit = "final", 0
        if exam:
            left, right = st.columns(2)
            release = left.selectbox(tr("assign.release"), ["final", "manual"], key=lang_key("assign.release", True),
                                     format_func=lambda c: tr(f"assign.release.{c}"))
            limit = int(right.number_input(tr("assign.time_limit"), min_value=0, max_value=600, value=0, step=5,
                                           key="assign.time_limit"))
    return {"attempts": attempts, "counts": counts, "opens_at": opens, "deadline": deadline, "exam": exam,
            "release": release, "time_limit": limit}


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
    rules = rules_ui()
    roster = st.text_area(tr("assign.roster_label"), key="assign.roster", help=tr("assign.roster_help"),
                          placeholder=tr("assign.students_placeholder"), max_chars=MAX_CLASS_LIST_CHARS)
    upload = st.file_uploader(tr("assign.roster_csv"), type=["csv", "txt"], key="assign.roster_file")
    if upload is not None:  # decoded no further than the bound: a longer file still decodes past it, and is refused
        roster = upload.getvalue()[:4 * MAX_CLASS_LIST_CHARS + 8].decode("utf-8-sig", errors="replace")
    owner = st.text_input(tr("assign.owner_key"), type="password", key="assign.owner_key", max_chars=100,
                          help=tr("assign.owner_key_help"))
    if not st.button(tr("assign.create"), type="primary", icon=":material/add_task:", key="assign.create"):
        return None
    return BuilderValues(state.get("assign.title", ""), items, int(seed), bool(per_student), bool(allow), rules,
                         (owner or "").strip(), roster or "")


def create(values: BuilderValues) -> None:
    """Store the assignment (once per set of values: Create pressed twice makes no second one) and its
    class list; remember code, key and personal links for this session (the key is never stored)."""
    state = st.session_state
    nonce = state.setdefault("assign.nonce", secrets.token_hex(8))
    try:
        names = service.class_list(values.roster)
        created = service.create(values.title, values.items, values.seed, values.per_student,
                                 values.allow_solutions, rules=values.rules, teacher_key=values.teacher_key or None,
                                 request_id=values.request_id(nonce))
    except AssignmentError as err:
        st.error(render(err.message, untrusted=True), icon=":material/error:")
        return
    except service.MalformedKey:  # a key is the one this app gave, never one the teacher makes up
        st.error(tr("assign.error.owner_key"), icon=":material/key_off:")
        return
    except db.Unavailable:
        feedback.database_unavailable()
        return
    a = created.assignment
    if created.teacher_key:
        gradebook_ui.remember(a.code, created.teacher_key)
    earlier = state.get(CREATED) or {}
    if created.existing and earlier.get("code") == a.code:
        earlier["again"] = True
        return
    key = created.teacher_key
    links: dict[str, str] = {}
    if names and key and not created.existing:
        try:
            links = service.set_roster(a, key, "\n".join(names))
            a = service.load(a.code) or a
        except db.Unavailable:
            feedback.database_unavailable()
    state[CREATED] = {"code": a.code, "title": a.title, "key": None if values.teacher_key else key,
                      "assignment": a, "links": links, "again": created.existing}


def share_link(code: str, token: str | None = None) -> str:
    """The address a student opens: this page with ?assignment=CODE (and a personal link's token)."""
    base = (st.context.url or "").split("?")[0]
    return f"{base}?assignment={code}" + (f"&t={token}" if token else "")


def links_ui(code: str, links: dict[str, str]) -> None:
    """The printable list of personal links (shown once: only their hashes are stored)."""
    if not links:
        return
    st.warning(tr("assign.links_once"), icon=":material/badge:")
    frame = pd.DataFrame([(n, share_link(code, t)) for n, t in links.items()],
                         columns=[tr("gradebook.student"), tr("assign.link")])
    st.table(frame.assign(**{tr("gradebook.student"): frame[tr("gradebook.student")].map(user_text)}))  # Markdown cells
    st.download_button(tr("assign.links_csv"), data=gradebook_service.csv_bytes(frame),
                       file_name=f"links-{code}.csv", mime="text/csv", key=f"assign.links_csv.{code}",
                       icon=":material/download:", on_click="ignore")


def created_ui() -> None:
    """Code, link and teacher key of the assignment just created, and both PDFs."""
    created = st.session_state.get(CREATED)
    if not created:
        return
    code = created["code"]
    if created.get("again"):
        st.info(tr("assign.already_created", code=code), icon=":material/content_copy:")
    st.success(tr("assign.created", title=untrusted(created["title"])), icon=":material/task_alt:")
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
    links_ui(code, created.get("links") or {})
    downloads_ui(created["assignment"])


def downloads_ui(a: Assignment) -> None:
    """The two PDF downloads; for per-student variants, after the class list is entered."""
    code = a.code
    students: tuple[str, ...] = ()
    if a.per_student and a.has_roster:
        try:
            students = service.roster(a)
        except db.Unavailable:
            feedback.database_unavailable()
            return
    elif a.per_student:
        text = st.text_area(tr("assign.students_label"), key=f"assign.students.{code}",
                            placeholder=tr("assign.students_placeholder"), help=tr("assign.students_help"),
                            max_chars=MAX_CLASS_LIST_CHARS)
        try:
            students = service.class_list(text or "")
        except AssignmentError as err:
            st.error(render(err.message, untrusted=True), icon=":material/error:")
            return
        if not students:
            st.info(tr("assign.students_needed"), icon=":material/group:")
            return
    if service.missing_font(a.spec, students, tr("worksheet.name_line")):
        st.warning(tr("assign.error.pdf_font"), icon=":material/font_download_off:")
        return

    links = st.session_state.get(f"assign.links.{code}") or (st.session_state.get(CREATED) or {}).get("links") or {}
    exports_ui.downloads(a, students, {n: share_link(code, token) for n, token in links.items()})


# ---------------------------------------------------------------- teacher: the dashboard

DASH = "assign.dash"  # the teacher key that opened the dashboard, in this session only


def _dash_open() -> None:
    with st.form("assign.dash_form"):
        text = st.text_input(tr("gradebook.key"), type="password", key="assign.dash_key", max_chars=100)
        pressed = st.form_submit_button(tr("assign.dash_open"), icon=":material/lock_open:")
    if not pressed or guard.refused("dashboard"):  # throttled per browser address and for everyone
        return
    try:
        found = service.mine(text)
    except service.MalformedKey:
        guard.failed("dashboard")
        st.error(tr("gradebook.error.key_malformed"), icon=":material/key_off:")
        return
    except db.Unavailable:
        feedback.database_unavailable()
        return
    if not found:
        guard.failed("dashboard")
        st.error(tr("assign.dash_none"), icon=":material/lock:")
        return
    guard.succeeded("dashboard")
    st.session_state[DASH] = service.parse_key(text)
    st.rerun()


def _dash_moment(label: str, value: datetime | None, key: str) -> datetime | None:
    """An optional moment: a checkbox, then (only when it is ticked) a date and a time (UTC)."""
    if not st.checkbox(label, value=value is not None, key=f"{key}.on"):
        return None
    shown = value or datetime.now(UTC).replace(second=0, microsecond=0)
    left, right = st.columns(2)
    day = left.date_input(tr("assign.date"), value=shown.date(), key=f"{key}.date")
    at = right.time_input(tr("assign.time"), value=shown.time(), key=f"{key}.time")
    return datetime.combine(day, at, tzinfo=UTC)


def _dash_rules(a: Assignment, key: str) -> None:
    """Edit title, attempts, which counts, opening, deadline, exam mode, marks, time limit, solutions: at
    any time (the items have their own form). No st.form: ticking a switch shows at once what it governs
    (the pickers of a date, the exam-only settings) and hides what does not apply."""
    r = a.rules
    with st.container(border=True, key=f"assign.edit.{a.code}"):
        title = st.text_input(tr("assign.title_label"), value=a.title, key=f"assign.edit_title.{a.code}",
                              max_chars=MAX_TITLE)
        left, right = st.columns(2)
        attempts = left.number_input(tr("assign.attempts"), min_value=0, max_value=20, value=r.attempts,
                                     key=f"assign.edit_attempts.{a.code}")
        counts = right.selectbox(tr("assign.counts"), ["last", "best", "first"], index=["last", "best", "first"]
                                 .index(r.counts), format_func=lambda c: tr(f"assign.counts.{c}"),
                                 key=f"assign.edit_counts.{a.code}.{lang()}")
        opens = _dash_moment(tr("assign.opens_on"), r.opens_at, f"assign.edit_opens.{a.code}")
        deadline = _dash_moment(tr("assign.deadline_on"), r.deadline, f"assign.edit_deadline.{a.code}")
        exam = st.checkbox(tr("assign.exam"), value=r.exam, key=f"assign.edit_exam.{a.code}",
                           help=tr("assign.exam_help"))
        release, limit = r.release, r.time_limit
        if exam:
            left, right = st.columns(2)
            release = left.selectbox(tr("assign.release"), ["final", "manual"],
                                     index=["final", "manual"].index(r.release),
                                     format_func=lambda c: tr(f"assign.release.{c}"),
                                     key=f"assign.edit_release.{a.code}.{lang()}")
            limit = right.number_input(tr("assign.time_limit"), min_value=0, max_value=600, value=r.time_limit,
                                       step=5, key=f"assign.edit_limit.{a.code}")
        allow = st.checkbox(tr("assign.allow_solutions"), value=a.allow_solutions, key=f"assign.edit_sol.{a.code}")
        saved = st.button(tr("assign.dash_save"), icon=":material/save:", key=f"assign.edit_save.{a.code}")
    if not saved:
        return
    rules = {**r.to_dict(), "attempts": int(attempts), "counts": counts, "opens_at": opens, "deadline": deadline,
             "exam": bool(exam), "release": release, "time_limit": int(limit) if exam else 0}
    _dash_change(a, key, title=title, rules=rules, allow_solutions=allow)


def _dash_items(a: Assignment, key: str, submitted: bool, started: bool) -> None:
    """Edit the exercises: a row per kind, level and count (count 0 removes a row), and one more row to add.
    Rows that can no longer change are drawn read-only: all of them once someone submitted (and no row to
    add), the existing ones once a student started (the service refuses the same)."""
    kinds = list(exercises.KINDS)
    st.caption(tr("assign.dash_items_locked") if submitted else
               tr("assign.dash_items_started") if started else tr("assign.dash_items_rule"))
    with st.form(f"assign.items.{a.code}"):
        rows = []
        for r, item in enumerate([*a.items] if submitted else [*a.items, None]):
            fixed = submitted or (started and item is not None)
            left, middle, right = st.columns([3, 1, 1], vertical_alignment="bottom")
            kind = left.selectbox(tr("assign.kind", n=r + 1), kinds, format_func=lambda k: tr(f"kind.{k}.title"),
                                  index=kinds.index(item.kind) if item else 0, disabled=fixed,
                                  key=f"assign.items_kind.{a.code}.{r}.{lang()}")
            level = middle.number_input(tr("assign.level"), min_value=1, max_value=3, value=item.level if item else 1,
                                        disabled=fixed, key=f"assign.items_level.{a.code}.{r}")
            count = right.number_input(tr("assign.count"), min_value=0, max_value=MAX_COUNT, disabled=fixed,
                                       value=item.count if item else 0, key=f"assign.items_count.{a.code}.{r}")
            rows.append({"kind": kind, "level": int(level), "count": int(count)})
        saved = st.form_submit_button(tr("assign.dash_items_save"), icon=":material/save:", disabled=submitted)
    if saved:
        _dash_change(a, key, items=[row for row in rows if row["count"] > 0])


def _dash_change(a: Assignment, key: str, **changes: Any) -> None:
    try:
        service.update(a, key, **changes)
    except AssignmentError as err:
        st.error(render(err.message), icon=":material/error:")
        return
    except service.Locked as err:
        st.error(tr("assign.dash_locked") if err.reason == "submitted" else tr("assign.dash_locked_started"),
                 icon=":material/lock:")
        return
    except (service.AccessDenied, service.UnknownAssignment):
        st.error(tr("gradebook.error.key_wrong", code=a.code), icon=":material/lock:")
        return
    except db.Unavailable:
        feedback.database_unavailable()
        return
    st.rerun()


def _dash_item(a: Assignment, key: str) -> None:
    state = st.session_state
    try:
        count = service.submitted_count(a)
        started = count > 0 or service.started(a)
        on_list = service.roster(a) if a.has_roster else ()
    except db.Unavailable:
        count, started, on_list = 0, False, ()
    st.caption(tr("assign.dash_summary", created=_when(a.created_at), rows=count))
    rules_caption(a)
    st.code(share_link(a.code), language=None)
    gradebook_ui.remember(a.code, key)  # this key opened the dashboard: its gradebooks open without asking again
    try:  # inside the app: the same session (a plain link would start a new one, which knows no key)
        st.page_link("app_pages/gradebook.py", label=tr("assign.dash_gradebook"), query_params={"code": a.code},
                     icon=":material/table_view:")
    except StreamlitPageNotFoundError:  # the page run on its own, outside the app's navigation
        st.markdown(f"[{tr('assign.dash_gradebook')}](gradebook?code={a.code})")
    r = a.rules
    cols = st.columns(4)
    label = tr("assign.dash_reopen") if r.closed else tr("assign.dash_close")
    if cols[0].button(label, key=f"assign.toggle.{a.code}", icon=":material/lock_clock:"):
        _dash_change(a, key, rules={**r.to_dict(), "closed": not r.closed})
    if r.exam and cols[1].button(tr("assign.dash_release") if not r.released else tr("assign.dash_unrelease"),
                                 key=f"assign.release.{a.code}", icon=":material/visibility:"):
        _dash_change(a, key, rules={**r.to_dict(), "released": not r.released})
    if cols[2].button(tr("assign.dash_duplicate"), key=f"assign.dup.{a.code}", icon=":material/content_copy:"):
        try:
            service.duplicate(a, key)
        except (AssignmentError, db.Unavailable):
            feedback.database_unavailable()
        else:
            st.rerun()
    with st.popover(tr("assign.dash_delete"), icon=":material/delete:"):
        sure = st.checkbox(tr("assign.dash_delete_sure", code=a.code), key=f"assign.del_sure.{a.code}")
        if st.button(tr("assign.dash_delete"), key=f"assign.del.{a.code}", disabled=not sure, type="primary"):
            try:
                service.delete(a, key)
            except (service.AccessDenied, service.UnknownAssignment, db.Unavailable):
                feedback.database_unavailable()
            else:
                state.pop(f"assign.del_sure.{a.code}", None)
                st.rerun()
    _dash_rules(a, key)
    _dash_items(a, key, submitted=count > 0, started=started)
    with st.form(f"assign.roster_form.{a.code}"):
        text = st.text_area(tr("assign.roster_label"), key=f"assign.roster_text.{a.code}", value="\n".join(on_list),
                            help=tr("assign.roster_again_help"), max_chars=MAX_CLASS_LIST_CHARS)
        issued = st.form_submit_button(tr("assign.roster_issue"), icon=":material/badge:")
    if issued:
        try:
            state[f"assign.links.{a.code}"] = service.set_roster(a, key, text or "")
        except AssignmentError as err:
            st.error(render(err.message), icon=":material/error:")
        except db.Unavailable:
            feedback.database_unavailable()
    links_ui(a.code, state.get(f"assign.links.{a.code}") or {})
    downloads_ui(a)


def dashboard_ui() -> None:
    """One teacher key, many assignments: list, reopen, sheets again, duplicate, edit, close, delete."""
    st.header(tr("assign.dash_heading"))
    st.caption(tr("assign.dash_intro"))
    state = st.session_state
    key = state.get(DASH) or lti_ui.instructor_key()  # an instructor launched from the course needs no key
    if key is None:
        _dash_open()
        return
    try:
        mine = service.mine(key)
    except (service.MalformedKey, db.Unavailable):
        feedback.database_unavailable()
        return
    if st.button(tr("gradebook.close"), key="assign.dash_close", icon=":material/lock:"):
        state.pop(DASH, None)
        st.rerun()
    if not mine:
        st.info(tr("assign.dash_empty"), icon=":material/inbox:")
    for a in mine:
        mark = " · " + tr("assign.dash_closed") if a.rules.closed else ""
        with st.expander(f"{user_text(a.title)} · {a.code}{mark}"):
            _dash_item(a, key)


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
    known = st.session_state.setdefault("assign.known_codes", set())  # opened in this session: no guess
    # throttled guesses per browser address and for everyone, shared by sessions and replicas
    if code_text not in known and guard.refused("assignments"):
        return None
    try:
        a = service.load(code_text)
    except service.MalformedCode:
        guard.failed("assignments", attempt=code_text)
        st.error(tr("assign.error.code_malformed", code=untrusted(code_text[:40])), icon=":material/link_off:")
        return None
    except db.Unavailable:
        feedback.database_unavailable()
        return None
    if a is None:
        guard.failed("assignments", attempt=code_text)
        st.error(tr("assign.error.code_unknown", code=service.parse_code(code_text)), icon=":material/link_off:")
    elif code_text not in known:
        guard.succeeded("assignments")
        known.add(code_text)
    return a


def _key(a: Assignment, what: str) -> str:
    return f"assign.{what}.{a.code}"


def _when(at: datetime | None) -> str:
    return "" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def rules_caption(a: Assignment) -> None:
    """What the rules are, in one caption: attempts, which counts, opening, deadline, time limit, exam."""
    r = a.rules
    parts = [tr("assign.rule.attempts", allowed=r.attempts) if r.attempts else tr("assign.rule.unlimited"),
             tr(f"assign.rule.counts.{r.counts}")]
    if r.opens_at is not None:
        parts.append(tr("assign.rule.opens", when=_when(r.opens_at)))
    if r.deadline is not None:
        parts.append(tr("assign.rule.deadline", when=_when(r.deadline)))
    if r.time_limit:
        parts.append(tr("assign.rule.time_limit", minutes=r.time_limit))
    if r.exam:
        parts.append(tr("assign.rule.exam"))
    st.caption(" · ".join(parts))


def student_name_ui(a: Assignment) -> str | None:
    """The student's name for this assignment (asked once per session), or None until given."""
    state = st.session_state
    name = state.get(_key(a, "student"))
    if name is not None:
        left, right = st.columns([4, 1], vertical_alignment="center")
        left.markdown(tr("assign.working_as", name=untrusted(name)))
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
            name = clean_student_name(text)
            submissions.claim(a, name, claimant())  # the first browser to type a name holds it
        except AssignmentError as err:
            st.error(render(err.message, untrusted=True), icon=":material/person_alert:")
            return None
        except submissions.Refused as err:
            st.error(_refusal(err), icon=":material/person_alert:")
            return None
        except db.Unavailable:
            feedback.database_unavailable()
            return None
        state[_key(a, "student")] = name
        st.rerun()
    return None


def roster_name_ui(a: Assignment, token: str | None) -> str | None:
    """With a class list the personal link says who it is (its token); no name is typed."""
    if not token:
        st.info(tr("assign.roster.needs_link"), icon=":material/badge:")
        return None
    known = st.session_state.setdefault("assign.known_links", set())  # links opened in this session: no guess
    link = f"{a.code}:{token}"
    if link not in known and guard.refused("personal_link"):  # throttled per address and for everyone
        return None
    try:
        name = submissions.student_for_token(a, token)  # every run: a class list issued again ends the link
    except db.Unavailable:
        feedback.database_unavailable()
        return None
    if name is None:
        if link not in known:
            guard.failed("personal_link", attempt=link)
        st.error(tr("assign.error.link_unknown", code=a.code), icon=":material/link_off:")
        return None
    if link not in known:
        guard.succeeded("personal_link")
        known.add(link)
    st.markdown(tr("assign.working_as", name=untrusted(name)))
    return name


def claimant() -> str:
    """Who holds the names this browser types on open assignments: its profile, once it is its own. A
    profile from a cookie this browser did not create (planted?) is not: until its user says it is
    theirs, names are held for this session alone, so the cookie's maker cannot submit under them."""
    state = st.session_state
    if state.get(progress_ui.CONFIRMED_KEY, True):
        return progress_ui.profile()
    return state.setdefault("assign.claimant", "session-" + secrets.token_hex(16))


def person_id(a: Assignment, name: str) -> str:
    """Who submits: the class-list entry, or (an open assignment) this browser's profile under this name,
    which holds the name (submissions.claim), so no one else's attempts are filed under it."""
    if a.has_roster:
        return student_key(name)
    return submissions.person_for(claimant(), name)


def items_for(a: Assignment, name: str) -> list[Exercise] | None:
    """This student's exercises as stored (their own variants, or the class's set), kept in the
    session; None after a clear message when they cannot be shown as they were set."""
    state = st.session_state
    cached = state.get(_key(a, "exercises"))
    if cached is not None and cached[0] == (name, a.items, a.per_student):  # the teacher may add items
        return cached[1]
    try:
        items = submissions.exercises_for(a, name)
    except submissions.ExerciseChanged as err:
        st.error(tr("assign.error.changed", items=", ".join(str(i + 1) for i in err.items)),
                 icon=":material/history:")
        return None
    except db.Unavailable:
        feedback.database_unavailable()
        return None
    state[_key(a, "exercises")] = ((name, a.items, a.per_student), items)
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


def _refusal(err: submissions.Refused) -> str:
    return tr(f"assign.refused.{err.reason}", when=_when(err.when))


def _store(a: Assignment) -> dict[int, dict[str, Any]]:
    """The answers of this session by item position, kept while the student turns pages (a page draws
    only its own inputs; Streamlit forgets the inputs it did not draw)."""
    return st.session_state.setdefault(_key(a, "answers"), {})


def _page(a: Assignment, pages: list[list[int]], what: str = "page") -> int:
    return min(max(int(st.session_state.get(_key(a, what), 0)), 0), len(pages) - 1)


def _keep_page(a: Assignment, items: list[Exercise], pages: list[list[int]]) -> None:
    """What the inputs of the page on screen hold, into the store."""
    store = _store(a)
    for index in pages[_page(a, pages)]:
        store[index] = answer_grid.collect(items[index], _prefix(a, index, items[index]))


def _go(a: Assignment, items: list[Exercise], pages: list[list[int]], to: int) -> None:
    """Show page `to`, its inputs filled with what was typed there before."""
    to = min(max(to, 0), len(pages) - 1)
    st.session_state[_key(a, "page")] = to
    store = _store(a)
    for index in pages[to]:
        if index in store:
            _restore(items[index], _prefix(a, index, items[index]), store[index])


def _refill(a: Assignment, items: list[Exercise], shown: list[int]) -> None:
    """Inputs of these items that Streamlit has forgotten (not drawn in the last run) get what the
    store holds for them."""
    store, state = _store(a), st.session_state
    for index in shown:
        ex, prefix = items[index], _prefix(a, index, items[index])
        if index in store and not any(k in state for k in _input_keys(ex, prefix)):
            _restore(ex, prefix, store[index])


def _input_keys(ex: Exercise, prefix: str) -> list[str]:
    keys = []
    for part in ex.parts:
        if part.is_choice:
            keys.append(answer_grid.choice_key(prefix, part.name))
        else:
            keys.append(answer_grid.paste_key(prefix, part.name))
            keys.append(answer_grid.cell_key(prefix, part.name, 0, 0))
    return keys


def _turn(a: Assignment, items: list[Exercise], pages: list[list[int]], step: int) -> None:
    """Form callback of Previous / Next: keep this page's answers, then show the other page."""
    _keep_page(a, items, pages)
    _go(a, items, pages, _page(a, pages) + step)


def _submit(a: Assignment, name: str, items: list[Exercise], person: str, pages: list[list[int]]) -> None:
    """Form callback: grade everything; store it all in one transaction, or say what to fix first (and
    show the first page with something to fix). A submission the rules refuse (late, closed, …) stores
    nothing and keeps the answers on the page."""
    state = st.session_state
    _keep_page(a, items, pages)
    store = _store(a)
    answers = {index: store.get(index) or {} for index in range(len(items))}
    state[_key(a, "too_long")] = run_budget(answers)  # one run's answer text is capped
    if state[_key(a, "too_long")] is not None:
        return
    graded = submissions.grade_all(items, answers, allow_blank=bool(state.get(_key(a, "allow_blank"))))
    state[_key(a, "problems")] = graded.unreadable
    state[_key(a, "blank")] = graded.blank
    state.pop(_key(a, "refused"), None)
    if not graded.ready:
        first = min([*graded.unreadable, *graded.blank])
        _go(a, items, pages, submissions.page_of(pages, first))
        return
    try:
        ids = submissions.submit(a, name, items, graded, person=person, profile=claimant())
    except submissions.Refused as err:
        state[_key(a, "refused")] = _refusal(err)
        return
    except submissions.NotSaved:
        state[_key(a, "save_failed")] = True
        return
    state.pop(_key(a, "save_failed"), None)
    state[_key(a, "result")] = {"ids": ids, "feedback": graded.feedback, "answers": graded.answers}


def _aids(a: Assignment, ex: Exercise) -> None:
    """The aids; in an exam only the eˣ table."""
    if not a.rules.exam:
        aids_ui.show(ex, expanded=False)
        return
    view = aids_ui.aids_view(solution.fingerprint(ex), ex)
    if view["table"]:
        with st.expander(tr("aids.title"), expanded=False, icon=":material/calculate:"):
            st.caption(aids_ui.table_caption(view))
            mathview.show(view["table"])


def _page_caption(pages: list[list[int]], page: int, count: int) -> None:
    shown = pages[page]
    st.caption(tr("assign.page_of", first=shown[0] + 1, last=shown[-1] + 1, count=count, page=page + 1,
                  pages=len(pages)))


def work_ui(a: Assignment, name: str, items: list[Exercise], person: str) -> None:
    """The items with their answer grids in one form, a page at a time for a long set (Previous / Next
    keep what was typed), and Submit on every page."""
    state = st.session_state
    problems: dict[int, Feedback] = state.get(_key(a, "problems"), {})
    blank: list[int] = state.get(_key(a, "blank"), [])
    pages = submissions.pages(items)
    page = _page(a, pages)
    _refill(a, items, pages[page])
    if state.get(_key(a, "refused")):
        st.error(state[_key(a, "refused")], icon=":material/schedule:")
    if problems:
        st.error(tr("assign.fix_first", items=", ".join(str(i + 1) for i in sorted(problems))),
                 icon=":material/edit_note:")
    if blank:
        st.warning(render(plural("assign.blank_items", len(blank), items=", ".join(str(i + 1) for i in blank))),
                   icon=":material/help:")
    if state.get(_key(a, "save_failed")):
        st.error(tr("assign.error.save"), icon=":material/cloud_off:")
    if state.get(_key(a, "too_long")) is not None:
        st.error(render(msg("assign.error.too_long", reason=state[_key(a, "too_long")])), icon=":material/edit_note:")
    st.caption(tr("assign.before_submit"))
    with st.form(_key(a, "work"), border=False):
        if len(pages) > 1:
            _page_caption(pages, page, len(items))
        for index in pages[page]:
            ex = items[index]
            st.subheader(tr("assign.item_heading", n=index + 1, title=tr(f"kind.{ex.kind}.title")))
            problem.show(ex)
            _aids(a, ex)
            answer_grid.draw(ex, _prefix(a, index, ex), problems.get(index))
            st.divider()
        if len(pages) > 1:
            left, right = st.columns(2)
            left.form_submit_button(tr("assign.page_prev"), icon=":material/arrow_back:", disabled=page == 0,
                                    on_click=_turn, args=(a, items, pages, -1), key=_key(a, "prev"))
            right.form_submit_button(tr("assign.page_next"), icon=":material/arrow_forward:",
                                     disabled=page == len(pages) - 1, on_click=_turn, args=(a, items, pages, 1),
                                     key=_key(a, "next"))
        st.checkbox(tr("assign.allow_blank"), key=_key(a, "allow_blank"))
        st.form_submit_button(tr("assign.submit"), type="primary", icon=":material/send:", on_click=_submit,
                              args=(a, name, items, person, pages), key=_key(a, "submit"))


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


def solutions_allowed(a: Assignment) -> bool:
    """Worked solutions of assignment items: only when the teacher allowed them, never in an exam."""
    return a.allow_solutions and not a.rules.exam


def results_ui(a: Assignment, items: list[Exercise], graded: dict[int, Feedback | None],
               answers: dict[int, Any], final: bool, prefix: str = "asg") -> None:
    """A submission: marks and feedback of each item (in an exam only once released or after the final
    attempt), a page at a time for a long set; solutions only when the rules allow them."""
    # an exam shows marks only to a name on the class list (services.submissions.marks_visible)
    marks = submissions.marks_visible(a, final, on_roster=a.has_roster)
    if marks:
        total = sum(fb.score for fb in graded.values() if fb is not None) / max(len(items), 1)
        st.success(tr("assign.submitted", score=f"{total:.0%}"), icon=":material/task_alt:")
    else:
        st.success(tr("assign.marks_hidden"), icon=":material/task_alt:")
    pages = submissions.pages(items)
    page = _page(a, pages, f"{prefix}.page")
    if len(pages) > 1:
        _page_caption(pages, page, len(items))
    for index in pages[page]:
        ex = items[index]
        st.subheader(tr("assign.item_heading", n=index + 1, title=tr(f"kind.{ex.kind}.title")))
        problem.show(ex)
        fb = graded.get(index)
        grid = f"{prefix}-{index}-{slot_id(a)}"
        if fb is None or answers.get(index) is None:
            st.info(tr("assign.not_answered"), icon=":material/remove:")
        else:
            _restore(ex, grid, answers[index])
            answer_grid.draw(ex, grid, fb if marks else None, disabled=True)
            if marks and a.rules.exam:  # the score and the cells' marks; no likely mistake, no sanity check
                st.caption(tr("feedback.correct" if fb.correct else "feedback.score", score=feedback.score_text(fb)))
            elif marks:
                feedback.show(fb)
        if marks and solutions_allowed(a) and solution.show_button(ex, key=f"{prefix}-sol-{a.code}-{index}"):
            solution.show(ex, key=f"{prefix}-sol-{a.code}-{index}")
        st.divider()
    if len(pages) > 1:
        left, right = st.columns(2)
        if left.button(tr("assign.page_prev"), icon=":material/arrow_back:", disabled=page == 0,
                       key=_key(a, f"{prefix}.prev")):
            st.session_state[_key(a, f"{prefix}.page")] = page - 1
            st.rerun()
        if right.button(tr("assign.page_next"), icon=":material/arrow_forward:", disabled=page == len(pages) - 1,
                        key=_key(a, f"{prefix}.next")):
            st.session_state[_key(a, f"{prefix}.page")] = page + 1
            st.rerun()
    if not solutions_allowed(a):
        st.caption(tr("assign.no_solutions"))


def _stored_result(rows: list[Any]) -> tuple[dict[int, Feedback | None], dict[int, Any]]:
    """A stored attempt graded again against the very exercises it was answered on."""
    graded: dict[int, Feedback | None] = {}
    for row in rows:
        try:
            graded[row.item_index] = submissions.regrade(row)
        except submissions.ExerciseChanged:
            graded[row.item_index] = None
    return graded, {row.item_index: row.answer for row in rows}


def gate(a: Assignment) -> str | None:
    """Why nothing can be submitted now (closed, not open yet, past the deadline), or None."""
    r, now = a.rules, datetime.now(UTC)
    if r.closed:
        return tr("assign.state.closed")
    if r.opens_at is not None and now < r.opens_at:
        return tr("assign.state.not_open", when=_when(r.opens_at))
    if r.deadline is not None and now > r.deadline:
        return tr("assign.state.late", when=_when(r.deadline))
    return None


def _clock(a: Assignment, name: str) -> str | None:
    """An exam's time limit, counted on the server from the student's first opening: a caption, or why it is over."""
    if not a.rules.time_limit:
        return None
    try:
        ends = submissions.exam_clock(a, name) + timedelta(minutes=a.rules.time_limit)
    except db.Unavailable:
        feedback.database_unavailable()
        return "unavailable"
    left = (ends - datetime.now(UTC)).total_seconds()
    if left <= 0:
        st.warning(tr("assign.state.time_up", when=_when(ends)), icon=":material/timer_off:")
        return "over"
    st.caption(tr("assign.time_left", minutes=max(int(left // 60), 0), when=_when(ends)))
    return None


def _again(a: Assignment) -> None:
    for what in ("result", "problems", "blank", "refused", "asg.page"):
        st.session_state.pop(_key(a, what), None)


def student_ui(a: Assignment, token: str | None = None) -> None:
    st.title(user_text(a.title))
    st.caption(render(plural("assign.student_intro2", a.item_count, code=a.code)))
    rules_caption(a)
    launched = lti_ui.learner(a.code)  # opened from the course's LMS: the platform says who it is
    if launched is not None:
        name, person = launched
        st.markdown(tr("lti.working_as", name=untrusted(name)))
    else:
        name = roster_name_ui(a, token) if a.has_roster else student_name_ui(a)
        if name is None:
            return
        person = person_id(a, name)
    try:
        earlier = submissions.attempts_of(a, name)
    except db.Unavailable:
        feedback.database_unavailable()
        return
    # an open assignment shows only this session's own attempts (a name is no proof of who it is)
    mine = earlier if a.has_roster else [g for g in earlier if g[0].who == person]
    left = submissions.attempts_left(a, len(earlier))
    items = items_for(a, name)
    if items is None:
        return
    state = st.session_state
    if not state.get(_key(a, "opened")):
        try:
            submissions.seen(a, person)  # a student has started: what they saw is kept (dashboard edits)
            state[_key(a, "opened")] = True
        except db.Unavailable:
            pass
    closed = gate(a)
    if _key(a, "result") in state:
        result = state[_key(a, "result")]
        results_ui(a, items, result["feedback"], result["answers"], final=left == 0)
        if not closed and left != 0 and st.button(tr("assign.try_again"), key=_key(a, "again"),
                                                  icon=":material/replay:"):
            _again(a)
            st.rerun()
        return
    if earlier:
        st.info(tr("assign.attempts_used", done=len(earlier),
                   left=tr("assign.unlimited") if left is None else left), icon=":material/history:")
    if mine:
        graded, answers = _stored_result(mine[-1])
        with st.expander(tr("assign.your_last", when=_when(mine[-1][0].submitted_at)),
                         expanded=bool(closed) or left == 0):
            results_ui(a, items, graded, answers, final=left == 0, prefix="last")
            paper.student_view(a, mine[-1], submissions.marks_visible(a, left == 0, on_roster=a.has_roster))
    if closed:
        st.warning(closed, icon=":material/lock_clock:")
        if not state.get(_key(a, "refused")):
            return
        # refused just now: the answers stay on the page (nothing is lost), Submit is refused again
    if left == 0:
        st.warning(tr("assign.state.no_attempts", allowed=a.rules.attempts), icon=":material/block:")
        return
    if _clock(a, name):
        return
    work_ui(a, name, items, person)
