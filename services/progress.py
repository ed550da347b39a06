"""A learner's progress without Streamlit: practice attempts stored and read back under a private
profile (services.profiles), and what they add up to (standings per topic, mistakes, the chart's data;
what comes next is services.review's spaced schedule).

The summaries are plain functions of a list of attempts (anything with kind, level, score,
misconception, hints_used, seconds, at), so they are tested on plain rows.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

import exercises
import storage

from . import db, profiles

RECENT = 5  # a topic's standing is judged on its last few attempts
MASTERED = 0.8  # mean score over the recent attempts at which a topic counts as done


# ---------------------------------------------------------------- the store


def record_attempt(profile: str, entry: Mapping[str, Any], secret: str | None = None,
                   browser: str | None = None) -> int | None:
    """Store one graded attempt (a ui.attempts record: kind, level, seed, score, misconception,
    hints_used, seconds, at, solution_shown, and the exercise with its version); None when it was not graded.
    `secret`, `browser`: the browser's profile secret and own id; the attempt is filed only when the
    secret was issued to this browser (or its user confirmed the profile), else profiles.NotConfirmed.
    db.Unavailable (or ValueError for a bad profile) when it could not be stored."""
    if entry.get("score") is None:
        return None
    if secret is not None and not profiles.may_file(profile, secret, browser):
        raise profiles.NotConfirmed(profile)
    exercise = entry.get("exercise")
    version = entry.get("version", exercise.get("version") if isinstance(exercise, Mapping) else None)
    with db.guarded():
        return storage.record_attempt(db.engine(), profile, entry["kind"], int(entry["level"]), int(entry["seed"]),
                                      float(entry["score"]), entry.get("misconception"),
                                      int(entry.get("hints_used") or 0), float(entry.get("seconds") or 0.0),
                                      entry.get("at"), version=version, exercise=exercise,
                                      solution_shown=bool(entry.get("solution_shown")))


def attempts(profile: str) -> list[storage.Attempt]:
    """All stored attempts of a profile, oldest first; db.Unavailable when the database is not there."""
    with db.guarded():
        return storage.list_attempts(db.engine(), profile)


# ---------------------------------------------------------------- summaries


@dataclass(frozen=True)
class Standing:
    """How a learner stands on one topic."""

    attempts: int
    best: float
    mean: float
    recent: float  # mean of the last RECENT attempts
    level: int  # the level of the latest attempt


@dataclass(frozen=True)
class Totals:
    attempts: int
    mean: float
    seconds: float


def _scored(rows: Iterable[Any]) -> list[Any]:
    return [a for a in rows if a.score is not None]


def standings(rows: Iterable[Any]) -> dict[str, Standing]:
    """{kind: Standing} for every topic with at least one graded attempt."""
    by_kind: dict[str, list[Any]] = defaultdict(list)
    for a in _scored(rows):
        by_kind[a.kind].append(a)
    result = {}
    for kind, tried in by_kind.items():
        scores = [float(a.score) for a in tried]
        recent = scores[-RECENT:]
        result[kind] = Standing(len(tried), max(scores), sum(scores) / len(scores), sum(recent) / len(recent),
                                int(tried[-1].level))
    return result


def top_mistakes(rows: Iterable[Any], limit: int = 5) -> list[tuple[str, int]]:
    """The misconceptions named most often, most common first (ties: the most recent first)."""
    found = [a.misconception for a in rows if a.misconception]
    counts = Counter(found)
    last_seen = {mid: i for i, mid in enumerate(found)}
    return sorted(counts.items(), key=lambda item: (-item[1], -last_seen[item[0]]))[:limit]


def totals(rows: Sequence[Any]) -> Totals:
    scored = _scored(rows)
    mean = sum(float(a.score) for a in scored) / len(scored) if scored else 0.0
    return Totals(len(scored), mean, sum(float(a.seconds or 0.0) for a in scored))


def accuracy_frame(rows: Iterable[Any], label: Callable[[str], str] = str) -> pd.DataFrame:
    """One row per graded attempt: when, topic (labelled), level, score, its number among the topic's
    attempts (1, 2, …: a topic's history reads evenly, however the attempts fall in time) and the
    topic's running accuracy (mean of its last RECENT scores up to then)."""
    out = []
    history: dict[str, list[float]] = defaultdict(list)
    for a in _scored(rows):
        history[a.kind].append(float(a.score))
        recent = history[a.kind][-RECENT:]
        out.append({"at": a.at, "kind": a.kind, "topic": label(a.kind), "level": int(a.level),
                    "score": float(a.score), "number": len(history[a.kind]), "accuracy": sum(recent) / len(recent)})
    return pd.DataFrame(out, columns=["at", "kind", "topic", "level", "score", "number", "accuracy"])


def in_pipeline_order(table: dict[str, Standing]) -> list[tuple[str, Standing]]:
    """The topics tried, in the order of the kind registry (retired topics last)."""
    order = {kind: i for i, kind in enumerate(exercises.KINDS)}
    return sorted(table.items(), key=lambda item: order.get(item[0], len(order)))
