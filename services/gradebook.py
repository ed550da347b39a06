"""The gradebook without Streamlit: opened with an assignment's code and teacher key; the students ×
items table, its CSV, the mistakes made most per item, and regrading against the stored exercises."""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

import storage
from exercises import Feedback
from exercises.i18n import Msg, escape, msg
from exercises.teacher.assignments import student_key

from . import db
from .submissions import ExerciseChanged, regrade

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


def percent(score: float | None) -> float | None:
    """A score as the page and the CSV show it: percent, one decimal (None stays empty)."""
    return None if score is None else round(100.0 * float(score), 1)


@dataclass(frozen=True)
class Person:
    """One person's submissions: label (unique; "Ada (2)" for a second person with the same name),
    attempts (lists of rows, oldest first), the attempt that counts, and whether the name is shared."""

    label: str
    attempts: list[list[storage.Submission]]
    counting: list[storage.Submission]
    duplicate: bool
    who: str = ""  # the person's id (merge_people / rename_person take it)


def persons(book: Gradebook) -> list[Person]:
    groups = storage.people(book.rows)
    label = storage.labels(groups)
    names = Counter(student_key(g[-1][-1].student) for g in groups.values())
    return [Person(label[who], g, storage.counted(g, book.assignment.rules.counts),
                   names[student_key(g[-1][-1].student)] > 1, who) for who, g in groups.items()]


def duplicates(book: Gradebook) -> list[list[Person]]:
    """The people flagged as the same name from different browsers, in groups of one name each (what
    the teacher resolves: merge them into one, or rename one of them)."""
    groups: dict[str, list[Person]] = {}
    for person in persons(book):
        if person.duplicate:
            groups.setdefault(student_key(person.attempts[-1][-1].student), []).append(person)
    return list(groups.values())


def merge(code: str, key: str, into: Person, other: Person) -> int:
    """`other`'s submissions become `into`'s: the teacher says they are one person (nothing is deleted)."""
    with db.guarded():
        return storage.merge_people(db.engine(), code, key, into.who, other.who)


def rename(code: str, key: str, person: Person, name: Any) -> int:
    """Show this person under another name: the teacher says they are someone else (AssignmentError for a
    name that cannot be used)."""
    with db.guarded():
        return storage.rename_person(db.engine(), code, key, person.who, name)


def table(book: Gradebook, labels: Sequence[str], student: str = "Student", total: str = "Total",
          columns: Mapping[str, str] | None = None, from_paper: str = "from paper") -> pd.DataFrame:
    """One row per person: Total (percent) right after the name, then each item's score in percent from
    the attempt that counts (empty: not submitted), then attempts, last submission time, items left
    blank and a duplicate flag (same normalised name from another browser: the teacher resolves it);
    an attempt read from a paper sheet says so (`from_paper`) after its time.
    Everyone expected is a row: the class list's names and the names typed on an open assignment that
    have not submitted follow, with empty scores and 0 attempts."""
    names = {"attempts": "Attempts", "submitted": "Last submitted", "blank": "Blank", "duplicate": "Same name",
             **(columns or {})}
    rows = []
    for person in persons(book):
        scores = {r.item_index: r.score for r in person.counting}
        blank = [r.item_index + 1 for r in person.counting if r.answer is None]
        mean = sum(scores.get(i) or 0.0 for i in range(len(labels))) / max(len(labels), 1)
        last = person.attempts[-1][-1]
        when = last.submitted_at.strftime("%Y-%m-%d %H:%M UTC") + (f" · {from_paper}" if last.source == "paper" else "")
        rows.append([person.label, percent(mean), *[percent(scores.get(i)) for i in range(len(labels))],
                     len(person.attempts), when,
                     ", ".join(map(str, blank)), "⚠" if person.duplicate else ""])
    for name in not_submitted(book):
        rows.append([name, None, *[None] * len(labels), 0, "", "", ""])
    return pd.DataFrame(rows, columns=[student, total, *labels, names["attempts"], names["submitted"],
                                       names["blank"], names["duplicate"]])


def not_submitted(book: Gradebook) -> list[str]:
    """The names expected but with no submission yet: the class list's, or (an open assignment) the
    names students typed, each once."""
    # by the name typed as well as the name shown (a teacher's rename changes only the shown one)
    done = {student_key(r.student) for r in book.rows} | {r.student_key for r in book.rows}
    waiting: dict[str, str] = {}
    for name in (*book.roster, *book.typed):
        waiting.setdefault(student_key(name), name)
    return [name for key, name in waiting.items() if key not in done]


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)


FLAG_BELOW = 0.2  # discrimination under this is flagged (PrairieLearn, Moodle)
MIN_FOR_DISCRIMINATION = 5  # fewer students: a correlation of a handful of points says nothing (2 give ±1)


