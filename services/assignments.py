"""Assignments without Streamlit: create one, open it by its code, check a teacher key, its PDFs.

The class's exercises are stored with a new assignment; per-student variants are stored the first
time a student opens the set (or the teacher prints their sheet), so the page, the PDF and the
gradebook all show the same problems whatever happens to the generators later.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

import storage
from exercises import Exercise, worksheets
from exercises.assignments import MAX_COUNT, AssignmentError, AssignmentSpec, ItemSpec, make_spec
from exercises.engine import MAX_SEED
from exercises.i18n import DEFAULT_LANG
from storage import AccessDenied, Assignment, Created, MalformedCode, MalformedKey, UnknownAssignment

from . import db
from .submissions import class_exercises, exercises_for

__all__ = ["MAX_COUNT", "MAX_SEED", "AccessDenied", "Assignment", "AssignmentError", "Created", "MalformedCode",
           "MalformedKey", "UnknownAssignment", "class_list", "create", "load", "missing_font", "parse_code",
           "parse_key", "pdf", "pdf_files", "verify_key", "worksheet"]

parse_code = storage.parse_code
parse_key = storage.parse_key


def create(title: Any, items: Iterable[ItemSpec | Mapping[str, Any]], seed: Any, per_student: bool = False,
           allow_solutions: bool = False) -> Created:
    """Store a new assignment with its class's exercises; returns it with its teacher key (shown once).

    AssignmentError (a catalog message) for bad input; db.Unavailable when it could not be stored."""
    spec = make_spec(title, items, seed, per_student, allow_solutions)
    with db.guarded():
        return storage.create_assignment(db.engine(), spec.title, spec.items, spec.seed, spec.per_student,
                                         spec.allow_solutions, exercises=class_exercises(spec))


def load(code_text: Any) -> Assignment | None:
    """The assignment with this code as typed, or None; MalformedCode for text that is no code."""
    with db.guarded():
        return storage.get_assignment(db.engine(), code_text)


def verify_key(code: Any, key: Any) -> bool:
    """True only when the assignment exists and `key` is its teacher key."""
    with db.guarded():
        return storage.verify_teacher_key(db.engine(), code, key)


# ---------------------------------------------------------------- worksheets


def class_list(text: str) -> tuple[str, ...]:
    """The names of a class list (one a line; # comments): () when empty, AssignmentError when bad."""
    names = worksheets.read_students(text or "")
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


@functools.lru_cache(maxsize=8)
def _render(spec: AssignmentSpec, sheets: tuple[tuple[str | None, tuple[Exercise, ...]], ...], code: str,
            language: str) -> dict[str, bytes]:
    ws = worksheets.Worksheet(spec, tuple(worksheets.Sheet(n, exs) for n, exs in sheets), code, language)
    return worksheets.render(ws, "pdf")


def pdf_files(a: Assignment, students: tuple[str, ...], language: str) -> dict[str, bytes]:
    """Worksheet and answer key PDFs, {"worksheet.pdf": …, "answer-key.pdf": …} (cached per process:
    a class's set takes seconds)."""
    ws = worksheet(a, students, language)
    return _render(ws.spec, tuple((s.student, tuple(s.exercises)) for s in ws.sheets), a.code, language)


def pdf(a: Assignment, students: tuple[str, ...], language: str, name: str) -> bytes:
    return pdf_files(a, students, language)[name]
