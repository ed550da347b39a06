"""The teacher edits an assignment after students started, and resolves same-name duplicates,
through the services, on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import exercises
import storage
from exercises.cli import selftest
from services import assignments, gradebook, submissions
from tests.changed_generator import bump
from tests.test_storage import db_url  # noqa: F401  (fixture: a fresh SQLite file or PostgreSQL schema)


@pytest.fixture(autouse=True)
def db(db_url, monkeypatch):  # noqa: F811
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("ATTENTION_SECRET", "classroom tests")
    return storage.open_engine(db_url)


def _submit(a, name: str, person: str, right: bool = True) -> None:
    items = submissions.exercises_for(a, name)
    answers = {i: (selftest.correct_answer(ex) if right else
                   {p.name: "\n".join(", ".join(["7"] * p.shape[1]) for _ in range(p.shape[0]))
                    for p in ex.parts if not p.is_choice})
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
    change, a student who had started was given another problem."""
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


def _book(a, key):
    return gradebook.load(a.code, key)


def test_the_teacher_merges_two_browsers_of_one_student(db):
    """Same-name submissions from two browsers were flagged, and nothing let the teacher resolve them
    (every submission kept, duplicates flagged, the teacher resolves them)."""
    created = assignments.create("Open", [{"kind": "scores", "level": 1}], 2, rules={"attempts": 0, "counts": "best"})
    a, key = created.assignment, created.teacher_key
    _submit(a, "Ada", "s:one:ada", right=False)
    _submit(a, "ADA", "s:two:ada", right=True)
    _submit(a, "Bob", "s:three:bob", right=True)
    [group] = gradebook.duplicates(_book(a, key))
    assert [p.label for p in group] == ["Ada", "ADA (2)"]
    with pytest.raises(storage.AccessDenied):
        storage.merge_people(db, a.code, "x" * 24, group[0].who, group[1].who)
    assert gradebook.merge(a.code, key, group[0], group[1]) == 1
    book = _book(a, key)
    assert gradebook.duplicates(book) == []
    ada = next(p for p in gradebook.persons(book) if p.who == group[0].who)
    assert len(ada.attempts) == 2 and [r.score for r in ada.counting] == [1.0], "the best of both counts"
    frame = gradebook.table(book, ["1"])
    assert frame["Student"].tolist() == ["ADA", "Bob"] and frame["Attempts"].tolist() == [2, 1]
    assert len(storage.list_submissions(db, a.code, key)) == 3, "nothing deleted"


def test_the_teacher_tells_two_students_of_one_name_apart(db):
    created = assignments.create("Open", [{"kind": "scores", "level": 1}], 2, rules={"attempts": 0})
    a, key = created.assignment, created.teacher_key
    _submit(a, "Ada", "s:one:ada")
    _submit(a, "Ada", "s:two:ada", right=False)
    [[first, second]] = gradebook.duplicates(_book(a, key))
    with pytest.raises(assignments.AssignmentError):
        gradebook.rename(a.code, key, second, "   ")
    gradebook.rename(a.code, key, second, "Ada Byron")
    book = _book(a, key)
    assert gradebook.duplicates(book) == []
    frame = gradebook.table(book, ["1"])
    assert frame["Student"].tolist() == ["Ada", "Ada Byron"] and frame["Total"].tolist() == [100.0, 0.0]
    with pytest.raises(ValueError):
        storage.rename_person(db, a.code, key, "s:nobody:x", "Cy")
