"""Spaced, mastery-based practice with FSRS, the Free Spaced Repetition Scheduler (`fsrs`).

Each (kind, level) is a card; every graded attempt is a review of its card, rated from the score, the
hints opened, whether the worked solution was open before answering, and the time taken. The cards are
replayed from the stored attempts (the attempts are the review log), so the schedule needs no table of
its own and every attempt stored before this module existed counts too.

    table = review.cards(attempts)                        # {(kind, level): Card}
    review.up_next(attempts, list(exercises.KINDS), now)  # what Home suggests
    review.due_count(table, now), review.mastery(table, now)

A review is one new attempt: Practice records a check only when the answer changed or the problem is
new, so checking the same answer again is no review. A card is mastered when it is passed, its stability
reaches MASTERED_DAYS, and it was passed on at least two different problems on different days.

Up next is the most overdue card (a failed card comes back within minutes, one level easier while that
level is not passed, and says so), else the next new stage of the pipeline at the level passed on the
stage before it, else a passed topic one level up, else the card whose predicted recall is lowest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import fsrs

import exercises

AGAIN, HARD, GOOD, EASY = fsrs.Rating.Again, fsrs.Rating.Hard, fsrs.Rating.Good, fsrs.Rating.Easy
PASS_SCORE = 0.6  # below it an attempt is a lapse (Again)
GOOD_SCORE = 0.9  # below it (or with two hints or more) a recall with difficulty (Hard)
QUICK_SECONDS = {1: 120.0, 2: 240.0, 3: 420.0}  # a perfect answer without hints within this is Easy
MASTERED_DAYS = 21.0  # a card whose stability reaches this many days counts as mastered

# One learning step and one relearning step of a few minutes: a failed exercise comes back within the
# session; a passed one graduates to days. No fuzzing, so the schedule is a function of the attempts.
RETRY = timedelta(minutes=3)
SCHEDULER = fsrs.Scheduler(learning_steps=(RETRY,), relearning_steps=(RETRY,), maximum_interval=365,
                           enable_fuzzing=False)


def rating(attempt: Any) -> fsrs.Rating:
    """A graded attempt's rating: Again (score below PASS_SCORE, or the solution was open before
    answering), Hard (below GOOD_SCORE, or two hints or more), Easy (a full score without hints, quickly),
    else Good."""
    score = float(attempt.score)
    hints = int(getattr(attempt, "hints_used", 0) or 0)
    if getattr(attempt, "solution_shown", None) or score < PASS_SCORE:
        return AGAIN
    if score < GOOD_SCORE or hints >= 2:
        return HARD
    seconds = float(getattr(attempt, "seconds", 0.0) or 0.0)
    quick = QUICK_SECONDS.get(int(attempt.level), max(QUICK_SECONDS.values()))
    if hints == 0 and score >= 1.0 and 0.0 < seconds <= quick:
        return EASY
    return GOOD


def _utc(at: Any) -> datetime:
    if isinstance(at, (int, float)):
        return datetime.fromtimestamp(float(at), UTC)
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


@dataclass(frozen=True)
class Card:
    """One (kind, level) card after its reviews."""

    kind: str
    level: int
    card: fsrs.Card
    reviews: int
    last_rating: fsrs.Rating
    lapses: int
    passes: frozenset = frozenset()  # (problem, day) of every attempt that was not a lapse
    last_at: datetime | None = None  # the latest review

    @property
    def due(self) -> datetime:
        return self.card.due

    @property
    def stability(self) -> float:
        """Days until predicted recall falls to 90%."""
        return float(self.card.stability or 0.0)

    @property
    def passed(self) -> bool:
        """Graduated: the latest reviews were recalls (FSRS's Review state)."""
        return self.card.state == fsrs.State.Review

    @property
    def mastered(self) -> bool:
        """Passed, stable for MASTERED_DAYS, and passed on two different problems on different days."""
        spread = any(p != q and d != e for p, d in self.passes for q, e in self.passes)
        return self.passed and self.stability >= MASTERED_DAYS and spread

    def recall(self, now: datetime) -> float:
        """The predicted probability of recalling the card now."""
        return float(SCHEDULER.get_card_retrievability(self.card, _utc(now)))

    def is_due(self, now: datetime) -> bool:
        return self.due <= _utc(now)

    def export(self, now: datetime) -> dict[str, Any]:
        return {"reviews": self.reviews, "lapses": self.lapses, "last_rating": self.last_rating.name.lower(),
                "state": self.card.state.name.lower(), "stability_days": self.stability,
                "difficulty": self.card.difficulty, "due": self.due.isoformat(), "recall_now": self.recall(now)}


def cards(rows: Iterable[Any]) -> dict[tuple[str, int], Card]:
    """Every (kind, level) card, replayed from the graded attempts in time order."""
    table: dict[tuple[str, int], Card] = {}
    graded = sorted((a for a in rows if a.score is not None), key=lambda a: _utc(a.at))
    for a in graded:
        key = (str(a.kind), int(a.level))
        before = table.get(key)
        given = rating(a)
        at = _utc(a.at)
        card, _log = SCHEDULER.review_card(before.card if before else fsrs.Card(card_id=len(table) + 1), given, at)
        passes = before.passes if before else frozenset()
        if given != AGAIN:  # a problem is its seed; an attempt stored without one counts as a problem of its own
            seed = getattr(a, "seed", None)
            passes = passes | {(("attempt", id(a)) if seed is None else seed, at.date())}
        table[key] = Card(key[0], key[1], card, (before.reviews if before else 0) + 1, given,
                          (before.lapses if before else 0) + (given == AGAIN), passes, at)
    return table


def due_cards(table: Mapping[tuple[str, int], Card], now: datetime, kinds: Sequence[str] | None = None) -> list[Card]:
    """The cards due now, most overdue first (topics that no longer exist left out)."""
    live = set(exercises.KINDS) if kinds is None else set(kinds)
    return sorted((c for c in table.values() if c.kind in live and c.is_due(now)), key=lambda c: (c.due, c.kind))


def due_count(table: Mapping[tuple[str, int], Card], now: datetime, kinds: Sequence[str] | None = None) -> int:
    return len(due_cards(table, now, kinds))


def passed_level(table: Mapping[tuple[str, int], Card], kind: str) -> int | None:
    """The highest level of a topic whose card is passed, or None."""
    levels = [level for (k, level), c in table.items() if k == kind and c.passed]
    return max(levels) if levels else None


@dataclass(frozen=True)
class Next:
    """What to practise next, and why: "start" (a new learner), "review" (the most overdue card), "again"
    (a card failed a few minutes ago, at its level), "easier" (a failed card, one level down), "new" (the
    next new stage), "level_up", or "ahead" (nothing due: the card whose predicted recall is lowest)."""

    kind: str
    level: int
    reason: str
    due: datetime | None = None
    recall: float | None = None
    minutes_ago: int | None = None  # for a failed card: since it was failed


def _levels(kind: str) -> tuple[int, ...]:
    found = exercises.KINDS.get(kind)
    return tuple(found.LEVELS) if found is not None else (1,)


def _at_level(kind: str, level: int) -> int:
    """`level` if the topic offers it, else the nearest level it offers below (or its first)."""
    offered = _levels(kind)
    below = [lv for lv in offered if lv <= level]
    return max(below) if below else offered[0]


def up_next(rows: Iterable[Any], kinds: Sequence[str], now: datetime) -> Next:
    """Home's "Up next" for a learner's attempts at time `now` (see the module's docstring)."""
    table = cards(rows)
    return next_from(table, kinds, now)


def next_from(table: Mapping[tuple[str, int], Card], kinds: Sequence[str], now: datetime) -> Next:
    table = {key: c for key, c in table.items() if c.kind in kinds}
    if not table:
        return Next(kinds[0], _levels(kinds[0])[0], "start")
    due = due_cards(table, now, kinds)
    if due:
        card = due[0]
        if card.last_rating == AGAIN:
            ago = max(0, int((_utc(now) - card.last_at) / timedelta(minutes=1))) if card.last_at else None
            lower = [lv for lv in _levels(card.kind) if lv < card.level]
            if lower:
                easier = max(lower)
                below = table.get((card.kind, easier))
                if below is None or not below.passed or below.is_due(now):
                    return Next(card.kind, easier, "easier", card.due, card.recall(now), ago)
            return Next(card.kind, card.level, "again", card.due, card.recall(now), ago)
        return Next(card.kind, card.level, "review", card.due, card.recall(now))
    tried = {c.kind for c in table.values()}
    for i, kind in enumerate(kinds):
        if kind not in tried:
            before = passed_level(table, kinds[i - 1]) if i else None
            return Next(kind, _at_level(kind, before or 1), "new")
    for kind in kinds:
        top = passed_level(table, kind)
        higher = [lv for lv in _levels(kind) if top is not None and lv > top]
        if top is not None and higher and all(c.passed for (k, _), c in table.items() if k == kind):
            return Next(kind, min(higher), "level_up")
    weakest = min(table.values(), key=lambda c: (c.recall(now), kinds.index(c.kind), c.level))
    return Next(weakest.kind, weakest.level, "ahead", weakest.due, weakest.recall(now))


@dataclass(frozen=True)
class Mastery:
    """A topic's standing in the schedule: its highest passed level, and per level the card."""

    kind: str
    level: int | None  # the highest level passed (None: none yet)
    cards: tuple[Card, ...]  # its cards, by level


def mastery(table: Mapping[tuple[str, int], Card]) -> list[Mastery]:
    """One entry per topic with cards, in the order of the kind registry (retired topics last)."""
    order = {kind: i for i, kind in enumerate(exercises.KINDS)}
    kinds = sorted({c.kind for c in table.values()}, key=lambda k: (order.get(k, len(order)), k))
    return [Mastery(kind, passed_level(table, kind),
                    tuple(sorted((c for c in table.values() if c.kind == kind), key=lambda c: c.level)))
            for kind in kinds]
