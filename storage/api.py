"""The storage API: every read and write of assignments, submissions and attempts.

Each function takes the engine first (`open_engine()`; services.db keeps one per process) and runs one
short transaction. A write returns only after its commit: an id returned is an id on disk.
Nothing lists submissions without the assignment's teacher key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from exercises.teacher.assignments import (
    AssignmentSpec,
    ItemSpec,
    Rules,
    clean_student_name,
    make_rules,
    make_spec,
    parse_items,
    slots,
    student_key,
    unchanged_slots,
)

from . import claims, fingerprints
from .db import (
    assignment_exercises,
    assignments,
    attempt_claims,
    attempts,
    given_fingerprints,
    name_claims,
    name_clashes,
    openings,
    paper_cells,
    roster,
    settings,
    submissions,
    writing,
)
from .keys import check_key, hash_key, new_code, new_key, parse_code, parse_key

MAX_ANSWER_CHARS = 50_000  # one submitted answer, as JSON
MAX_PROFILE = 100
CODE_RETRIES = 8
CLAIM_RETRIES = 40  # a submission counts again when another one of the same student took its number


class UnknownAssignment(LookupError):
    """No assignment has this code."""


class AccessDenied(PermissionError):
    """The teacher key does not match the assignment."""


class Refused(Exception):
    """A submission the assignment's rules do not accept now; nothing was stored. `reason` is one of
    closed, not_open, late, time_up, no_attempts, not_on_roster, name_taken; `when` the time it is about."""

    def __init__(self, reason: str, when: datetime | None = None):
        super().__init__(reason)
        self.reason = reason
        self.when = when


class Locked(Exception):
    """Items that cannot change: `reason` "submitted" (someone has submitted: the items are fixed) or
    "started" (a student has opened it, or their sheet was printed: what they saw stays, items may only
    be added after the last one)."""

    def __init__(self, code: str, reason: str = "submitted"):
        super().__init__(f"{code}: {reason}")
        self.reason = reason


SECRET_ENV = "ATTENTION_SECRET"
GRACE_S = 30  # a submission pressed just before the time limit is still on time


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
    rules: Rules = field(default_factory=lambda: make_rules(None))
    has_roster: bool = False

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
    teacher_key: str | None
    existing: bool = False  # the same request made it before (Create pressed twice): no second one

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
    attempt_id: str | None = None  # the press of Submit it came with (None: stored before attempts)
    attempt: int | None = None  # 1, 2, … per student
    person: str | None = None  # who pressed it (class-list entry or browser session; None: before)
    source: str | None = None  # "paper": read from a photographed sheet (paper_cells holds its cells)

    @property
    def who(self) -> str:
        """The person the row belongs to (older rows: the normalised name)."""
        return self.person or self.student_key

    @property
    def group(self) -> str:
        """The submission (press of Submit) the row belongs to."""
        return self.attempt_id or f"row-{self.id}"


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
    solution_shown: bool | None = None  # the worked solution was open before the answer (None: not kept)


@dataclass(frozen=True)
class Gradebook:
    """Students × items: each student's latest score per item, and the mistakes most made per item."""

    assignment: Assignment
    students: tuple[str, ...]  # names as last typed, in order of first submission
    scores: dict[tuple[str, int], float | None]  # (student, item index) → score; missing: not submitted
    misconceptions: dict[int, list[tuple[str, int]]] = field(default_factory=dict)  # most common first
    submitted_at: dict[str, datetime] = field(default_factory=dict)  # student → latest submission
    rows: tuple[Submission, ...] = ()  # every stored row, oldest first (all attempts)
    roster: tuple[str, ...] = ()  # the class list's names, in order (empty: an open assignment)
    typed: tuple[str, ...] = ()  # names typed on an open assignment (held by a browser), in order of typing


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


def _assignment(row: Any, has_roster: bool = False) -> Assignment:
    items = tuple(ItemSpec(str(i["kind"]), int(i["level"]), int(i["count"])) for i in row.items)
    versions = tuple(None if i.get("version") is None else int(i["version"]) for i in row.items)
    return Assignment(code=row.code, title=row.title, items=items, seed=int(row.seed),
                      per_student=bool(row.per_student), allow_solutions=bool(row.allow_solutions),
                      created_at=_aware(row.created_at), versions=versions, rules=make_rules(row.rules),
                      has_roster=has_roster)


def _submission(row: Any) -> Submission:
    return Submission(id=int(row.id), code=row.assignment_code, student=row.student, student_key=row.student_key,
                      item_index=int(row.item_index), kind=row.kind, level=int(row.level), seed=int(row.seed),
                      answer=row.answer, score=row.score, misconception=row.misconception,
                      submitted_at=_aware(row.submitted_at), version=row.version, exercise=row.exercise,
                      attempt_id=row.attempt_id, attempt=row.attempt, person=row.person,
                      source=getattr(row, "source", None))


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


