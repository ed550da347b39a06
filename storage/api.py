"""The storage API: every read and write of assignments, submissions and attempts.

Each function takes the engine first (`open_engine()`; services.db keeps one per process) and runs one
short transaction. A write returns only after its commit: an id returned is an id on disk.
Nothing lists submissions without the assignment's teacher key.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from exercises.assignments import AssignmentSpec, ItemSpec, clean_student_name, make_spec, slots, student_key
from exercises.engine import KINDS

from .db import assignment_exercises, assignments, attempts, submissions, writing
from .keys import check_key, hash_key, new_code, new_key, parse_code, parse_key

MAX_ANSWER_CHARS = 50_000  # one submitted answer, as JSON
MAX_PROFILE = 100
CODE_RETRIES = 8


class UnknownAssignment(LookupError):
    """No assignment has this code."""


class AccessDenied(PermissionError):
    """The teacher key does not match the assignment."""


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class Assignment:
    code: str
    title: str
    items: tuple[ItemSpec, ...]
    seed: int
    per_student: bool
    allow_solutions: bool
    created_at: datetime  # UTC
    versions: tuple[int | None, ...] = ()  # each item's generator version at creation (None: not kept)

    @property
    def spec(self) -> AssignmentSpec:
        return AssignmentSpec(self.title, self.items, self.seed, self.per_student, self.allow_solutions)

    @property
    def item_count(self) -> int:
        return sum(i.count for i in self.items)


@dataclass(frozen=True)
class Created:
    """A new assignment and its teacher key: the only time the key exists outside the teacher's hands."""

    assignment: Assignment
    teacher_key: str


@dataclass(frozen=True)
class Submission:
    id: int
    code: str
    student: str
    student_key: str
    item_index: int
    kind: str
    level: int
    seed: int
    answer: Any
    score: float | None
    misconception: str | None
    submitted_at: datetime  # UTC
    version: int | None = None  # the generator version of the exercise graded (None: stored before versions)
    exercise: dict[str, Any] | None = None  # Exercise.to_dict() of the exercise graded


@dataclass(frozen=True)
class Attempt:
    id: int
    profile: str
    kind: str
    level: int
    seed: int
    score: float | None
    misconception: str | None
    hints_used: int
    seconds: float
    at: datetime  # UTC
    version: int | None = None
    exercise: dict[str, Any] | None = None  # Exercise.to_dict() of the exercise attempted


@dataclass(frozen=True)
class Gradebook:
    """Students × items: each student's latest score per item, and the mistakes most made per item."""

    assignment: Assignment
    students: tuple[str, ...]  # names as last typed, in order of first submission
    scores: dict[tuple[str, int], float | None]  # (student, item index) → score; missing: not submitted
    misconceptions: dict[int, list[tuple[str, int]]] = field(default_factory=dict)  # most common first
    submitted_at: dict[str, datetime] = field(default_factory=dict)  # student → latest submission


# ---------------------------------------------------------------- helpers


def _utc_naive(at: datetime | float | int | None) -> datetime:
    """Stored times are naive UTC (the same on SQLite and PostgreSQL)."""
    if at is None:
        return datetime.now(UTC).replace(tzinfo=None)
    if isinstance(at, (int, float)):
        return datetime.fromtimestamp(float(at), UTC).replace(tzinfo=None)
    if at.tzinfo is not None:
        return at.astimezone(UTC).replace(tzinfo=None)
    return at


def _aware(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC)


def _assignment(row: Any) -> Assignment:
    items = tuple(ItemSpec(str(i["kind"]), int(i["level"]), int(i["count"])) for i in row.items)
    versions = tuple(None if i.get("version") is None else int(i["version"]) for i in row.items)
    return Assignment(code=row.code, title=row.title, items=items, seed=int(row.seed),
                      per_student=bool(row.per_student), allow_solutions=bool(row.allow_solutions),
                      created_at=_aware(row.created_at), versions=versions)


