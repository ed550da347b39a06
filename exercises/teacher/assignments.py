"""Assignments: a teacher's list of items (kind, level, count), expanded into exercises.

Item i of an assignment is generated from a seed derived from (assignment seed, i) — or, for
per-student variants, from (assignment seed, normalised student name, i) — with a stable hash, so
the same assignment gives the same exercises in any process on any machine, each student their own.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..core import engine
from ..core.model import Exercise
from ..i18n import Msg, msg

MAX_TITLE = 120  # characters
MAX_NAME = 80  # characters of a student's name
MAX_COUNT = 20  # exercises per item row
MAX_ITEMS = 40  # exercises per assignment
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class AssignmentError(ValueError):
    """An assignment, item list or student name that cannot be used. `message` is a catalog Msg."""

    def __init__(self, message: Msg):
        super().__init__(str(message))
        self.message = message


@dataclass(frozen=True)
class ItemSpec:
    """`count` exercises of one kind at one level."""

    kind: str
    level: int
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "level": self.level, "count": self.count}


@dataclass(frozen=True)
class Slot:
    """One exercise of an assignment: its position (0-based), kind and level."""

    index: int
    kind: str
    level: int


@dataclass(frozen=True)
class AssignmentSpec:
    """What a teacher chose; everything needed to rebuild every student's exercises."""

    title: str
    items: tuple[ItemSpec, ...]
    seed: int
    per_student: bool = False
    allow_solutions: bool = False

    def slots(self) -> list[Slot]:
        return slots(self.items)

    def seeds(self, student: str | None = None, secret: bytes = b"") -> list[tuple[Slot, int]]:
        """(slot, exercise seed) of every exercise: the class's, or `student`'s own; with the server's
        `secret` (services pass it) nobody without it can work the seeds out."""
        return variant_seeds(self.items, self.seed, self.per_student, student, secret)

    def exercises(self, student: str | None = None, secret: bytes = b"") -> list[Exercise]:
        """The exercises, in order: the class's set, or `student`'s own when variants are per student."""
        return build_exercises(self.items, self.seed, self.per_student, student, secret)

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "items": [i.to_dict() for i in self.items], "seed": self.seed,
                "per_student": self.per_student, "allow_solutions": self.allow_solutions}


# ---------------------------------------------------------------- validation


def clean_title(title: Any) -> str:
    text = " ".join(_CONTROL.sub(" ", unicodedata.normalize("NFKC", str(title or ""))).split())
    if not text:
        raise AssignmentError(msg("assignment.error.title_empty"))
    if len(text) > MAX_TITLE:
        raise AssignmentError(msg("assignment.error.title_long", limit=MAX_TITLE))
    return text


def clean_student_name(name: Any) -> str:
    """A student's name as shown: NFKC, spaces collapsed; empty, too long or control characters rejected."""
    raw = unicodedata.normalize("NFKC", str(name or ""))
    if _CONTROL.search(raw.strip()):
        raise AssignmentError(msg("assignment.error.name_chars"))
    text = " ".join(raw.split())
    if not text:
        raise AssignmentError(msg("assignment.error.name_empty"))
    if len(text) > MAX_NAME:
        raise AssignmentError(msg("assignment.error.name_long", limit=MAX_NAME))
    return text


def student_key(name: Any) -> str:
    """The identity of a student: the cleaned name, case-folded ("Ada  Lovelace" = "ada lovelace")."""
    return clean_student_name(name).casefold()


def parse_items(raw: Iterable[ItemSpec | Mapping[str, Any]]) -> tuple[ItemSpec, ...]:
    """Check an item list (ItemSpecs or dicts with kind, level, count) against the kind registry."""
    items = []
    for row in raw:
        if isinstance(row, ItemSpec):
            kind, level, count = row.kind, row.level, row.count
        elif isinstance(row, Mapping):
            kind, level, count = row.get("kind"), row.get("level"), row.get("count", 1)
        else:
            raise AssignmentError(msg("assignment.error.item_shape"))
        if kind not in engine.KINDS:
            raise AssignmentError(msg("assignment.error.kind", kind=str(kind), kinds=", ".join(engine.KINDS)))
        try:
            level, count = int(level), int(count)
        except (TypeError, ValueError):
            raise AssignmentError(msg("assignment.error.item_shape")) from None
        if level not in engine.KINDS[kind].LEVELS:
            raise AssignmentError(msg("assignment.error.level", kind=kind,
                                      levels=", ".join(map(str, engine.KINDS[kind].LEVELS))))
        if not 1 <= count <= MAX_COUNT:
            raise AssignmentError(msg("assignment.error.count", limit=MAX_COUNT))
        items.append(ItemSpec(kind, level, count))
    if not items:
        raise AssignmentError(msg("assignment.error.no_items"))
    if sum(i.count for i in items) > MAX_ITEMS:
        raise AssignmentError(msg("assignment.error.too_many", limit=MAX_ITEMS))
    return tuple(items)


def parse_seed(seed: Any) -> int:
    try:
        value = int(str(seed).strip())
    except (TypeError, ValueError):
        raise AssignmentError(msg("assignment.error.seed", limit=engine.MAX_SEED - 1)) from None
    if not 0 <= value < engine.MAX_SEED:
        raise AssignmentError(msg("assignment.error.seed", limit=engine.MAX_SEED - 1))
    return value


def make_spec(title: Any, items: Iterable[ItemSpec | Mapping[str, Any]], seed: Any,
              per_student: bool = False, allow_solutions: bool = False) -> AssignmentSpec:
    """A checked AssignmentSpec; raises AssignmentError with a catalog message."""
    return AssignmentSpec(clean_title(title), parse_items(items), parse_seed(seed),
                          bool(per_student), bool(allow_solutions))