def item_stats(book: Gradebook, labels: Sequence[str]) -> pd.DataFrame:
    """Per item: facility (mean score, percent) and discrimination (point-biserial: the correlation of
    the item's score with the rest score, the total over the other items), from the counting attempts;
    items under 0.2 are flagged (an empty discrimination: fewer than MIN_FOR_DISCRIMINATION students, or
    no spread)."""
    people_ = persons(book)
    enough = len(people_) >= MIN_FOR_DISCRIMINATION
    matrix = [[{r.item_index: r.score or 0.0 for r in p.counting}.get(i, 0.0) for i in range(len(labels))]
              for p in people_]
    rows = []
    for i, label in enumerate(labels):
        item = [row[i] for row in matrix]
        rest = [sum(row) - row[i] for row in matrix]
        r = _pearson(item, rest) if enough else None
        rows.append({"item": label, "facility": percent(sum(item) / len(item)) if item else None,
                     "discrimination": None if r is None else round(r, 2),
                     "flagged": r is not None and r < FLAG_BELOW})
    return pd.DataFrame(rows, columns=["item", "facility", "discrimination", "flagged"])


def student_cells(book: Gradebook, label: str, marks: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One person's answers cell by cell, every attempt: attempt, time, item, part, row, column, the
    answer typed and its mark (right, wrong, consistent; blank for an item left empty)."""
    marks = {"blank": "blank", "right": "right", "wrong": "wrong", "consistent": "consistent", **(marks or {})}
    person = next((p for p in persons(book) if p.label == label), None)
    rows = []
    for n, attempt in enumerate(person.attempts if person else [], 1):
        for sub in attempt:
            when = sub.submitted_at.strftime("%Y-%m-%d %H:%M")
            if sub.answer is None:
                rows.append([n, when, sub.item_index + 1, "", None, None, "", marks["blank"]])
                continue
            try:
                fb = regrade(sub)
            except ExerciseChanged:
                fb = None
            for part, value in sub.answer.items():
                pfb = fb.parts.get(part) if fb is not None else None
                if isinstance(value, list):
                    cells = [(i, j, str(v)) for i, row in enumerate(value) for j, v in enumerate(row)]
                elif isinstance(value, str) and pfb is not None and pfb.value is not None:
                    cells = [(i, j, f"{x:g}") for (i, j), x in _cells(pfb.value)]
                else:
                    cells = [(0, 0, "" if value is None else str(value))]
                for i, j, text in cells:
                    status = ""
                    if pfb is not None and pfb.status is not None and i < pfb.status.shape[0] \
                            and j < pfb.status.shape[1]:
                        status = marks.get(str(pfb.status[i, j]), str(pfb.status[i, j]))
                    rows.append([n, when, sub.item_index + 1, part, i + 1, j + 1, text, status])
    return pd.DataFrame(rows, columns=["attempt", "submitted", "item", "part", "row", "column", "answer", "mark"])


def _cells(value: Any) -> list[tuple[tuple[int, int], float]]:
    grid = np.atleast_2d(np.asarray(value, dtype=float))
    return [((i, j), float(grid[i, j])) for i in range(grid.shape[0]) for j in range(grid.shape[1])]


def inert(cell: Any) -> Any:
    """A text cell a spreadsheet would run as a formula gets a leading apostrophe (exercises.i18n.escape.csv:
    =, +, -, @, a tab or a CR first, also behind invisible characters and after NFKC normalisation)."""
    return escape.csv(cell)


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """The table as CSV (UTF-8 with a byte-order mark, so spreadsheet programs read accents right),
    every text cell and header made inert (no formula runs when it is opened)."""
    safe = frame.map(inert) if hasattr(frame, "map") else frame.applymap(inert)
    safe.columns = [inert(c) for c in frame.columns]
    # every text cell quoted: a carriage return inside a name cannot split a row
    return safe.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC).encode("utf-8-sig")


def mistakes_frame(book: Gradebook, labels: Sequence[str], name: Callable[[str], str] = str) -> pd.DataFrame:
    """(item, order, mistake, students) for every misconception named in any attempt (all are counted:
    a mistake later corrected still shows what the class got wrong)."""
    rows = [{"item": labels[index], "order": index, "mistake": name(mid), "students": count}
            for index, found in book.misconceptions.items() if index < len(labels) for mid, count in found]
    return pd.DataFrame(rows, columns=["item", "order", "mistake", "students"])


def regraded(code: str, key: str) -> list[tuple[storage.Submission, Feedback | None]]:
    """Every submission graded again against the very exercise it was answered on (teacher key needed).
    ExerciseChanged for a row from before exercises were stored whose generator has changed since."""
    with db.guarded():
        subs = storage.list_submissions(db.engine(), code, key)
    return [(sub, regrade(sub)) for sub in subs]


# ---------------------------------------------------------------- names held by browsers (no class list)


def clashes(code: str, key: str) -> list[storage.Clash]:
    """Browsers refused a name another browser holds, oldest first: the teacher admits or releases."""
    with db.guarded():
        return storage.clashes_of(db.engine(), code, key)


def admit(code: str, key: str, clash: storage.Clash) -> bool:
    """The second browser is the same person: it may use the name too."""
    with db.guarded():
        return storage.admit_clash(db.engine(), code, key, clash.student_key, clash.ref)


def release(code: str, key: str, clash: storage.Clash) -> int:
    """The browser holding the name is not that student: the name is free again; its submissions are
    kept and shown but no longer counted as the name's attempts."""
    with db.guarded():
        return storage.release_name(db.engine(), code, key, clash.student_key)