def _submission(row: Any) -> Submission:
    return Submission(id=int(row.id), code=row.assignment_code, student=row.student, student_key=row.student_key,
                      item_index=int(row.item_index), kind=row.kind, level=int(row.level), seed=int(row.seed),
                      answer=row.answer, score=row.score, misconception=row.misconception,
                      submitted_at=_aware(row.submitted_at), version=row.version, exercise=row.exercise)


def _plain_json(answer: Any) -> Any:
    """The answer as plain JSON (lists, dicts, strings, numbers), within the size cap."""
    try:
        text = json.dumps(answer, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"an answer must be plain JSON: {err}") from None
    if len(text) > MAX_ANSWER_CHARS:
        raise ValueError(f"an answer may be at most {MAX_ANSWER_CHARS} characters as JSON")
    return json.loads(text)


def _version(value: Any) -> int | None:
    return None if value is None else int(value)


def _exercise_json(exercise: Any) -> dict[str, Any] | None:
    """An exercise as stored: Exercise.to_dict() (an Exercise is converted), or None."""
    if exercise is None:
        return None
    if hasattr(exercise, "to_dict"):
        exercise = exercise.to_dict()
    return json.loads(json.dumps(exercise, allow_nan=False))


def _load(conn: Connection, code: str) -> tuple[Assignment, str]:
    row = conn.execute(sa.select(assignments).where(assignments.c.code == code)).first()
    if row is None:
        raise UnknownAssignment(code)
    return _assignment(row), row.key_hash


def _authorised(conn: Connection, code: Any, key: Any) -> Assignment:
    """The assignment if `key` is its teacher key; MalformedCode/MalformedKey/UnknownAssignment/AccessDenied."""
    code, key = parse_code(code), parse_key(key)
    assignment, key_hash = _load(conn, code)
    if not check_key(key, key_hash):
        raise AccessDenied(code)
    return assignment


# ---------------------------------------------------------------- assignments


def create_assignment(engine: Engine, title: Any, items: Iterable[ItemSpec | Mapping[str, Any]], seed: Any,
                      per_student: bool = False, allow_solutions: bool = False,
                      created_at: datetime | None = None, exercises: Iterable[Any] = ()) -> Created:
    """Store a new assignment under a fresh random code; returns it with its teacher key (shown once).

    Each item keeps its kind's generator version; `exercises` (the class's set, one per slot, as
    Exercises or their to_dict()) are stored with it in the same transaction.
    Raises exercises.assignments.AssignmentError for a bad title, item list or seed."""
    spec = make_spec(title, items, seed, per_student, allow_solutions)
    versions = tuple(int(KINDS[i.kind].VERSION) for i in spec.items)
    stored = [_exercise_json(e) for e in exercises]
    key = new_key()
    row = {"title": spec.title, "items": [{**i.to_dict(), "version": v} for i, v in zip(spec.items, versions)],
           "seed": spec.seed,
           "per_student": spec.per_student, "allow_solutions": spec.allow_solutions,
           "key_hash": hash_key(key), "created_at": _utc_naive(created_at)}
    for _ in range(CODE_RETRIES):
        code = new_code()
        try:
            with writing(engine).begin() as conn:
                conn.execute(sa.insert(assignments).values(code=code, **row))
                if stored:
                    conn.execute(sa.insert(assignment_exercises), [
                        {"assignment_code": code, "student_key": "", "item_index": index,
                         "version": int(ex["version"]), "exercise": ex, "stored_at": row["created_at"]}
                        for index, ex in enumerate(stored)])
        except sa.exc.IntegrityError:
            continue  # the code is taken (31^8 codes: rare); draw another
        assignment = Assignment(code=code, title=spec.title, items=spec.items, seed=spec.seed,
                                per_student=spec.per_student, allow_solutions=spec.allow_solutions,
                                created_at=_aware(row["created_at"]), versions=versions)
        return Created(assignment, key)
    raise RuntimeError("no free assignment code after several draws")


def get_assignment(engine: Engine, code: Any) -> Assignment | None:
    """The assignment with this code (as typed), or None. Raises MalformedCode for text that is no code."""
    code = parse_code(code)
    with engine.connect() as conn:
        row = conn.execute(sa.select(assignments).where(assignments.c.code == code)).first()
    return None if row is None else _assignment(row)