def _has_roster(conn: Connection, code: str) -> bool:
    return conn.execute(sa.select(roster.c.student_key).where(roster.c.assignment_code == code).limit(1)).first() \
        is not None


def _load(conn: Connection, code: str) -> tuple[Assignment, str]:
    row = conn.execute(sa.select(assignments).where(assignments.c.code == code)).first()
    if row is None:
        raise UnknownAssignment(code)
    return _assignment(row, _has_roster(conn, code)), row.key_hash


# ---------------------------------------------------------------- the server secret and owners


def server_secret(engine: Engine) -> bytes:
    """The secret that keys assignment variants and owners: ATTENTION_SECRET, else a random one
    stored once in the database (every replica on it reads the same)."""
    env = os.environ.get(SECRET_ENV, "").strip()
    if env:
        return env.encode()
    for _ in range(3):
        with engine.connect() as conn:
            value = conn.execute(sa.select(settings.c.value).where(settings.c.name == "secret")).scalar()
        if value:
            return bytes.fromhex(value)
        try:
            with writing(engine).begin() as conn:
                conn.execute(sa.insert(settings).values(name="secret", value=secrets.token_hex(32)))
        except sa.exc.IntegrityError:
            continue  # another session stored it first: read theirs
    raise RuntimeError("no server secret could be stored")


def owner_id(engine: Engine, key: str) -> str:
    """Who owns an assignment: an HMAC of the teacher key with the server secret (not the key)."""
    return hmac.new(server_secret(engine), b"owner\x1f" + key.encode(), hashlib.sha256).hexdigest()


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
                      created_at: datetime | None = None, exercises: Iterable[Any] = (),
                      rules: Rules | Mapping[str, Any] | None = None, teacher_key: Any = None,
                      request_id: str | None = None, kind_versions: Mapping[str, int] | None = None) -> Created:
    """Store a new assignment under a fresh random code; returns it with its teacher key (shown once).

    Each item keeps its kind's generator version from `kind_versions` (kind id → version: services pass
    the registry's; a kind not in it: not kept); `exercises` (the class's set, one per slot, as
    Exercises or their to_dict()) are stored with it in the same transaction. `teacher_key`: a key the
    teacher already has (MalformedKey if it is none), so one key owns many assignments; else a new one.
    `request_id`: the same id again (Create pressed twice) returns the first one, existing=True.
    Raises exercises.teacher.assignments.AssignmentError for a bad title, item list, seed or rules."""
    spec = make_spec(title, items, seed, per_student, allow_solutions)
    checked = make_rules(rules) if rules is not None else None
    versions = tuple(_version((kind_versions or {}).get(i.kind)) for i in spec.items)
    stored = [_exercise_json(e) for e in exercises]
    key = new_key() if teacher_key is None else parse_key(teacher_key)
    owner = owner_id(engine, key)
    if request_id:
        with engine.connect() as conn:
            row = conn.execute(sa.select(assignments)
                               .where(assignments.c.request_id == str(request_id)[:64])).first()
            if row is not None:
                return Created(_assignment(row, _has_roster(conn, row.code)),
                               key if row.owner == owner else None, existing=True)
    row = {"title": spec.title, "items": [{**i.to_dict(), "version": v} for i, v in zip(spec.items, versions)],
           "seed": spec.seed,
           "per_student": spec.per_student, "allow_solutions": spec.allow_solutions,
           "key_hash": hash_key(key), "created_at": _utc_naive(created_at),
           "rules": None if checked is None else checked.to_dict(), "owner": owner,
           "request_id": str(request_id)[:64] if request_id else None}
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
                    fingerprints.store(conn, code, "", dict(enumerate(stored)))
        except sa.exc.IntegrityError:
            continue  # the code is taken (31^8 codes: rare); draw another
        assignment = Assignment(code=code, title=spec.title, items=spec.items, seed=spec.seed,
                                per_student=spec.per_student, allow_solutions=spec.allow_solutions,
                                created_at=_aware(row["created_at"]), versions=versions,
                                rules=make_rules(row["rules"]))
        return Created(assignment, key)
    raise RuntimeError("no free assignment code after several draws")


