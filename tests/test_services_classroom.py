"""The teacher edits an assignment after students started, and resolves same-name duplicates (issue 15),
through the services, on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import exercises
import storage
from exercises import selftest
from services import assignments, submissions
from tests.changed_generator import bump
from tests.test_storage import db_url  # noqa: F401  (fixture: a fresh SQLite file or PostgreSQL schema)


@pytest.fixture(autouse=True)
def db(db_url, monkeypatch):  # noqa: F811
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("ATTENTION_SECRET", "classroom tests")
    return storage.open_engine(db_url)


def _submit(a, name: str, person: str, right: bool = True) -> None:
    items = submissions.exercises_for(a, name)
    answers = {i: (selftest.correct_answer(ex) if right else {p.name: "7" for p in ex.parts if not p.is_choice})
               for i, ex in enumerate(items)}
    graded = submissions.grade_all(items, answers, allow_blank=True)
    submissions.submit(a, name, items, graded, person=person)


def test_rules_change_at_any_time_and_items_only_grow_once_a_student_started(db):
    created = assignments.create("Edit", [{"kind": "softmax", "level": 2, "count": 2}], 4, rules={"attempts": 0})
    a, key = created.assignment, created.teacher_key
    a = assignments.update(a, key, items=[{"kind": "scores", "level": 1, "count": 1}])  # nobody has started
    assert [ex.kind for ex in submissions.exercises_for(a)] == ["scores"]
    seen = submissions.exercises_for(a, "Ada")
    submissions.seen(a, "ada")
    with pytest.raises(assignments.Locked) as err:
        assignments.update(a, key, items=[{"kind": "softmax", "level": 2, "count": 1}])
    assert err.value.reason == "started"
    with pytest.raises(assignments.Locked):
        assignments.update(a, key, per_student=True)
    a = assignments.update(a, key, items=[{"kind": "scores", "level": 1, "count": 1},
                                          {"kind": "softmax", "level": 1, "count": 1}])
    now = submissions.exercises_for(a, "Ada")
    assert now[0].to_dict() == seen[0].to_dict() and [ex.kind for ex in now] == ["scores", "softmax"]
    opens, deadline = datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC) + timedelta(days=1)
    a = assignments.update(a, key, title="Edited", rules={**a.rules.to_dict(), "opens_at": opens, "deadline": deadline,
                                                          "exam": True, "time_limit": 30, "release": "manual"})
    assert (a.title, a.rules.exam, a.rules.time_limit, a.rules.release) == ("Edited", True, 30, "manual")
    assert abs((a.rules.opens_at - opens).total_seconds()) < 1 and a.rules.deadline is not None
    _submit(a, "Ada", "ada")
    with pytest.raises(assignments.Locked) as err:
        assignments.update(a, key, items=[*a.items, {"kind": "scores", "level": 2, "count": 1}])
    assert err.value.reason == "submitted"
    assert assignments.update(a, key, rules={**a.rules.to_dict(), "time_limit": 0}).rules.time_limit == 0


def test_an_edit_never_changes_the_exercises_a_student_was_given(db, monkeypatch):
    """Editing the items deleted every stored exercise, a student's own variants too: after a generator
    change, a student who had started was given another problem (issue 15)."""
    created = assignments.create("Own", [{"kind": "softmax", "level": 2, "count": 1}], 9, per_student=True)
    a, key = created.assignment, created.teacher_key
    ada = submissions.exercises_for(a, "Ada")  # Ada opens: her variant is stored
    bump(monkeypatch, "softmax")
    a = assignments.update(a, key, items=[{"kind": "softmax", "level": 2, "count": 1},
                                          {"kind": "scores", "level": 1, "count": 1}])
    again = submissions.exercises_for(a, "Ada")
    assert again[0].to_dict() == ada[0].to_dict(), "the very problem she saw"
    assert again[1].kind == "scores"
    _submit(a, "Ada", "ada")
    [row, _] = storage.list_submissions(db, a.code, key)
    assert row.exercise == ada[0].to_dict()
    assert submissions.regrade(row).score == 1.0


def test_a_class_set_keeps_its_stored_exercises_when_items_are_added(db, monkeypatch):
    created = assignments.create("Class", [{"kind": "scores", "level": 1, "count": 2}], 3)
    a, key = created.assignment, created.teacher_key
    before = submissions.exercises_for(a)
    bump(monkeypatch, "scores")
    a = assignments.update(a, key, items=[{"kind": "scores", "level": 1, "count": 3}])
    after = submissions.exercises_for(a)
    assert [ex.to_dict() for ex in after[:2]] == [ex.to_dict() for ex in before] and len(after) == 3 and after[2].version == exercises.KINDS["scores"].VERSION
