"""services.progress without Streamlit: the summaries of a list of attempts, and attempts stored
and read back with the very exercise attempted."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

import exercises
import storage
from services import db as services_db
from services import progress

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@dataclass
class Row:
    kind: str
    score: float | None
    misconception: str | None = None
    level: int = 1
    at: datetime = T0
    hints_used: int = 0
    seconds: float = 60.0


def rows(*specs) -> list[Row]:
    return [Row(*spec, at=T0 + timedelta(minutes=i)) if isinstance(spec, tuple) else spec
            for i, spec in enumerate(specs)]


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "progress.sqlite3"))
    return services_db.engine()


# ---------------------------------------------------------------- pure summaries (moved from test_progress)


def test_standings_count_best_mean_recent_and_last_level():
    table = progress.standings(rows(("softmax", 0.0), ("softmax", 1.0), ("scores", 0.5),
                                    Row("softmax", 0.5, level=2, at=T0 + timedelta(hours=1)),
                                    ("masking", None)))
    assert set(table) == {"softmax", "scores"}, "ungraded attempts do not count"
    s = table["softmax"]
    assert (s.attempts, s.best, s.mean, s.level) == (3, 1.0, 0.5, 2)
    recent = progress.standings(rows(*[("scores", 0.0)] * 3, *[("scores", 1.0)] * progress.RECENT))["scores"]
    assert recent.recent == 1.0 and recent.mean < 1.0, "recent looks at the last attempts only"


def test_top_mistakes_most_common_first_ties_by_recency():
    found = progress.top_mistakes(rows(("scores", 0, "transposed_scores"), ("softmax", 0, "no_exp"),
                                       ("softmax", 0, "softmax_columns"), ("softmax", 0, "no_exp"),
                                       ("softmax", 1.0), ("scores", 0, "transposed_scores"),
                                       ("softmax", 0, "softmax_columns")))
    assert found == [("softmax_columns", 2), ("transposed_scores", 2), ("no_exp", 2)], \
        "of equal counts, the most recently made mistake comes first"
    assert progress.top_mistakes(rows(("softmax", 1.0))) == []
    assert len(progress.top_mistakes(rows(*[("s", 0, f"m{i}") for i in range(9)]), limit=3)) == 3


def test_accuracy_frame_is_a_running_mean_per_topic():
    frame = progress.accuracy_frame(rows(("softmax", 0.0), ("scores", 1.0), ("softmax", 1.0), ("softmax", 0.5)),
                                    label=str.upper)
    assert list(frame["topic"]) == ["SOFTMAX", "SCORES", "SOFTMAX", "SOFTMAX"]
    assert list(frame["accuracy"]) == [0.0, 1.0, 0.5, 0.5]
    assert list(frame["number"]) == [1, 1, 2, 3], "each attempt's number among its topic's"
    assert progress.accuracy_frame([]).empty


def test_totals_and_pipeline_order():
    t = progress.totals(rows(("softmax", 0.5), ("scores", 1.0), ("masking", None)))
    assert (t.attempts, t.mean, t.seconds) == (2, 0.75, 120.0)
    assert progress.totals([]) == progress.Totals(0, 0.0, 0.0)
    table = progress.standings(rows(("softmax", 1.0), ("retired_kind", 1.0), ("scores", 0.5)))
    order = [kind for kind, _ in progress.in_pipeline_order(table)]
    assert order == ["scores", "softmax", "retired_kind"]


# ---------------------------------------------------------------- stored attempts


def entry(ex: exercises.Exercise, score: float | None, **extra) -> dict:
    return {"kind": ex.kind, "level": ex.level, "seed": ex.seed, "version": ex.version, "exercise": ex.to_dict(),
            "score": score, "misconception": None, "hints_used": 1, "seconds": 9.5, "at": T0, **extra}


def test_an_attempt_is_stored_with_its_exercise_and_version(db):
    ex = exercises.generate("softmax", 11, 2)
    attempt_id = progress.record_attempt("Ada", entry(ex, 0.5, misconception="no_exp"))
    assert attempt_id is not None
    assert progress.record_attempt("Ada", entry(ex, None)) is None, "an ungraded attempt is not stored"
    (stored,) = progress.attempts("Ada")
    assert (stored.kind, stored.level, stored.seed, stored.score, stored.misconception, stored.hints_used,
            stored.seconds, stored.at) == ("softmax", 2, 11, 0.5, "no_exp", 1, 9.5, T0)
    assert stored.version == ex.version
    assert exercises.Exercise.from_dict(stored.exercise) == ex
    assert progress.attempts("nobody") == []


def test_a_database_failure_is_unavailable_not_a_sqlalchemy_error(db, monkeypatch):
    import sqlalchemy as sa

    def broken(*args, **kwargs):
        raise sa.exc.OperationalError("SELECT", {}, Exception("disk I/O error"))

    monkeypatch.setattr(storage, "list_attempts", broken)
    monkeypatch.setattr(storage, "record_attempt", broken)
    with pytest.raises(services_db.Unavailable):
        progress.attempts("Ada")
    with pytest.raises(services_db.Unavailable):
        progress.record_attempt("Ada", entry(exercises.generate("scores", 1, 1), 1.0))