def get_assignment(engine: Engine, code: Any) -> Assignment | None:
    """The assignment with this code (as typed), or None. Raises MalformedCode for text that is no code."""
    code = parse_code(code)
    with engine.connect() as conn:
        row = conn.execute(sa.select(assignments).where(assignments.c.code == code)).first()
        return None if row is None else _assignment(row, _has_roster(conn, code))


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
                    fingerprints.store(conn, code, who, {r["item_index"]: r["exercise"] for r in new})
            break
        except sa.exc.IntegrityError:
            continue  # theirs are kept: a stored exercise is never replaced
    return stored_exercises(engine, code, student)


# ---------------------------------------------------------------- submissions


def check_rules(conn: Connection, assignment: Assignment, who: str, person: str, at: datetime,
                claimant: str | None = None, name: str = "") -> int:
    """The number of this attempt (1, 2, …) if the rules take a submission by `who` at `at` (naive
    UTC); Refused otherwise. `who` is the normalised name or class-list key attempts are counted by;
    `claimant` the browser profile submitting to an assignment without a class list (the name must be
    its own: claimed first, or admitted by the teacher)."""
    rules = assignment.rules
    if rules.closed:
        raise Refused("closed")
    now = _aware(at)
    if rules.opens_at is not None and now < rules.opens_at:
        raise Refused("not_open", rules.opens_at)
    if rules.deadline is not None and now > rules.deadline:
        raise Refused("late", rules.deadline)
    if assignment.has_roster and conn.execute(sa.select(roster.c.student_key).where(
            roster.c.assignment_code == assignment.code, roster.c.student_key == who)).first() is None:
        raise Refused("not_on_roster")
    if claimant is not None and not assignment.has_roster and not claims.holds(
            conn, assignment.code, who, claimant, name or who, at):
        raise Refused("name_taken")
    if rules.time_limit:
        # the student's clock (one per student, whatever browser started it), or an older per-session one
        started = conn.execute(sa.select(sa.func.min(openings.c.opened_at)).where(
            openings.c.assignment_code == assignment.code, openings.c.person.in_([person, _clock(who)]))).scalar()
        if started is None:  # submitted without opening first: the clock starts now (the first start wins)
            conn.execute(sa.insert(openings).values(assignment_code=assignment.code, person=_clock(who),
                                                    opened_at=at))
            started = at
        ends = _aware(started) + timedelta(minutes=rules.time_limit)
        if now > ends + timedelta(seconds=GRACE_S):
            raise Refused("time_up", ends)
    done = conn.execute(sa.select(sa.func.count(sa.distinct(sa.func.coalesce(
        submissions.c.attempt_id, sa.cast(submissions.c.id, sa.String))))).where(
        submissions.c.assignment_code == assignment.code, submissions.c.student_key == who)).scalar() or 0
    if rules.attempts and done >= rules.attempts:
        raise Refused("no_attempts")
    return int(done) + 1


def record_submissions(engine: Engine, code: Any, student: Any, entries: Iterable[Mapping[str, Any]],
                       submitted_at: datetime | None = None, person: str | None = None,
                       claimant: str | None = None, source: str | None = None,
                       cells: Sequence[Mapping[str, Any]] = ()) -> list[int]:
    """Store one student's answers (one attempt) in one transaction; returns their ids once committed.

    Each entry: item_index, kind, level, seed, answer (plain JSON), score (or None), misconception,
    and the exercise graded (an Exercise or its to_dict()) with its version. `person`: who pressed
    Submit (the browser session of an open assignment); rows are never replaced, each attempt is kept.
    `claimant`: the browser profile submitting to an assignment without a class list: the name must be
    its own (claim_name), else Refused name_taken. `source` "paper" with its `cells` (grid, row, col,
    item_index, part, text, confidence, reviewed, right, crop): read from a sheet, stored with it.
    Raises MalformedCode, UnknownAssignment, AssignmentError (name), ValueError (an entry), Refused
    (the rules: closed, not open yet, late, out of time or attempts, not on the class list)."""
    code = parse_code(code)
    name = clean_student_name(student)
    who = student_key(name)
    at = _utc_naive(submitted_at)
    attempt_id = uuid.uuid4().hex
    person = str(person)[:120] if person else who
    rows = []
    for e in entries:
        score = e.get("score")
        rows.append({"assignment_code": code, "student": name, "student_key": who,
                     "item_index": int(e["item_index"]), "kind": str(e["kind"]), "level": int(e["level"]),
                     "seed": int(e["seed"]), "answer": _plain_json(e.get("answer")),
                     "score": None if score is None else float(score),
                     "misconception": e.get("misconception"), "submitted_at": at,
                     "version": _version(e.get("version")), "exercise": _exercise_json(e.get("exercise")),
                     "attempt_id": attempt_id, "person": person, "source": source})
    if not rows:
        raise ValueError("nothing to submit")
    extra = [{"attempt_id": attempt_id, "assignment_code": code, "grid": int(c["grid"]), "row": int(c["row"]),
              "col": int(c["col"]), "item_index": int(c["item_index"]), "part": str(c["part"])[:40],
              "text": str(c["text"])[:40], "confidence": float(c["confidence"]), "reviewed": bool(c["reviewed"]),
              "right": None if c.get("right") is None else bool(c["right"]), "crop": bytes(c["crop"])[:MAX_CROP]}
             for c in cells]
    for _ in range(CLAIM_RETRIES - 1):
        try:
            return _store_attempt(engine, code, who, person, at, attempt_id, rows, claimant, extra)
        except sa.exc.IntegrityError:
            # another submission of this student took the number first (its commit is what we waited
            # for): count again, now seeing it. Nothing of this one was stored.
            continue
    return _store_attempt(engine, code, who, person, at, attempt_id, rows, claimant, extra)


