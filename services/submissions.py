"""A student's way through an assignment, without Streamlit: their very exercises, grading, storing.

The exercises a student sees are stored once (the class's set when the assignment is created, a
student's own variants the first time they open it) and read back from then on, so a generator
change afterwards never changes what they see or how they are graded. Where nothing is stored and
the kind's generator version is no longer the one the assignment was made with, ExerciseChanged is
raised instead of showing (and grading) another problem.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import exercises
import storage
from exercises import Exercise, Feedback
from exercises.teacher.assignments import slots, student_key

from . import db, lti


class ExerciseChanged(LookupError):
    """Some exercises are not stored and their kind's generator has changed since the assignment
    was made: they cannot be rebuilt as they were. `items` are their 0-based positions."""

    def __init__(self, items: Sequence[int]):
        super().__init__(f"exercises {', '.join(str(i + 1) for i in items)} changed since they were set")
        self.items = tuple(items)


class NotSaved(RuntimeError):
    """The answers could not be stored (nothing was: the transaction is all or nothing)."""


Refused = storage.Refused  # the rules do not take this submission now (reason: closed, late, …)


def secret() -> bytes:
    """The server secret assignment variants are derived with (ATTENTION_SECRET, else stored once)."""
    with db.guarded():
        return storage.server_secret(db.engine())


def current_version(kind: str) -> int | None:
    module = exercises.KINDS.get(kind)
    return None if module is None else int(module.VERSION)


def slot_versions(a: storage.Assignment) -> list[int | None]:
    """The generator version each exercise of the assignment was set with (None: not kept)."""
    versions = list(a.versions) + [None] * (len(a.items) - len(a.versions))
    return [v for item, v in zip(a.items, versions) for _ in range(item.count)]


def rebuild(kind: str, seed: int, level: int, version: int | None) -> Exercise:
    """The exercise (kind, seed, level) regenerated, when the generator is still at `version`
    (None: unknown, from before versions were kept); ExerciseChanged otherwise."""
    if version is not None and version != current_version(kind):
        raise ExerciseChanged([0])
    return exercises.generate(kind, seed, level)


def exercises_for(a: storage.Assignment, student: str | None = None) -> list[Exercise]:
    """The exercises `student` works on (their own variants, or the class's set), as stored.

    Missing ones (a student's first visit, or an assignment from before exercises were stored) are
    generated and stored now, while the generator is still the one the assignment was set with."""
    owner = student if a.per_student else None
    with db.guarded():
        stored = storage.stored_exercises(db.engine(), a.code, owner)
    seeds = a.spec.seeds(student if a.per_student else None, secret=secret())
    versions = slot_versions(a)
    missing: dict[int, Exercise] = {}
    changed = []
    for (slot, seed), version in zip(seeds, versions):
        if slot.index in stored:
            continue
        try:
            missing[slot.index] = rebuild(slot.kind, seed, slot.level, version)
        except ExerciseChanged:
            changed.append(slot.index)
    if changed:
        raise ExerciseChanged(changed)
    if missing:
        with db.guarded():
            stored = storage.store_exercises(db.engine(), a.code, owner, missing)
    return [Exercise.from_dict(stored[slot.index]) for slot in slots(a.items)]


def class_exercises(spec: Any) -> list[Exercise]:
    """The class's set of a new assignment (none for per-student variants: those are made per student)."""
    return [] if spec.per_student else spec.exercises(secret=secret())


# ---------------------------------------------------------------- pages of a long assignment

# answer inputs on one page: Streamlit's cost per input grows with the inputs on the page
# (ATTENTION_PAGE_WIDGETS changes it: bench/bench_assignment.py --one-page measures every item on one page)
PAGE_WIDGETS = int(os.environ.get("ATTENTION_PAGE_WIDGETS", "").strip() or 20)


def widget_count(ex: Exercise) -> int:
    """The inputs an exercise's answer takes on the page: a cell each and a paste box per grid part,
    one choice per multiple-choice part."""
    return sum(1 if part.is_choice else part.shape[0] * part.shape[1] + 1 for part in ex.parts)


def pages(items: Sequence[Exercise], budget: int = PAGE_WIDGETS) -> list[list[int]]:
    """The item positions shown together, page by page: consecutive items while their inputs stay
    within `budget` (an item bigger than that has a page of its own).

    A page draws only its own inputs: Streamlit looks through every widget of the session for each input
    it draws, so one page of 40 items (about 700 inputs) took seconds to draw, a page of 20 inputs does not."""
    out: list[list[int]] = []
    used = 0
    for index, ex in enumerate(items):
        size = widget_count(ex)
        if out and used + size <= budget:
            out[-1].append(index)
            used += size
        else:
            out.append([index])
            used = size
    return out


def page_of(pages_: Sequence[Sequence[int]], index: int) -> int:
    """The page that shows item `index`."""
    return next((p for p, page in enumerate(pages_) if index in page), 0)


# ---------------------------------------------------------------- grading a submission


def is_blank(answer: Any) -> bool:
    """Nothing typed or chosen for a whole part: None, blank text, or a grid of blank cells.

    A chosen option (an int, 0 included) is an answer, never blank; so is anything that is no grid."""
    if answer is None:
        return True
    if isinstance(answer, str):
        return not answer.strip()
    if isinstance(answer, (list, tuple)):
        return all(is_blank(row) if isinstance(row, (list, tuple)) else not ("" if row is None else str(row)).strip()
                   for row in answer)
    return False


@dataclass(frozen=True)
class Graded:
    """Everything a submission's grading found, before anything is stored."""

    feedback: dict[int, Feedback | None]  # item index → feedback (None: left blank)
    answers: dict[int, Any]  # item index → the answer as collected (None: left blank)
    unreadable: dict[int, Feedback] = field(default_factory=dict)  # answers with a format or shape error
    blank: list[int] = field(default_factory=list)  # items with nothing typed (empty when blanks are allowed)

    @property
    def ready(self) -> bool:
        """Can it be stored: every answer readable, and no blank item unless blanks were allowed."""
        return not self.unreadable and not self.blank

    def score(self, count: int) -> float:
        """The mean score over `count` items, a blank or unreadable item counting 0."""
        return sum(fb.score or 0.0 for fb in self.feedback.values() if fb is not None) / max(count, 1)


def grade_all(items: Sequence[Exercise], answers: Mapping[int, Mapping[str, Any]], allow_blank: bool) -> Graded:
    """Grade each item's answer ({part: text | cells | option}); blank items are not graded."""
    feedback: dict[int, Feedback | None] = {}
    kept: dict[int, Any] = {}
    unreadable: dict[int, Feedback] = {}
    blank: list[int] = []
    for index, ex in enumerate(items):
        answer = answers.get(index) or {}
        if all(is_blank(v) for v in answer.values()):
            blank.append(index)
            feedback[index], kept[index] = None, None
            continue
        fb = exercises.grade(ex, dict(answer))
        if not fb.graded:
            unreadable[index] = fb
        feedback[index], kept[index] = fb, dict(answer)
    return Graded(feedback, kept, unreadable, [] if allow_blank else blank)


def entries(items: Sequence[Exercise], graded: Graded) -> list[dict[str, Any]]:
    """The rows to store: one per item, each with the very exercise graded and its version."""
    rows = []
    for index, ex in enumerate(items):
        fb = graded.feedback.get(index)
        rows.append({"item_index": index, "kind": ex.kind, "level": ex.level, "seed": ex.seed,
                     "answer": graded.answers.get(index), "score": fb.score if fb is not None else 0.0,
                     "misconception": fb.misconception if fb is not None else None,
                     "version": ex.version, "exercise": ex})
    return rows


def submit(a: storage.Assignment, student: str, items: Sequence[Exercise], graded: Graded,
           person: str | None = None, profile: str | None = None, source: str | None = None,
           paper_cells: Sequence[Mapping[str, Any]] = ()) -> list[int]:
    """Store a graded submission (one attempt) in one transaction; its ids once committed.
    NotSaved if it failed; Refused (nothing stored) when the rules do not take it now. `profile`: the
    browser profile submitting (an assignment without a class list takes a name only from its holder).
    `source` "paper" and its cells: read from a photographed sheet (services.paper)."""
    if not graded.ready:
        raise ValueError("fix the unreadable or blank answers first")
    try:
        with db.guarded():
            ids = storage.record_submissions(db.engine(), a.code, student, entries(items, graded), person=person,
                                             claimant=None if a.has_roster else profile, source=source,
                                             cells=paper_cells)
    except (db.Unavailable, ValueError, storage.UnknownAssignment) as err:
        raise NotSaved(str(err)) from err
    if lti.launched(person):
        try:  # a learner launched from an LMS: the counting score goes to the course's gradebook
            lti.queue(a.code, person, counting_score(a, student))
        except db.Unavailable:  # stored all the same; the score is queued at the next submission
            pass
    return ids


def counting_score(a: storage.Assignment, student: str) -> float:
    """The score of the student's attempt that counts (the assignment's rules say which), 0..1."""
    return submission_score(storage.counted(attempts_of(a, student), a.rules.counts), a.item_count)


def submitted_exercise(sub: storage.Submission) -> Exercise:
    """The exercise a stored submission was graded against: the stored one, else (rows from before
    exercises were stored) the same one regenerated while its version still matches."""
    if sub.exercise is not None:
        return Exercise.from_dict(sub.exercise)
    try:
        return rebuild(sub.kind, sub.seed, sub.level, sub.version)
    except ExerciseChanged:
        raise ExerciseChanged([sub.item_index]) from None


def regrade(sub: storage.Submission) -> Feedback | None:
    """The submission graded again against the very exercise it was answered on (None: left blank)."""
    ex = submitted_exercise(sub)
    if sub.answer is None:
        return None
    return exercises.grade(ex, sub.answer)


def attempts_of(a: storage.Assignment, student: str) -> list[list[storage.Submission]]:
    """This student's own earlier attempts, oldest first (what a returning student is shown)."""
    with db.guarded():
        return storage.attempts_of(db.engine(), a.code, student)


def taking_submissions(a: storage.Assignment, now: datetime | None = None) -> bool:
    """Can anything still be submitted: not closed, and not past the deadline."""
    now = now or datetime.now(UTC)
    return not a.rules.closed and (a.rules.deadline is None or now <= a.rules.deadline)


def marks_visible(a: storage.Assignment, final: bool, on_roster: bool, now: datetime | None = None) -> bool:
    """May the student see marks (the score and the marked grid) now? Outside an exam always. In an exam
    only a name on the class list sees them (once released, or after their final attempt when the teacher
    chose that): a throwaway name would learn which cells are right and then submit under the real
    one. An exam without a class list shows marks once released and no longer taking submissions."""
    if not a.rules.exam:
        return True
    if not (a.has_roster and on_roster):
        return a.rules.released and not taking_submissions(a, now)
    return a.rules.marks_visible(final)


def attempts_left(a: storage.Assignment, done: int) -> int | None:
    """How many more attempts the rules allow after `done` (None: unlimited)."""
    return None if not a.rules.attempts else max(a.rules.attempts - done, 0)


def exam_clock(a: storage.Assignment, student: str) -> Any:
    """When this student's exam clock started (now if never): one clock per student on the server, so
    a reload or another browser does not start it again; the time limit counts from there."""
    with db.guarded():
        return storage.exam_clock(db.engine(), a.code, student)


def seen(a: storage.Assignment, person: str) -> None:
    """Record that this person has opened the assignment (once): from then on the teacher cannot change
    what they saw. Not an exam's clock, which starts at the first opening under a time limit (exam_clock())."""
    with db.guarded():
        storage.opened(db.engine(), a.code, "seen:" + person)


def claim(a: storage.Assignment, student: str, profile: str) -> None:
    """Take a typed name for this browser profile (an assignment without a class list): the first
    profile to type a name holds it; Refused("name_taken") for another one (the teacher is told)."""
    with db.guarded():
        mine = storage.claim_name(db.engine(), a.code, student, profile)
    if not mine:
        raise Refused("name_taken")


def person_for(profile: str, student: str) -> str:
    """Who submits on an assignment without a class list: this browser profile under this name (a
    digest: the profile id stays private), the same in every session of the browser."""
    digest = hashlib.sha256(b"person\x1f" + profile.encode()).hexdigest()[:16]
    return f"p:{digest}:{student_key(student)}"[:120]


def student_for_token(a: storage.Assignment, token: str) -> str | None:
    """The class-list name behind a personal link's token, or None (unknown or issued again)."""
    with db.guarded():
        return storage.student_for_token(db.engine(), a.code, token)


def submission_score(rows: Sequence[storage.Submission], count: int) -> float:
    return sum(r.score or 0.0 for r in rows) / max(count, 1)
