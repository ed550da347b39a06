"""Assignments without Streamlit: create one, open it by its code, check a teacher key, its PDFs.

The class's exercises are stored with a new assignment; per-student variants are stored the first
time a student opens the set (or the teacher prints their sheet), so the page, the PDF and the
gradebook all show the same problems whatever happens to the generators later.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Iterable, Mapping
from typing import Any

import exercises
import storage
from exercises import Exercise, worksheets
from exercises.core.engine import MAX_SEED
from exercises.i18n import DEFAULT_LANG
from exercises.teacher.assignments import (
    MAX_COUNT,
    AssignmentError,
    AssignmentSpec,
    ItemSpec,
    Rules,
    make_rules,
    make_spec,
    student_key,
    unchanged_slots,
)
from exercises.worksheets import paper
from storage import AccessDenied, Assignment, Created, Locked, MalformedCode, MalformedKey, UnknownAssignment

from . import db
from .submissions import class_exercises, exercises_for, secret

__all__ = ["MAX_COUNT", "MAX_SEED", "AccessDenied", "Assignment", "AssignmentError", "Created", "Locked",
           "MalformedCode", "MalformedKey", "Rules", "UnknownAssignment", "class_list", "create", "delete",
           "duplicate", "load", "mine", "missing_font", "parse_code", "parse_key", "pdf", "pdf_files", "roster",
           "kind_versions", "set_roster", "started", "submitted_count", "update", "verify_key", "worksheet"]

parse_code = storage.parse_code
parse_key = storage.parse_key


def kind_versions() -> dict[str, int]:
    """Each kind's generator version, which storage keeps with an assignment's items."""
    return {kind_id: int(kind.VERSION) for kind_id, kind in exercises.KINDS.items()}


def create(title: Any, items: Iterable[ItemSpec | Mapping[str, Any]], seed: Any, per_student: bool = False,
           allow_solutions: bool = False, rules: Rules | Mapping[str, Any] | None = None, teacher_key: Any = None,
           request_id: str | None = None) -> Created:
    """Store a new assignment with its class's exercises; returns it with its teacher key (shown once).

    `rules`: attempts, deadline, exam … (default: one attempt, the latest counts); `teacher_key`: a key
    the teacher already has, so it owns this one too; `request_id`: the same again returns the first
    (existing=True) instead of a second assignment.
    AssignmentError (a catalog message) for bad input; MalformedKey for a key that is none;
    db.Unavailable when it could not be stored."""
    spec = make_spec(title, items, seed, per_student, allow_solutions)
    checked = make_rules(Rules() if rules is None else rules)
    with db.guarded():
        return storage.create_assignment(db.engine(), spec.title, spec.items, spec.seed, spec.per_student,
                                         spec.allow_solutions, exercises=class_exercises(spec), rules=checked,
                                         teacher_key=teacher_key, request_id=request_id,
                                         kind_versions=kind_versions())


def mine(key: Any) -> list[Assignment]:
    """Every assignment this teacher key owns, newest first (MalformedKey for text that is no key)."""
    with db.guarded():
        return storage.assignments_of(db.engine(), key)


def submitted_count(a: Assignment) -> int:
    with db.guarded():
        return storage.submission_count(db.engine(), a.code)


def started(a: Assignment) -> bool:
    """Has a student opened the assignment (or been given their own sheet)? Its items are then add-only."""
    with db.guarded():
        return storage.assignment_started(db.engine(), a.code)


def update(a: Assignment, key: Any, title: Any = None, rules: Any = None, allow_solutions: bool | None = None,
           items: Any = None, per_student: bool | None = None) -> Assignment:
    """Edit title, rules (opening, deadline, exam mode, time limit, …) and solutions at any time; the
    items only while nobody has submitted, and once a student has started only by adding exercises after
    the last one (storage.Locked with reason "submitted" / "started"). Exercises already stored stay: only
    the new or changed slots of the class's set are generated."""
    exercises_: dict[int, Exercise] = {}
    if items is not None or per_student is not None:
        spec = make_spec(a.title, a.items if items is None else items, a.seed,
                         a.per_student if per_student is None else per_student, a.allow_solutions)
        switch = per_student is not None and bool(per_student) != a.per_student
        kept = 0 if switch else unchanged_slots(a.items, spec.items)
        if not spec.per_student:
            key_ = secret()
            exercises_ = {slot.index: exercises.generate(slot.kind, seed, slot.level)
                          for slot, seed in spec.seeds(secret=key_) if slot.index >= kept}
        items = spec.items
    with db.guarded():
        return storage.update_assignment(db.engine(), a.code, key, title=title, rules=rules,
                                         allow_solutions=allow_solutions, items=items, exercises=exercises_,
                                         per_student=per_student, kind_versions=kind_versions())