def _store_attempt(engine: Engine, code: str, who: str, person: str, at: datetime, attempt_id: str,
                   rows: list[dict[str, Any]], claimant: str | None = None,
                   cells: list[dict[str, Any]] | None = None) -> list[int]:
    """One try at storing an attempt: the rules checked and the attempt's number claimed (the primary
    key of attempt_claims: one per student and number) in the transaction that stores its rows."""
    ids = []
    with writing(engine).begin() as conn:
        assignment, _ = _load(conn, code)
        number = check_rules(conn, assignment, who, person, at, claimant, rows[0]["student"])
        conn.execute(sa.insert(attempt_claims).values(assignment_code=code, student_key=who, attempt=number,
                                                      attempt_id=attempt_id, claimed_at=at))
        for row in rows:
            row["attempt"] = number
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
        if cells:
            conn.execute(sa.insert(paper_cells), cells)
    return ids


MAX_CROP = 64 * 1024  # a cell's PNG (a few kB): a bigger one is no cell


def paper_cells_of(engine: Engine, code: Any, attempt_id: str) -> list[dict[str, Any]]:
    """The cells of a submission read from paper, in grid, row, column order (none for a typed one)."""
    code = parse_code(code)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(paper_cells).where(paper_cells.c.assignment_code == code,
                                                         paper_cells.c.attempt_id == str(attempt_id))
                            .order_by(paper_cells.c.grid, paper_cells.c.row, paper_cells.c.col)).all()
    return [dict(r._mapping) for r in rows]


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


def counted(groups: list[list[Submission]], counts: str) -> list[Submission]:
    """The rows of the attempt that counts (first, best or last) among one person's attempts."""
    if counts == "first":
        return groups[0]
    if counts == "best":
        return max(groups, key=lambda g: sum(r.score or 0.0 for r in g))  # the earliest of equal ones
    return groups[-1]


def people(rows: Iterable[Submission]) -> dict[str, list[list[Submission]]]:
    """Each person's attempts (lists of rows), people in order of first submission, attempts oldest first."""
    out: dict[str, dict[str, list[Submission]]] = {}
    for row in rows:
        out.setdefault(row.who, {}).setdefault(row.group, []).append(row)
    return {who: list(groups.values()) for who, groups in out.items()}


def labels(groups: Mapping[str, list[list[Submission]]]) -> dict[str, str]:
    """A unique label per person: the name as last typed, "Ada (2)" for a second person typing it."""
    seen: Counter = Counter()
    out = {}
    for who, attempts_ in groups.items():
        name = attempts_[-1][-1].student
        seen[student_key(name)] += 1
        n = seen[student_key(name)]
        out[who] = name if n == 1 else f"{name} ({n})"
    return out


def gradebook(engine: Engine, code: Any, key: Any) -> Gradebook:
    """Students × items with the counting attempt's score per item (the rules say which: the latest by
    default), every row kept; requires the teacher key. Mistakes are counted over all attempts."""
    with engine.connect() as conn:
        assignment = _authorised(conn, code, key)
        rows = [_submission(r) for r in conn.execute(
            sa.select(submissions).where(submissions.c.assignment_code == assignment.code)
            .order_by(submissions.c.id)).all()]
        names_on_roster = tuple(conn.execute(sa.select(roster.c.name).where(
            roster.c.assignment_code == assignment.code).order_by(roster.c.position)).scalars())
        names_typed = tuple(conn.execute(sa.select(name_claims.c.name).where(
            name_claims.c.assignment_code == assignment.code)
            .order_by(name_claims.c.claimed_at, name_claims.c.student_key)).scalars())
    groups = people(rows)
    label = labels(groups)
    scores: dict[tuple[str, int], float | None] = {}
    when: dict[str, datetime] = {}
    for who, attempts_ in groups.items():
        for row in counted(attempts_, assignment.rules.counts):
            scores[(label[who], row.item_index)] = row.score
        when[label[who]] = attempts_[-1][-1].submitted_at
    counts: dict[int, Counter] = {}
    for row in rows:
        if row.misconception:
            counts.setdefault(row.item_index, Counter())[row.misconception] += 1
    return Gradebook(assignment=assignment, students=tuple(label[w] for w in groups), scores=scores,
                     misconceptions={i: c.most_common() for i, c in sorted(counts.items())},
                     submitted_at=when, rows=tuple(rows), roster=names_on_roster, typed=names_typed)