def verify_teacher_key(engine: Engine, code: Any, key: Any) -> bool:
    """True only when `code` exists and `key` is its teacher key (malformed input: False)."""
    try:
        with engine.connect() as conn:
            _authorised(conn, code, key)
    except (ValueError, UnknownAssignment, AccessDenied):
        return False
    return True


# ---------------------------------------------------------------- stored exercises


def _owner(student: Any) -> str:
    """The student_key of stored exercises: "" for the class's set, else the student's identity."""
    return "" if student is None else student_key(student)


def stored_exercises(engine: Engine, code: Any, student: Any = None) -> dict[int, dict[str, Any]]:
    """{item index: Exercise.to_dict()} stored for the class (student None) or for one student."""
    code = parse_code(code)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(assignment_exercises.c.item_index, assignment_exercises.c.exercise)
                            .where(assignment_exercises.c.assignment_code == code,
                                   assignment_exercises.c.student_key == _owner(student))).all()
    return {int(r.item_index): r.exercise for r in rows}


def store_exercises(engine: Engine, code: Any, student: Any, exercises: Mapping[int, Any],
                    stored_at: datetime | None = None) -> dict[int, dict[str, Any]]:
    """Keep these exercises (item index → Exercise or its to_dict()) for the class or a student,
    where none is stored yet; returns everything stored for them afterwards. The first one stored
    wins: two sessions of the same student opening at once both see the same exercises."""
    code = parse_code(code)
    who = _owner(student)
    rows = [{"assignment_code": code, "student_key": who, "item_index": int(index),
             "version": int(ex["version"]), "exercise": ex, "stored_at": _utc_naive(stored_at)}
            for index, ex in ((i, _exercise_json(e)) for i, e in sorted(exercises.items()))]
    table = assignment_exercises
    for _ in range(2):  # once more if another session stored some of them at the same moment
        try:
            with writing(engine).begin() as conn:
                _load(conn, code)
                present = set(conn.execute(sa.select(table.c.item_index).where(
                    table.c.assignment_code == code, table.c.student_key == who)).scalars())
                new = [r for r in rows if r["item_index"] not in present]
                if new:
                    conn.execute(sa.insert(table), new)
            break
        except sa.exc.IntegrityError:
            continue  # theirs are kept: a stored exercise is never replaced
    return stored_exercises(engine, code, student)


# ---------------------------------------------------------------- submissions


def record_submissions(engine: Engine, code: Any, student: Any, entries: Iterable[Mapping[str, Any]],
                       submitted_at: datetime | None = None) -> list[int]:
    """Store one student's answers in one transaction; returns their ids once committed.

    Each entry: item_index, kind, level, seed, answer (plain JSON), score (or None), misconception,
    and the exercise graded (an Exercise or its to_dict()) with its version.
    Raises MalformedCode, UnknownAssignment, AssignmentError (name), ValueError (an entry)."""
    code = parse_code(code)
    name = clean_student_name(student)
    who = student_key(name)
    at = _utc_naive(submitted_at)
    rows = []
    for e in entries:
        score = e.get("score")
        rows.append({"assignment_code": code, "student": name, "student_key": who,
                     "item_index": int(e["item_index"]), "kind": str(e["kind"]), "level": int(e["level"]),
                     "seed": int(e["seed"]), "answer": _plain_json(e.get("answer")),
                     "score": None if score is None else float(score),
                     "misconception": e.get("misconception"), "submitted_at": at,
                     "version": _version(e.get("version")), "exercise": _exercise_json(e.get("exercise"))})
    if not rows:
        raise ValueError("nothing to submit")
    ids = []
    with writing(engine).begin() as conn:
        assignment, _ = _load(conn, code)
        expected = slots(assignment.items)
        for row in rows:
            index = row["item_index"]
            if not 0 <= index < len(expected):
                raise ValueError(f"item {index} is not in assignment {code} ({len(expected)} items)")
            slot = expected[index]
            if (row["kind"], row["level"]) != (slot.kind, slot.level):
                raise ValueError(f"item {index} of {code} is {slot.kind} level {slot.level}")
            if row["score"] is not None and not 0.0 <= row["score"] <= 1.0:
                raise ValueError("a score is between 0 and 1")
            ids.append(int(conn.execute(sa.insert(submissions).values(**row)).inserted_primary_key[0]))
    return ids