def duplicate(a: Assignment, key: Any, title: Any = None) -> Created:
    """A new assignment with the same items and rules (open again), owned by the same key."""
    rules = {**a.rules.to_dict(), "closed": False, "released": False}
    return create(title or a.title, a.items, a.seed, a.per_student, a.allow_solutions, rules=rules, teacher_key=key)


def delete(a: Assignment, key: Any) -> None:
    with db.guarded():
        storage.delete_assignment(db.engine(), a.code, key)


def set_roster(a: Assignment, key: Any, text: str) -> dict[str, str]:
    """Attach the class list in `text` (one name a line, or a CSV's first column): {name: token}."""
    names = class_list(text)
    with db.guarded():
        return storage.set_roster(db.engine(), a.code, key, names)


def roster(a: Assignment) -> tuple[str, ...]:
    with db.guarded():
        return storage.roster_names(db.engine(), a.code)


def on_roster(a: Assignment, student: str) -> bool:
    """Is `student` a name on the assignment's class list (as the list spells it, case and spacing aside)?"""
    key = student_key(student)
    return any(student_key(name) == key for name in roster(a))


def load(code_text: Any) -> Assignment | None:
    """The assignment with this code as typed, or None; MalformedCode for text that is no code."""
    with db.guarded():
        return storage.get_assignment(db.engine(), code_text)


def verify_key(code: Any, key: Any) -> bool:
    """True only when the assignment exists and `key` is its teacher key."""
    with db.guarded():
        return storage.verify_teacher_key(db.engine(), code, key)


# ---------------------------------------------------------------- worksheets


def _csv_names(text: str) -> str:
    """A CSV export's first column, one name a line (a header row "name"/"student" is dropped)."""
    if "," not in text and ";" not in text:
        return text
    rows = list(csv.reader(io.StringIO(text), delimiter=";" if text.count(";") > text.count(",") else ","))
    names = [r[0].strip() for r in rows if r and r[0].strip()]
    if names and names[0].casefold() in {"name", "student", "students", "姓名", "学生"}:
        names = names[1:]
    return "\n".join(names)


def class_list(text: str) -> tuple[str, ...]:
    """The names of a class list (one a line, # comments, or a CSV's first column): () when empty,
    AssignmentError when bad (a text longer than worksheets.MAX_CLASS_LIST_CHARS is refused unread)."""
    worksheets.check_class_list(text or "")
    names = worksheets.read_students(_csv_names(text or ""))
    return tuple(worksheets.clean_students(names)) if names else ()


def missing_font(spec: AssignmentSpec, students: Iterable[str], extra: str = "") -> bool:
    """Would the PDFs need a CJK font that this machine does not have?"""
    return worksheets.cjk_font_dir() is None and worksheets.needs_cjk(spec.title + "".join(students) + extra)


def worksheet(a: Assignment, students: Iterable[str] = (), language: str = DEFAULT_LANG) -> worksheets.Worksheet:
    """The sheets of an assignment, with the very exercises its students get (stored ones)."""
    spec = a.spec
    if not spec.per_student:
        return worksheets.Worksheet(spec, (worksheets.Sheet(None, tuple(exercises_for(a))),), a.code, language)
    names = worksheets.clean_students(students)
    sheets = tuple(worksheets.Sheet(n, tuple(exercises_for(a, n))) for n in names)
    return worksheets.Worksheet(spec, sheets, a.code, language)


def paper_worksheet(a: Assignment, students: Iterable[str], language: str = DEFAULT_LANG,
                    space: str = "some") -> worksheets.Worksheet:
    """The sheets to be marked from paper: one per student (a class's set is printed for each), answers in
    grids with registration marks, each page with its own QR code signed with the server secret."""
    names = worksheets.clean_students(students)
    sheets = tuple(worksheets.Sheet(n, tuple(exercises_for(a, n) if a.per_student else exercises_for(a)))
                   for n in names)
    key = secret()
    pages = tuple((n, paper.qr_payloads(key, a.code, n)) for n in names)
    return worksheets.Worksheet(a.spec, sheets, a.code, language, space=space, paper=pages)


def pdf_files(a: Assignment, students: tuple[str, ...], language: str, space: str = "some") -> dict[str, bytes]:
    """Worksheet and answer key PDFs, {"worksheet.pdf": …, "answer-key.pdf": …}, made now and not kept
    (a class's per-student sheets go through services.exports instead: one sheet at a time, to disk)."""
    ws = dataclasses.replace(worksheet(a, students, language), space=space)
    return worksheets.render(ws, "pdf")


def pdf(a: Assignment, students: tuple[str, ...], language: str, name: str, space: str = "some") -> bytes:
    """One of the two PDFs (only that one is compiled, in a child process: Typst's caches would
    otherwise stay in the server's memory)."""
    ws = dataclasses.replace(worksheet(a, students, language), space=space)
    return worksheets.files.pdf_isolated(ws, key=name.startswith("answer-key"))