# ---------------------------------------------------------------- same-name duplicates, resolved by the teacher


def _rows_of(who: str) -> Any:
    """The submission rows of one person (older rows, without a person: their normalised name)."""
    return sa.func.coalesce(submissions.c.person, submissions.c.student_key) == who


def merge_people(engine: Engine, code: Any, key: Any, into: str, other: str) -> int:
    """The teacher says two people who typed the same name are one: `other`'s submissions become
    `into`'s (kept, every attempt; the rules' counting attempt is then chosen among all of them).
    Returns the rows moved. AccessDenied without the key; ValueError when either has no submission."""
    with writing(engine).begin() as conn:
        assignment = _authorised(conn, code, key)
        mine = submissions.c.assignment_code == assignment.code
        for who in (into, other):
            if conn.execute(sa.select(submissions.c.id).where(mine, _rows_of(who)).limit(1)).first() is None:
                raise ValueError(f"no submission of {who!r} in {assignment.code}")
        if into == other:
            return 0
        return conn.execute(sa.update(submissions).where(mine, _rows_of(other))
                            .values(person=str(into)[:120])).rowcount


def rename_person(engine: Engine, code: Any, key: Any, who: str, name: Any) -> int:
    """The teacher says they are different people: this person's submissions show `name` from now on
    (their attempts still count by the name typed). Returns the rows renamed; AssignmentError for a bad
    name, ValueError when the person has no submission, AccessDenied without the key."""
    cleaned = clean_student_name(name)
    with writing(engine).begin() as conn:
        assignment = _authorised(conn, code, key)
        mine = submissions.c.assignment_code == assignment.code
        if conn.execute(sa.select(submissions.c.id).where(mine, _rows_of(who)).limit(1)).first() is None:
            raise ValueError(f"no submission of {who!r} in {assignment.code}")
        # the person column is set too, so an older row keeps its identity when its name changes
        return conn.execute(sa.update(submissions).where(mine, _rows_of(who))
                            .values(student=cleaned, person=str(who)[:120])).rowcount


# ---------------------------------------------------------------- names held by browsers (no class list)


@dataclass(frozen=True)
class Clash:
    """A second browser that typed a name another browser holds: what the teacher decides on."""

    name: str  # as the second browser typed it
    student_key: str  # the name normalised (what attempts are counted by)
    ref: str  # which browser (a digest of its profile; the profile id stays private)
    at: datetime  # UTC
    holder: str  # the name as the holding browser typed it
    admitted: bool = False


def claim_name(engine: Engine, code: Any, student: Any, profile: str, at: datetime | None = None) -> bool:
    """Claim a typed name for a browser profile on an assignment without a class list: True when it is
    the profile's (first to type it, or admitted by the teacher); False when another profile holds it
    (the clash is listed for the teacher). With a class list the personal link says who it is: True."""
    code, name = parse_code(code), clean_student_name(student)
    with engine.connect() as conn:
        assignment, _ = _load(conn, code)
    if assignment.has_roster:
        return True
    return claims.claim(engine, code, student_key(name), str(profile)[:100], name, _utc_naive(at))


def clashes_of(engine: Engine, code: Any, key: Any) -> list[Clash]:
    """The clashes on the assignment's names, oldest first (AccessDenied without the teacher key)."""
    with engine.connect() as conn:
        assignment = _authorised(conn, code, key)
        rows = conn.execute(sa.select(name_clashes, name_claims.c.name.label("holder")).select_from(
            name_clashes.outerjoin(name_claims, sa.and_(name_claims.c.assignment_code == name_clashes.c.assignment_code,
                                                        name_claims.c.student_key == name_clashes.c.student_key)))
                            .where(name_clashes.c.assignment_code == assignment.code)
                            .order_by(name_clashes.c.at)).all()
    return [Clash(r.name, r.student_key, claims.profile_ref(r.profile), _aware(r.at), r.holder or r.name,
                  bool(r.admitted)) for r in rows]


