"""The gradebook without Streamlit: opened with an assignment's code and teacher key; the students ×
items table, its CSV, the mistakes made most per item, and regrading against the stored exercises."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

import storage
from exercises import Feedback
from exercises.i18n import Msg, msg

from . import db
from .submissions import regrade

Gradebook = storage.Gradebook


def check(code_text: Any, key_text: Any) -> Msg | None:
    """What is wrong with this code and key, as a catalog message; None when they open the gradebook."""
    try:
        code = storage.parse_code(code_text)
    except storage.MalformedCode:
        return msg("gradebook.error.code_malformed")
    try:
        with db.guarded():
            if storage.get_assignment(db.engine(), code) is None:
                return msg("gradebook.error.code_unknown", code=code)
            storage.parse_key(key_text)
            if not storage.verify_teacher_key(db.engine(), code, key_text):
                return msg("gradebook.error.key_wrong", code=code)
    except storage.MalformedKey:
        return msg("gradebook.error.key_malformed")
    except db.Unavailable:
        return msg("assign.error.database")
    return None


def credentials(code_text: Any, key_text: Any) -> tuple[str, str]:
    """The code and key in canonical form (after check() found nothing wrong)."""
    return storage.parse_code(code_text), storage.parse_key(key_text)


def load(code: str, key: str) -> Gradebook:
    """Students × items; storage.AccessDenied / UnknownAssignment / ValueError for a wrong code or key,
    db.Unavailable when the database is not there."""
    with db.guarded():
        return storage.gradebook(db.engine(), code, key)


def table(book: Gradebook, labels: Sequence[str], student: str = "Student", total: str = "Total") -> pd.DataFrame:
    """One row per student: each item's latest score (0–1; empty if not submitted) and the mean over all items."""
    rows = []
    for name in book.students:
        scores = [book.scores.get((name, i)) for i in range(len(labels))]
        mean = sum(s for s in scores if s is not None) / max(len(labels), 1)
        rows.append([name, *[None if s is None else round(s, 3) for s in scores], round(mean, 3)])
    return pd.DataFrame(rows, columns=[student, *labels, total])


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """The table as CSV (UTF-8 with a byte-order mark, so spreadsheet programs read accents right)."""
    return frame.to_csv(index=False).encode("utf-8-sig")


def mistakes_frame(book: Gradebook, labels: Sequence[str], name: Callable[[str], str] = str) -> pd.DataFrame:
    """(item, order, mistake, students) for every misconception named in a latest answer."""
    rows = [{"item": labels[index], "order": index, "mistake": name(mid), "students": count}
            for index, found in book.misconceptions.items() if index < len(labels) for mid, count in found]
    return pd.DataFrame(rows, columns=["item", "order", "mistake", "students"])


def regraded(code: str, key: str) -> list[tuple[storage.Submission, Feedback | None]]:
    """Every submission graded again against the very exercise it was answered on (teacher key needed).
    ExerciseChanged for a row from before exercises were stored whose generator has changed since."""
    with db.guarded():
        subs = storage.list_submissions(db.engine(), code, key)
    return [(sub, regrade(sub)) for sub in subs]