# ---------------------------------------------------------------- expansion


def slots(items: Iterable[ItemSpec]) -> list[Slot]:
    """The exercises of an item list in order: item (softmax, 2, count 3) gives three slots."""
    out: list[Slot] = []
    for item in items:
        for _ in range(item.count):
            out.append(Slot(len(out), item.kind, item.level))
    return out


def unchanged_slots(old: Iterable[ItemSpec], new: Iterable[ItemSpec]) -> int:
    """How many leading exercises two item lists share (the same kind and level at the same place):
    when a teacher edits the items, those keep the exercises already stored for them."""
    a, b = slots(old), slots(new)
    kept = 0
    while kept < min(len(a), len(b)) and (a[kept].kind, a[kept].level) == (b[kept].kind, b[kept].level):
        kept += 1
    return kept


def item_seed(seed: int, index: int, student: str | None = None, secret: bytes = b"") -> int:
    """The exercise seed of slot `index`: a stable hash of (seed, student key or nothing, index),
    keyed with the server's `secret` when one is given (then Practice cannot be asked for it)."""
    who = "" if student is None else student_key(student)
    digest = hashlib.blake2b(f"{seed}\x1f{who}\x1f{index}".encode(), digest_size=8, person=b"attn-assign",
                             key=bytes(secret)[:64]).digest()
    return int.from_bytes(digest, "big") % engine.MAX_SEED


def variant_seeds(items: Iterable[ItemSpec], seed: int, per_student: bool,
                  student: str | None = None, secret: bytes = b"") -> list[tuple[Slot, int]]:
    """(slot, exercise seed) of every exercise, for one student (per-student variants) or the class."""
    if per_student and student is None:
        raise AssignmentError(msg("assignment.error.name_empty"))
    who = student if per_student else None
    return [(slot, item_seed(seed, slot.index, who, secret)) for slot in slots(items)]


def build_exercises(items: Iterable[ItemSpec], seed: int, per_student: bool,
                    student: str | None = None, secret: bytes = b"") -> list[Exercise]:
    """Every exercise of the assignment for one student (per-student variants) or for the class."""
    return [engine.generate(slot.kind, s, slot.level)
            for slot, s in variant_seeds(items, seed, per_student, student, secret)]


# ---------------------------------------------------------------- attempt rules


COUNTS = ("first", "best", "last")  # which attempt counts in the gradebook
RELEASES = ("final", "manual")  # exam marks: shown after the final attempt, or when the teacher releases them
MAX_ATTEMPTS = 20
MAX_MINUTES = 600


@dataclass(frozen=True)
class Rules:
    """How an assignment may be submitted. attempts 0: unlimited; times are aware UTC datetimes or None;
    time_limit in minutes (0: none), counted from a student's first opening."""

    attempts: int = 1
    counts: str = "last"
    opens_at: datetime | None = None
    deadline: datetime | None = None
    closed: bool = False
    exam: bool = False
    release: str = "final"
    released: bool = False
    time_limit: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"attempts": self.attempts, "counts": self.counts,
                "opens_at": None if self.opens_at is None else self.opens_at.isoformat(),
                "deadline": None if self.deadline is None else self.deadline.isoformat(),
                "closed": self.closed, "exam": self.exam, "release": self.release, "released": self.released,
                "time_limit": self.time_limit}

    def marks_visible(self, final_attempt: bool) -> bool:
        """May a student see per-cell marks now? Always outside exams; in an exam once released, or
        after their final attempt when the teacher chose that."""
        if not self.exam:
            return True
        return self.released or (self.release == "final" and final_attempt)


LEGACY_RULES = Rules(attempts=0, counts="last")  # assignments stored before rules existed


def _when(value: Any) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise AssignmentError(msg("assignment.error.time")) from None
    if not isinstance(value, datetime):
        raise AssignmentError(msg("assignment.error.time"))
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def make_rules(raw: Rules | Mapping[str, Any] | None = None) -> Rules:
    """Checked Rules from a Rules or a dict (None: the legacy ones); AssignmentError when bad."""
    if raw is None:
        return LEGACY_RULES
    if isinstance(raw, Rules):
        raw = raw.to_dict()
    try:
        attempts = int(raw.get("attempts", 1) or 0)
        time_limit = int(raw.get("time_limit", 0) or 0)
    except (TypeError, ValueError):
        raise AssignmentError(msg("assignment.error.attempts", limit=MAX_ATTEMPTS)) from None
    if not 0 <= attempts <= MAX_ATTEMPTS:
        raise AssignmentError(msg("assignment.error.attempts", limit=MAX_ATTEMPTS))
    if not 0 <= time_limit <= MAX_MINUTES:
        raise AssignmentError(msg("assignment.error.time_limit", limit=MAX_MINUTES))
    counts = str(raw.get("counts", "last"))
    release = str(raw.get("release", "final"))
    if counts not in COUNTS or release not in RELEASES:
        raise AssignmentError(msg("assignment.error.item_shape"))
    opens_at, deadline = _when(raw.get("opens_at")), _when(raw.get("deadline"))
    if opens_at is not None and deadline is not None and deadline <= opens_at:
        raise AssignmentError(msg("assignment.error.deadline_order"))
    return Rules(attempts, counts, opens_at, deadline, bool(raw.get("closed", False)), bool(raw.get("exam", False)),
                 release, bool(raw.get("released", False)), time_limit)