def admit_clash(engine: Engine, code: Any, key: Any, who: str, ref: str) -> bool:
    """The teacher says the second browser is the same person: it may use the name too (its attempts
    count with the holder's). False when no such clash is listed."""
    with writing(engine).begin() as conn:
        assignment = _authorised(conn, code, key)
        mine = sa.and_(name_clashes.c.assignment_code == assignment.code, name_clashes.c.student_key == who)
        for profile in conn.execute(sa.select(name_clashes.c.profile).where(mine)).scalars():
            if claims.profile_ref(profile) == ref:
                conn.execute(sa.update(name_clashes).where(mine, name_clashes.c.profile == profile)
                             .values(admitted=True))
                return True
    return False


def release_name(engine: Engine, code: Any, key: Any, who: str) -> int:
    """The teacher says the browser holding the name is not that student: the name is free again (the
    next browser to type it holds it) and the submissions stored under it are set aside, kept and shown
    in the gradebook, but no longer counted as the name's attempts. Returns the rows set aside."""
    with writing(engine).begin() as conn:
        assignment = _authorised(conn, code, key)
        holder = conn.execute(sa.select(name_claims.c.profile).where(
            name_claims.c.assignment_code == assignment.code, name_claims.c.student_key == who)).scalar()
        aside = f"~{claims.profile_ref(holder or '')}:{who}"[:100]
        mine = submissions.c.assignment_code == assignment.code
        moved = conn.execute(sa.update(submissions).where(mine, submissions.c.student_key == who).values(
            student_key=aside, person=sa.func.coalesce(submissions.c.person, who))).rowcount
        for table in (name_claims, name_clashes, attempt_claims):
            conn.execute(sa.delete(table).where(table.c.assignment_code == assignment.code, table.c.student_key == who))
    return int(moved or 0)


# ---------------------------------------------------------------- a student's own attempts, openings


