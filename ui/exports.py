"""The teacher's downloads of an assignment: the printed sheets, the Moodle XML and the QTI package (draws only).

A class-wide set is two PDFs made when their button is clicked. Per-student sheets and the Moodle XML
are built off the page's script run (services.exports: one worker, one student's sheet or set at a
time, written to disk by child processes); the page shows a progress bar and then the file, read from
disk when the download is asked for.
Only a teacher gets here: right after creating the assignment, or with the teacher key on the dashboard.
"""

from __future__ import annotations

import functools

import streamlit as st

from exercises import worksheets
from exercises.teacher.assignments import AssignmentError
from services import assignments as service
from services import exports
from services.assignments import Assignment

from .i18n import lang, render, tr

JOB = "export.job.{code}"  # the session's build of this assignment's sheets
BANK_JOB = "export.{fmt}_job.{code}"  # … and of its question bank (Moodle XML, QTI package)
MOODLE_JOB = BANK_JOB.replace("{fmt}", "moodle")
MOODLE_VARIANTS = 5  # shuffled variants in the XML of a per-student assignment without a class list


def space_choice(code: str) -> str:
    return st.selectbox(tr("export.space"), worksheets.SPACES, index=1, key=f"export.space.{code}.{lang()}",
                        format_func=lambda s: tr(f"export.space.{s}"))


def class_pdfs(a: Assignment, space: str) -> None:
    """The two PDFs of a class-wide set, made when clicked (one document at a time, nothing cached)."""
    left, right = st.columns(2)
    for column, name, label, icon in ((left, "worksheet.pdf", "assign.download_sheet", ":material/description:"),
                                      (right, "answer-key.pdf", "assign.download_key", ":material/key:")):
        column.download_button(tr(label), data=functools.partial(service.pdf, a, (), lang(), name, space),
                               file_name=f"{name.split('.')[0]}-{a.code}.pdf", mime="application/pdf",
                               key=f"assign.dl_{name.split('.')[0]}.{a.code}", icon=icon, on_click="ignore")


def student_zip(a: Assignment, students: tuple[str, ...], space: str, links: dict[str, str]) -> None:
    """Per-student sheets: queued off the script run, a progress bar, then the ZIP from disk."""
    state_key = JOB.format(code=a.code)
    if st.button(tr("export.prepare", count=len(students)), key=f"export.prepare.{a.code}",
                 icon=":material/print:"):
        try:
            st.session_state[state_key] = exports.start(a, students, lang(), space, links).id
        except AssignmentError as err:
            st.error(render(err.message), icon=":material/error:")
            return
    job_id = st.session_state.get(state_key)
    if job_id:
        _job_ui(job_id, a.code, "sheets")


_JOB_TEXTS = {  # what: (progress text, download label, icon)
    "sheets": ("export.progress", "export.download_zip", ":material/folder_zip:"),
    "moodle": ("export.moodle_progress", "export.moodle", ":material/school:"),
    "qti": ("export.qti_progress", "export.qti", ":material/package_2:"),
}


@st.fragment(run_every=1.0)
def _job_ui(job_id: str, code: str, what: str) -> None:
    job = exports.get(job_id)
    if job is None:
        return
    if job.error is not None:
        st.error(render(job.error), icon=":material/error:")
        return
    progress, label, icon = _JOB_TEXTS[what]
    if not job.done:
        st.progress(job.fraction, text=tr(progress, done=job.finished, total=job.total))
        return
    st.download_button(tr(label), data=job.read, file_name=job.file_name, mime=job.mime,
                       key=f"export.{what}.{code}.{job_id}", icon=icon, on_click="ignore")


def bank_button(a: Assignment, students: tuple[str, ...], fmt: str = "moodle") -> None:
    """A question bank (fmt "moodle": Moodle XML; "qti": a QTI 2.1 package): queued off the script run
    (the same worker and print cap as the sheets), a progress bar, then the file from disk."""
    state_key = BANK_JOB.format(fmt=fmt, code=a.code)
    icon = _JOB_TEXTS[fmt][2]
    if st.button(tr(f"export.{fmt}_prepare"), key=f"export.{fmt}.{a.code}", icon=icon, help=tr(f"export.{fmt}_help")):
        try:
            st.session_state[state_key] = exports.start_moodle(a, students, lang(), MOODLE_VARIANTS, fmt=fmt).id
        except AssignmentError as err:
            st.error(render(err.message), icon=":material/error:")
            return
    job_id = st.session_state.get(state_key)
    if job_id:
        _job_ui(job_id, a.code, fmt)


def downloads(a: Assignment, students: tuple[str, ...], links: dict[str, str]) -> None:
    """Everything a teacher downloads for `a` (the class list already read, when it has one)."""
    space = space_choice(a.code)
    if a.per_student:
        student_zip(a, students, space, links)
    else:
        class_pdfs(a, space)
    bank_button(a, students, "moodle")
    bank_button(a, students, "qti")
