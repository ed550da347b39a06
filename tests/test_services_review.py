"""services.review: the FSRS schedule of (kind, level) cards, and a simulated learner over 60 days on a
fixed clock: a topic answered well comes back later and later, a topic failed comes back within minutes
at the same or an easier level and says so, a new learner starts at the beginning of the pipeline, and
"mastered" takes passes on two different problems on different days."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import exercises
from services import review

T0 = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)  # a fixed clock: every "now" below is T0 plus some time
KINDS = list(exercises.KINDS)


@dataclass
class Row:
    kind: str
    level: int
    score: float | None
    at: datetime
    hints_used: int = 0
    seconds: float = 300.0
    solution_shown: bool | None = False
    seed: int | None = None


# ---------------------------------------------------------------- ratings


def test_the_rating_comes_from_score_hints_solution_and_time():
    assert review.rating(Row("softmax", 1, 0.5, T0)) == review.AGAIN
    assert review.rating(Row("softmax", 1, 1.0, T0, solution_shown=True)) == review.AGAIN, "the answer was seen"
    assert review.rating(Row("softmax", 1, 0.75, T0)) == review.HARD
    assert review.rating(Row("softmax", 1, 1.0, T0, hints_used=2)) == review.HARD
    assert review.rating(Row("softmax", 1, 1.0, T0, hints_used=1)) == review.GOOD
    assert review.rating(Row("softmax", 1, 1.0, T0, seconds=300.0)) == review.GOOD, "slow for level 1"
    assert review.rating(Row("softmax", 1, 1.0, T0, seconds=60.0)) == review.EASY
    assert review.rating(Row("softmax", 1, 1.0, T0, seconds=0.0)) == review.GOOD, "no time known: not Easy"


def test_ungraded_attempts_are_no_reviews_and_retired_topics_are_never_suggested():
    assert review.cards([Row("softmax", 1, None, T0)]) == {}
    table = review.cards([Row("retired_kind", 1, 0.0, T0)])
    assert review.up_next([Row("retired_kind", 1, 0.0, T0)], KINDS, T0 + timedelta(days=1)).reason == "start"
    assert review.due_count(table, T0 + timedelta(days=1)) == 0


# ---------------------------------------------------------------- Up next


def test_a_new_learner_starts_at_the_beginning_of_the_pipeline():
    first = review.up_next([], KINDS, T0)
    assert (first.kind, first.level, first.reason) == (KINDS[0], 1, "start")


def test_a_failed_card_comes_back_soon_at_the_same_level_or_one_easier():
    now = T0 + timedelta(minutes=30)
    same = review.up_next([Row("scores", 1, 0.2, T0)], KINDS, now)
    assert (same.kind, same.level, same.reason) == ("scores", 1, "again")
    failed_at_two = [Row("scores", 2, 0.2, T0)]
    easier = review.up_next(failed_at_two, KINDS, now)
    assert (easier.kind, easier.level, easier.reason) == ("scores", 1, "easier"), "level 1 is not passed yet"
    table = review.cards(failed_at_two)
    assert table[("scores", 2)].due <= T0 + timedelta(minutes=10), "a lapse is due within minutes"
    passed_below = [Row("scores", 1, 1.0, T0 - timedelta(days=1)), Row("scores", 2, 0.2, T0)]
    again = review.up_next(passed_below, KINDS, now)
    assert (again.kind, again.level, again.reason) == ("scores", 2, "again"), "level 1 is passed: level 2 again"


def test_a_failed_card_comes_back_within_minutes_and_says_when_it_was_failed():
    rows = [Row("projection", 1, 0.0, T0, seed=74237)]
    assert review.cards(rows)[("projection", 1)].due <= T0 + timedelta(minutes=5), "back within minutes"
    nxt = review.up_next(rows, KINDS, T0 + timedelta(minutes=5, seconds=30))
    assert (nxt.kind, nxt.level, nxt.reason, nxt.minutes_ago) == ("projection", 1, "again", 5)
    failed_at_two = review.up_next([Row("projection", 2, 0.0, T0)], KINDS, T0 + timedelta(minutes=4))
    assert (failed_at_two.level, failed_at_two.reason, failed_at_two.minutes_ago) == (1, "easier", 4)


def test_mastery_takes_passes_on_two_different_problems_on_different_days():
    def learner(seed_of):  # a full, quick pass whenever the card is due, for 90 days
        rows = []
        now = T0
        for day in range(90):
            now = T0 + timedelta(days=day)
            table = review.cards(rows)
            card = table.get(("projection", 1))
            if card is None or card.is_due(now):
                rows.append(Row("projection", 1, 1.0, now, seconds=200.0, seed=seed_of(len(rows))))
        return review.cards(rows)[("projection", 1)]

    one_problem = learner(lambda k: 74237)
    assert one_problem.stability >= review.MASTERED_DAYS and not one_problem.mastered, "one problem again and again"
    varied = learner(lambda k: 1000 + k)
    assert varied.mastered
    same_day = review.cards([Row("projection", 1, 1.0, T0 + timedelta(minutes=k), seed=k) for k in range(6)])
    assert not same_day[("projection", 1)].mastered, "two problems on one day"


def test_the_next_new_stage_is_at_the_level_passed_below_it():
    rows = [Row("projection", 2, 1.0, T0)]
    nxt = review.up_next(rows, KINDS, T0 + timedelta(minutes=5))
    assert (nxt.kind, nxt.level, nxt.reason) == ("scores", 2, "new")
    weak = review.up_next([Row("projection", 1, 0.75, T0)], KINDS, T0 + timedelta(minutes=2))
    assert (weak.kind, weak.level, weak.reason) == ("scores", 1, "new"), "a weak stage never sends anyone up a level"


def test_the_most_overdue_card_comes_first():
    rows = [Row("projection", 1, 1.0, T0), Row("scores", 1, 1.0, T0 + timedelta(hours=1))]
    later = T0 + timedelta(days=30)
    nxt = review.up_next(rows, KINDS, later)
    assert (nxt.kind, nxt.reason) == ("projection", "review")
    assert review.due_count(review.cards(rows), later) == 2


# ---------------------------------------------------------------- a simulated learner over 60 days


def _simulate(days: int = 60, per_day: int = 3):
    """A learner who answers "projection" perfectly, fails "scores" for the first three weeks
    (then gets it), and does well elsewhere; each evening at 18:00 they do what Up next says, a few times."""
    rows: list[Row] = []
    shown = []
    for day in range(days):
        now = T0 + timedelta(days=day)
        for _ in range(per_day):
            nxt = review.up_next(rows, KINDS, now)
            shown.append((now, nxt))
            if nxt.kind == "projection":
                score, seconds = 1.0, 200.0  # Good at level 1 (Easy would space it out too fast to see)
            elif nxt.kind == "scores":
                score, seconds = (0.25 if day < 21 else 1.0), 400.0
            else:
                score, seconds = 1.0, 300.0
            rows.append(Row(nxt.kind, nxt.level, score, now, seconds=seconds, seed=len(rows)))
            now += timedelta(minutes=15)
    return rows, shown


def test_a_simulated_learner_over_sixty_days():
    rows, shown = _simulate()
    assert (shown[0][1].kind, shown[0][1].level, shown[0][1].reason) == (KINDS[0], 1, "start")

    # a topic answered well comes back later and later
    times = [a.at for a in rows if (a.kind, a.level) == ("projection", 1)]
    gaps = [(b - a) / timedelta(days=1) for a, b in zip(times, times[1:])]
    assert len(gaps) >= 2 and all(b > a for a, b in zip(gaps, gaps[1:])), f"days between reviews: {gaps}"

    # a topic failed comes back soon (the next day at the latest), at the same or an easier level
    for i, a in enumerate(rows):
        if a.kind == "scores" and a.score < review.PASS_SCORE:
            back = next(b for b in rows[i + 1:] if b.kind == "scores")
            assert back.at - a.at <= timedelta(days=1) and back.level <= a.level, (a, back)

    # once it is learnt, it is spaced out too, and the learner moves on along the pipeline
    table = review.cards(rows)
    assert table[("scores", 1)].passed
    assert table[("projection", 1)].mastered and table[("projection", 1)].stability > 21
    reached = {a.kind for a in rows}
    assert {"scaling", "masking", "softmax"} <= reached, sorted(reached)
    end = T0 + timedelta(days=60)
    assert all(0.0 <= c.recall(end) <= 1.0 for c in table.values())
    assert [m.kind for m in review.mastery(table)][:2] == ["projection", "scores"], "pipeline order"


def test_the_simulation_is_a_function_of_the_attempts():
    assert _simulate(days=20) == _simulate(days=20), "no fuzzing, no wall clock"