def attempts_of(engine: Engine, code: Any, student: Any) -> list[list[Submission]]:
    """A student's own attempts (rows per press of Submit, oldest first), by name or class-list entry:
    what a returning student is shown. No teacher key: only the student's own rows."""
    code, who = parse_code(code), student_key(student)
    with engine.connect() as conn:
        rows = [_submission(r) for r in conn.execute(sa.select(submissions).where(
            submissions.c.assignment_code == code, submissions.c.student_key == who).order_by(submissions.c.id))]
    groups: dict[str, list[Submission]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    return list(groups.values())


def opened(engine: Engine, code: Any, person: str, at: datetime | None = None) -> datetime:
    """When `person` first opened the assignment (recorded now if never): an exam's clock starts there."""
    code, person = parse_code(code), str(person)[:120]
    table = openings
    for _ in range(2):
        with engine.connect() as conn:
            first = conn.execute(sa.select(table.c.opened_at).where(
                table.c.assignment_code == code, table.c.person == person)).scalar()
        if first is not None:
            return _aware(first)
        try:
            with writing(engine).begin() as conn:
                _load(conn, code)
                conn.execute(sa.insert(table).values(assignment_code=code, person=person, opened_at=_utc_naive(at)))
        except sa.exc.IntegrityError:
            continue
    with engine.connect() as conn:
        return _aware(conn.execute(sa.select(table.c.opened_at).where(
            table.c.assignment_code == code, table.c.person == person)).scalar_one())


def _clock(who: str) -> str:
    """The openings row of a student's exam clock: one per student (their normalised name or class-list
    key), so a reload, a new browser or another replica finds the clock already running."""
    return "clock:" + who


def exam_clock(engine: Engine, code: Any, student: Any, at: datetime | None = None) -> datetime:
    """When `student`'s exam clock started on this assignment (started now if never; the first start
    wins when several sessions start it at once). Submissions past its time limit are refused. A
    class-list student's clock from before (kept under their key) still counts."""
    code, who = parse_code(code), student_key(student)
    with engine.connect() as conn:
        earlier = conn.execute(sa.select(openings.c.opened_at).where(
            openings.c.assignment_code == code, openings.c.person == who)).scalar()
    return _aware(earlier) if earlier is not None else opened(engine, code, _clock(who), at)


def open_exams_giving(engine: Engine, prints: Iterable[str], at: datetime | None = None) -> list[str]:
    """The codes of exams still taking answers (or not open yet) with an item whose given matrices are
    all among these fingerprints (storage.fingerprints): Check my work and Practice refuse to compute it."""
    codes = fingerprints.matching(engine, prints)
    if not codes:
        return []
    now = _aware(_utc_naive(at))
    with engine.connect() as conn:
        rows = conn.execute(sa.select(assignments.c.code, assignments.c.rules).where(
            assignments.c.code.in_(sorted(codes)))).all()
    out = []
    for row in rows:
        rules = make_rules(row.rules)
        if rules.exam and not rules.closed and (rules.deadline is None or now <= rules.deadline):
            out.append(row.code)
    return sorted(out)


# ---------------------------------------------------------------- class lists and personal links


def _token_hash(token: str) -> str:
    return hashlib.sha256(b"roster\x1f" + token.encode()).hexdigest()


def set_roster(engine: Engine, code: Any, key: Any, names: Iterable[Any]) -> dict[str, str]:
    """Attach a class list (replacing any earlier one): {name: personal token}, shown once — only
    their SHA-256 is stored, so a list issued again makes the old links stop working."""
    cleaned = [clean_student_name(n) for n in names]
    if len({student_key(n) for n in cleaned}) != len(cleaned):
        raise ValueError("a class list names one student twice")  # services say so first, in words
    tokens = {n: secrets.token_urlsafe(16) for n in cleaned}
    at = _utc_naive(None)
    with writing(engine).begin() as conn:
        assignment = _authorised(conn, code, key)
        conn.execute(sa.delete(roster).where(roster.c.assignment_code == assignment.code))
        if tokens:
            conn.execute(sa.insert(roster), [
                {"assignment_code": assignment.code, "student_key": student_key(n), "name": n, "position": i,
                 "token_hash": _token_hash(t), "issued_at": at} for i, (n, t) in enumerate(tokens.items())])
    return tokens


def roster_names(engine: Engine, code: Any) -> tuple[str, ...]:
    code = parse_code(code)
    with engine.connect() as conn:
        return tuple(conn.execute(sa.select(roster.c.name).where(roster.c.assignment_code == code)
                                  .order_by(roster.c.position)).scalars())


def student_for_token(engine: Engine, code: Any, token: Any) -> str | None:
    """The class-list name a personal link's token belongs to, or None (unknown or issued again since)."""
    code = parse_code(code)
    text = str(token or "").strip()
    if not 10 <= len(text) <= 64:
        return None
    with engine.connect() as conn:
        return conn.execute(sa.select(roster.c.name).where(roster.c.assignment_code == code,
                                                           roster.c.token_hash == _token_hash(text))).scalar()


# ---------------------------------------------------------------- the teacher's dashboard


def assignments_of(engine: Engine, key: Any) -> list[Assignment]:
    """Every assignment the teacher key owns, newest first (MalformedKey for text that is no key)."""
    key = parse_key(key)
    owner = owner_id(engine, key)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(assignments).where(assignments.c.owner == owner)
                            .order_by(assignments.c.created_at.desc())).all()
        found = [_assignment(r, _has_roster(conn, r.code)) for r in rows if check_key(key, r.key_hash)]
    return found


def submission_count(engine: Engine, code: Any) -> int:
    code = parse_code(code)
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(submissions)
                                .where(submissions.c.assignment_code == code)).scalar() or 0)


def started(conn: Connection, code: str) -> bool:
    """Has a student opened the assignment, or been given their own exercises (their sheet printed)?"""
    opened_ = conn.execute(sa.select(openings.c.person).where(openings.c.assignment_code == code).limit(1)).first()
    own = conn.execute(sa.select(assignment_exercises.c.item_index).where(
        assignment_exercises.c.assignment_code == code, assignment_exercises.c.student_key != "").limit(1)).first()
    return opened_ is not None or own is not None


def assignment_started(engine: Engine, code: Any) -> bool:
    """started() for an assignment code, on a connection of its own."""
    with engine.connect() as conn:
        return started(conn, parse_code(code))