def record_submission(engine: Engine, code: Any, student: Any, item_index: int, kind: str, level: int, seed: int,
                      answer: Any, score: float | None, misconception: str | None,
                      submitted_at: datetime | None = None, version: int | None = None,
                      exercise: Any = None) -> int:
    """Store one answer; returns its id once committed."""
    entry = {"item_index": item_index, "kind": kind, "level": level, "seed": seed, "answer": answer,
             "score": score, "misconception": misconception, "version": version, "exercise": exercise}
    return record_submissions(engine, code, student, [entry], submitted_at)[0]


def list_submissions(engine: Engine, code: Any, key: Any) -> list[Submission]:
    """Every submission of the assignment, oldest first — only with its teacher key (else AccessDenied)."""
    with engine.connect() as conn:
        assignment = _authorised(conn, code, key)
        rows = conn.execute(sa.select(submissions).where(submissions.c.assignment_code == assignment.code)
                            .order_by(submissions.c.id)).all()
    return [_submission(r) for r in rows]


def gradebook(engine: Engine, code: Any, key: Any) -> Gradebook:
    """Students × items with each student's latest score per item; requires the teacher key."""
    with engine.connect() as conn:
        assignment = _authorised(conn, code, key)
        rows = conn.execute(sa.select(submissions).where(submissions.c.assignment_code == assignment.code)
                            .order_by(submissions.c.id)).all()
    names: dict[str, str] = {}  # student key → latest name, in order of first submission
    latest: dict[tuple[str, int], Any] = {}
    when: dict[str, datetime] = {}
    for row in rows:
        names[row.student_key] = row.student
        latest[(row.student_key, row.item_index)] = row
        when[row.student_key] = _aware(row.submitted_at)
    scores = {(names[k], index): row.score for (k, index), row in latest.items()}
    counts: dict[int, Counter] = {}
    for (_, index), row in latest.items():
        if row.misconception:
            counts.setdefault(index, Counter())[row.misconception] += 1
    return Gradebook(assignment=assignment, students=tuple(names.values()), scores=scores,
                     misconceptions={i: c.most_common() for i, c in sorted(counts.items())},
                     submitted_at={names[k]: t for k, t in when.items()})


# ---------------------------------------------------------------- practice attempts (progress)


def _profile(profile: Any) -> str:
    text = " ".join(str(profile or "").split())
    if not text or len(text) > MAX_PROFILE:
        raise ValueError(f"a profile name has 1 to {MAX_PROFILE} characters")
    return text


def record_attempt(engine: Engine, profile: str, kind: str, level: int, seed: int, score: float | None,
                   misconception: str | None, hints_used: int, seconds: float,
                   at: datetime | float | None = None, version: int | None = None, exercise: Any = None) -> int:
    """Store one graded practice attempt under a local profile name, with the exercise attempted and
    its generator version; returns its id once committed."""
    row = {"profile": _profile(profile), "kind": str(kind), "level": int(level), "seed": int(seed),
           "score": None if score is None else float(score), "misconception": misconception,
           "hints_used": int(hints_used), "seconds": float(seconds), "at": _utc_naive(at),
           "version": _version(version), "exercise": _exercise_json(exercise)}
    with writing(engine).begin() as conn:
        return int(conn.execute(sa.insert(attempts).values(**row)).inserted_primary_key[0])


def list_attempts(engine: Engine, profile: str) -> list[Attempt]:
    """A profile's attempts, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(sa.select(attempts).where(attempts.c.profile == _profile(profile))
                            .order_by(attempts.c.at, attempts.c.id)).all()
    return [Attempt(id=int(r.id), profile=r.profile, kind=r.kind, level=int(r.level), seed=int(r.seed),
                    score=r.score, misconception=r.misconception, hints_used=int(r.hints_used),
                    seconds=float(r.seconds), at=_aware(r.at), version=r.version, exercise=r.exercise)
            for r in rows]
