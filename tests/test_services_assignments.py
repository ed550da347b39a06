"""services.assignments without Streamlit: create, load by code, teacher keys, class lists, PDFs."""

from __future__ import annotations

import pytest

import exercises
import storage
from services import assignments, submissions
from services import db as services_db
from tests.changed_generator import bump


@pytest.fixture(autouse=True)
def db(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "class.sqlite3"))
    return services_db.engine()


def test_create_stores_the_class_set_with_its_versions(db):
    created = assignments.create("Week 3", [{"kind": "softmax", "level": 2, "count": 2},
                                            {"kind": "scores", "level": 1}], seed=42, allow_solutions=True)
    a = created.assignment
    assert (a.title, a.seed, a.item_count, a.allow_solutions, a.per_student) == ("Week 3", 42, 3, True, False)
    assert a.versions == (exercises.KINDS["softmax"].VERSION, exercises.KINDS["scores"].VERSION)
    stored = storage.stored_exercises(db, a.code)
    assert [stored[i] for i in range(3)] == [ex.to_dict() for ex in a.spec.exercises(secret=submissions.secret())]
    loaded = assignments.load(a.code.lower())
    assert loaded == a
    assert assignments.verify_key(a.code, created.teacher_key)
    assert not assignments.verify_key(a.code, "x" * 24) and not assignments.verify_key("nope", created.teacher_key)


def test_per_student_variants_are_not_stored_before_a_student_opens_them(db):
    a = assignments.create("Variants", [{"kind": "softmax", "level": 1}], seed=5, per_student=True).assignment
    assert storage.stored_exercises(db, a.code) == {}
    ada = submissions.exercises_for(a, "Ada")
    assert storage.stored_exercises(db, a.code, "ada") == {0: ada[0].to_dict()}


def test_bad_input_and_unknown_codes():
    with pytest.raises(assignments.AssignmentError):
        assignments.create("", [{"kind": "softmax", "level": 1}], seed=1)
    with pytest.raises(assignments.MalformedCode):
        assignments.load("not a code!")
    assert assignments.load("ZZZZZZZZ") is None


def test_class_lists():
    assert assignments.class_list("") == () and assignments.class_list("# only a comment\n\n") == ()
    assert assignments.class_list("Ada\n  Alan  Turing \n# no\n") == ("Ada", "Alan Turing")
    with pytest.raises(assignments.AssignmentError):
        assignments.class_list("Ada\nada")


def test_pdfs_show_the_stored_exercises_even_after_a_version_bump(monkeypatch):
    a = assignments.create("Sheets", [{"kind": "scores", "level": 1}], seed=9).assignment
    files = assignments.pdf_files(a, (), "en")
    assert all(files[name].startswith(b"%PDF") for name in ("worksheet.pdf", "answer-key.pdf"))
    before = assignments.worksheet(a, (), "en").sheets[0].exercises
    bump(monkeypatch, "scores")
    assert assignments.worksheet(a, (), "en").sheets[0].exercises == before
    assert exercises.generate("scores", before[0].seed, 1) != before[0]


def test_per_student_sheets_store_each_students_variants(db):
    a = assignments.create("Variants", [{"kind": "scores", "level": 1}], seed=5, per_student=True).assignment
    ws = assignments.worksheet(a, ("Ada", "Alan"), "en")
    assert [s.student for s in ws.sheets] == ["Ada", "Alan"]
    assert storage.stored_exercises(db, a.code, "Ada") == {0: ws.sheets[0].exercises[0].to_dict()}
    assert submissions.exercises_for(a, "ADA") == list(ws.sheets[0].exercises), "the page shows the printed sheet"


def test_missing_font_only_for_cjk_without_a_font(monkeypatch):
    spec = assignments.create("Plain", [{"kind": "scores", "level": 1}], seed=1).assignment.spec
    assert not assignments.missing_font(spec, ("Ada",))
    monkeypatch.setattr(assignments.worksheets, "cjk_font_dir", lambda: None)
    assert assignments.missing_font(spec, ("李雷",)) and not assignments.missing_font(spec, ("Ada",))


def test_variants_are_keyed_with_the_server_secret(db, monkeypatch):
    """Item seeds were a public hash of the assignment's seed: anyone knowing it could ask Practice for
    the problems. Now they depend on a server secret (ATTENTION_SECRET or one stored once)."""
    a = assignments.create("Secret", [{"kind": "softmax", "level": 2, "count": 1}], 7, per_student=True).assignment
    ada = submissions.exercises_for(a, "Ada")[0]
    assert ada.seed != a.spec.seeds("Ada")[0][1], "not the seed anyone can compute from the assignment seed"
    assert submissions.secret() == submissions.secret()  # stored once, read back
    monkeypatch.setenv("ATTENTION_SECRET", "another secret")
    assert submissions.secret() == b"another secret"
    assert a.spec.seeds("Ada", secret=b"another secret") != a.spec.seeds("Ada", secret=b"x")