def update_assignment(engine: Engine, code: Any, key: Any, title: Any = None, rules: Any = None,
                      allow_solutions: bool | None = None, items: Any = None, exercises: Iterable[Any] = (),
                      per_student: bool | None = None,
                      kind_versions: Mapping[str, int] | None = None) -> Assignment:
    """Change the title, rules (opening, deadline, exam, time limit, …) or solutions switch at any time; the
    items only while nobody has submitted (Locked "submitted"), and once a student has started only by
    adding exercises after the last one (Locked "started"): an exercise already stored for a class or a
    student — what they saw, what their answers are graded against — is never replaced. The per-student
    switch changes only before anyone started. `exercises`: the class set of the new items (one per slot;
    only the slots that are new or changed are stored); `kind_versions` as for create_assignment, for new
    items. AccessDenied without the key."""
    with writing(engine).begin() as conn:
        assignment = _authorised(conn, code, key)
        values: dict[str, Any] = {}
        if title is not None:
            values["title"] = make_spec(title, assignment.items, assignment.seed).title
        if rules is not None:
            values["rules"] = make_rules(rules).to_dict()
        if allow_solutions is not None:
            values["allow_solutions"] = bool(allow_solutions)
        new = parse_items(items) if items is not None else assignment.items
        switch = per_student is not None and bool(per_student) != assignment.per_student
        if new != assignment.items or switch:
            done = conn.execute(sa.select(sa.func.count()).select_from(submissions)
                                .where(submissions.c.assignment_code == assignment.code)).scalar()
            if done:
                raise Locked(assignment.code, "submitted")
            kept = 0 if switch else unchanged_slots(assignment.items, new)  # these keep their stored exercises
            if started(conn, assignment.code) and (switch or kept < assignment.item_count):
                raise Locked(assignment.code, "started")
            old_rows = {(i.kind, i.level, i.count): v for i, v in zip(assignment.items, assignment.versions)}
            values["items"] = [{**i.to_dict(), "version": old_rows.get((i.kind, i.level, i.count))
                                or _version((kind_versions or {}).get(i.kind))} for i in new]
            if switch:
                values["per_student"] = bool(per_student)
            table = assignment_exercises
            conn.execute(sa.delete(table).where(table.c.assignment_code == assignment.code,
                                                table.c.item_index >= kept))
            fingerprints.forget(conn, assignment.code, kept)
            given = dict(exercises) if isinstance(exercises, Mapping) else dict(enumerate(exercises))
            stored = {int(i): _exercise_json(e) for i, e in given.items() if kept <= int(i) < len(slots(new))}
            if stored and not (per_student if switch else assignment.per_student):
                conn.execute(sa.insert(table), [
                    {"assignment_code": assignment.code, "student_key": "", "item_index": i,
                     "version": int(ex["version"]), "exercise": ex, "stored_at": _utc_naive(None)}
                    for i, ex in sorted(stored.items())])
                fingerprints.store(conn, assignment.code, "", stored)
        if values:
            conn.execute(sa.update(assignments).where(assignments.c.code == assignment.code).values(**values))
        row = conn.execute(sa.select(assignments).where(assignments.c.code == assignment.code)).first()
        return _assignment(row, _has_roster(conn, assignment.code))


def delete_assignment(engine: Engine, code: Any, key: Any) -> None:
    """Delete an assignment with everything stored for it (AccessDenied without the key)."""
    with writing(engine).begin() as conn:
        assignment = _authorised(conn, code, key)
        for table in (submissions, attempt_claims, name_claims, name_clashes, given_fingerprints, assignment_exercises,
                      roster, openings):
            conn.execute(sa.delete(table).where(table.c.assignment_code == assignment.code))
        conn.execute(sa.delete(assignments).where(assignments.c.code == assignment.code))


# ---------------------------------------------------------------- practice attempts (progress)


def _profile(profile: Any) -> str:
    text = " ".join(str(profile or "").split())
    if not text or len(text) > MAX_PROFILE:
        raise ValueError(f"a profile name has 1 to {MAX_PROFILE} characters")
    return text


def record_attempt(engine: Engine, profile: str, kind: str, level: int, seed: int, score: float | None,
                   misconception: str | None, hints_used: int, seconds: float,
                   at: datetime | float | None = None, version: int | None = None, exercise: Any = None,
                   solution_shown: bool | None = None) -> int:
    """Store one graded practice attempt under a local profile name, with the exercise attempted and
    its generator version; returns its id once committed."""
    row = {"profile": _profile(profile), "kind": str(kind), "level": int(level), "seed": int(seed),
           "score": None if score is None else float(score), "misconception": misconception,
           "hints_used": int(hints_used), "seconds": float(seconds), "at": _utc_naive(at),
           "version": _version(version), "exercise": _exercise_json(exercise),
           "solution_shown": None if solution_shown is None else bool(solution_shown)}
    with writing(engine).begin() as conn:
        return int(conn.execute(sa.insert(attempts).values(**row)).inserted_primary_key[0])


def list_attempts(engine: Engine, profile: str) -> list[Attempt]:
    """A profile's attempts, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(sa.select(attempts).where(attempts.c.profile == _profile(profile))
                            .order_by(attempts.c.at, attempts.c.id)).all()
    return [Attempt(id=int(r.id), profile=r.profile, kind=r.kind, level=int(r.level), seed=int(r.seed),
                    score=r.score, misconception=r.misconception, hints_used=int(r.hints_used),
                    seconds=float(r.seconds), at=_aware(r.at), version=r.version, exercise=r.exercise,
                    solution_shown=r.solution_shown)
            for r in rows]
