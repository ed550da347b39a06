"""Paper in, grades out, on a page: print sheets made to be read back, upload a class's photos or scans,
review the cells the reader is unsure of (the crop beside the value, one at a time: type and Enter),
record the sheets in the gradebook; and the student's view of their own page, marked.

The work is services.paper's; this module draws it. The marking waits in this session until recorded.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from exercises.i18n.escape import untrusted
from services import assignments as service
from services import db
from services import paper as marking_service
from services.assignments import Assignment

from .i18n import lang, tr, user_text

MARKING = "paper.marking"  # {code: Marking} of this session
PROBLEMS = ("no_qr", "bad_qr", "not_this_assignment", "no_marks", "unknown_student", "not_an_image",
            "too_many_pixels", "too_many_pages", "unreadable")


def marking_ui(a: Assignment, key: str) -> None:
    """The teacher's paper marking for assignment `a` (its teacher key already checked)."""
    with st.expander(tr("paper.title"), icon=":material/document_scanner:",
                     expanded=a.code in st.session_state.get(MARKING, {})):
        st.caption(tr("paper.intro"))
        _print_ui(a)
        _upload_ui(a)
        marking = st.session_state.get(MARKING, {}).get(a.code)
        if marking is not None:
            _problems_ui(marking)
            if not review_ui(marking):
                _record_ui(a, marking)


def _print_ui(a: Assignment) -> None:
    names = service.roster(a)
    if not names:
        st.info(tr("paper.needs_roster"), icon=":material/group_add:")
        return
    if st.button(tr("paper.print"), icon=":material/print:", key=f"paper.print.{a.code}"):
        with st.spinner(tr("paper.printing")):
            ws = service.paper_worksheet(a, names, lang())
            from exercises.worksheets import files  # imported here: the compiler loads only to print

            st.session_state[f"paper.pdf.{a.code}"] = files.pdf_isolated(ws)
    pdf = st.session_state.get(f"paper.pdf.{a.code}")
    if pdf:
        st.download_button(tr("paper.download"), data=pdf, file_name=f"paper-{a.code}.pdf", mime="application/pdf",
                           icon=":material/download:", key=f"paper.download.{a.code}", on_click="ignore")


def _upload_ui(a: Assignment) -> None:
    files = st.file_uploader(tr("paper.upload", files=marking_service.MAX_FILES,
                                megabytes=marking_service.MAX_FILE_BYTES // 2**20),
                             type=["jpg", "jpeg", "png", "pdf"], accept_multiple_files=True,
                             key=f"paper.files.{a.code}")
    if not files or not st.button(tr("paper.read"), type="primary", icon=":material/document_scanner:",
                                  key=f"paper.read.{a.code}"):
        return
    uploads = [(f.name, f.getvalue()) for f in files[:marking_service.MAX_FILES + 1]]
    try:
        with st.spinner(tr("paper.reading", pages=len(uploads))):
            pages = marking_service.read_uploads(a, uploads)
            marking = marking_service.mark(a, pages)
    except marking_service.TooBig:
        st.error(tr("paper.too_big", files=marking_service.MAX_FILES,
                    megabytes=marking_service.MAX_FILE_BYTES // 2**20), icon=":material/block:")
        return
    except (marking_service.ReadFailed, db.Unavailable):
        st.error(tr("paper.failed"), icon=":material/error:")
        return
    st.session_state.setdefault(MARKING, {})[a.code] = marking


def _problems_ui(marking: marking_service.Marking) -> None:
    sheets = len(marking.sheets)
    st.caption(tr("paper.summary", sheets=sheets, review=len(marking.review), problems=len(marking.problems)))
    for source, problem in marking.problems:
        name = problem.split(":")[0]
        reason = tr(f"paper.problem.{name}") if name in PROBLEMS + ("grid_not_registered",) else problem
        st.warning(tr("paper.problem", source=untrusted(source), reason=reason), icon=":material/warning:")


def review_ui(marking: marking_service.Marking) -> bool:
    """The next cell to review, the crop beside what was read; the teacher types the value and presses
    Enter (the value read is there already: Enter alone confirms it). True while cells wait."""
    pending = marking.review
    if not pending:
        return False
    cell = pending[0]
    student, grid, row, col = cell.key
    with st.container(key="paper-review", border=True):
        st.markdown(tr("paper.review_heading", left=len(pending)))
        left, right = st.columns([1, 2], vertical_alignment="center")
        left.image(cell.crop, caption=tr("paper.crop"), width=220)
        right.markdown(tr("paper.cell", student=untrusted(student), item=cell.item + 1,
                          part=untrusted(cell.part), row=row + 1, col=col + 1))
        right.caption(tr("paper.read_as", value=untrusted(cell.read or "—"), confidence=f"{cell.confidence:.0%}",
                         reason=tr(f"paper.reason.{cell.reason}")))
        with right.form(f"paper.review.{marking.code}.{student}.{grid}.{row}.{col}", clear_on_submit=True,
                        border=False):
            value = st.text_input(tr("paper.value"), value=cell.read, max_chars=40,
                                  key=f"paper.value.{marking.code}.{student}.{grid}.{row}.{col}")
            if st.form_submit_button(tr("paper.confirm"), type="primary", icon=":material/keyboard_return:"):
                marking_service.correct(marking, cell.key, value)
                st.rerun()
    return True


def _record_ui(a: Assignment, marking: marking_service.Marking) -> None:
    if not marking.sheets:
        return
    if st.button(tr("paper.record", sheets=len(marking.sheets)), type="primary", icon=":material/save:",
                 key=f"paper.record.{a.code}"):
        try:
            outcome = marking_service.record(a, marking)
        except db.Unavailable:
            st.error(tr("paper.failed"), icon=":material/error:")
            return
        stored = [s for s, v in outcome.items() if isinstance(v, list)]
        st.success(tr("paper.recorded", sheets=len(stored)), icon=":material/check:")
        for student, why in outcome.items():
            if not isinstance(why, list):
                st.warning(tr("paper.not_recorded", student=untrusted(student), reason=untrusted(why)),
                           icon=":material/warning:")
        st.session_state.get(MARKING, {}).pop(a.code, None)


def student_view(a: Assignment, rows: list[Any], marks: bool) -> None:
    """A student's own paper submission: each answer grid as they wrote it, every cell framed right or
    wrong, and the first wrong step (only when marks may be shown)."""
    if not marks or not rows or rows[0].source != "paper":
        return
    try:
        cells = marking_service.paper_cells(a, rows[0].attempt_id)
    except db.Unavailable:
        return
    if not cells:
        return
    st.markdown(tr("paper.your_page"))
    wrong = marking_service.first_wrong(cells)
    if wrong is None:
        st.success(tr("paper.all_right"), icon=":material/check:")
    else:
        st.warning(tr("paper.first_wrong", item=wrong["item_index"] + 1, part=user_text(wrong["part"]),
                      row=wrong["row"] + 1, col=wrong["col"] + 1), icon=":material/flag:")
    for item, part, image in marking_service.grid_images(cells):
        st.image(image, caption=tr("paper.grid_caption", item=item + 1, part=untrusted(part)))
