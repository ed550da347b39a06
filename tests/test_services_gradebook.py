"""services.gradebook without Streamlit: opening with code and key, the table, its CSV, the mistakes."""

from __future__ import annotations

import io

import pandas as pd
import pytest

import storage
from exercises import misconceptions, selftest
from services import assignments, gradebook, submissions
from services import db as services_db


@pytest.fixture(autouse=True)
def db(tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "class.sqlite3"))
    return services_db.engine()


def test_check_names_what_is_wrong():
    created = assignments.create("Locked", [{"kind": "scores", "level": 1}], seed=1)
    other = assignments.create("Other", [{"kind": "scores", "level": 1}], seed=1)
    code, key = created.assignment.code, created.teacher_key
    assert gradebook.check("nope", key).key == "gradebook.error.code_malformed"
    assert gradebook.check("ZZZZZZZZ", key).key == "gradebook.error.code_unknown"
    assert gradebook.check(code, "short").key == "gradebook.error.key_malformed"
    assert gradebook.check(code, other.teacher_key).key == "gradebook.error.key_wrong"
    assert gradebook.check(code.lower(), f" {key} ") is None
    assert gradebook.credentials(code.lower(), f" {key} ") == (code, key)
    with pytest.raises(storage.AccessDenied):
        gradebook.load(code, other.teacher_key)


def test_table_csv_and_mistakes():
    created = assignments.create("Quiz", [{"kind": "softmax", "level": 2}, {"kind": "scores", "level": 2}], seed=5,
                                 per_student=True)
    a, key = created.assignment, created.teacher_key
    ada = submissions.exercises_for(a, "Ada")
    submissions.submit(a, "Ada", ada, submissions.grade_all(
        ada, {i: selftest.correct_answer(ex) for i, ex in enumerate(ada)}, allow_blank=False))
    alan = submissions.exercises_for(a, "Alan")
    mistake, wrong = next((mid, selftest.as_text(v["A"])) for mid, v in misconceptions.alternatives(alan[0]).items()
                          if "A" in v)
    submissions.submit(a, "Alan", alan, submissions.grade_all(alan, {0: {"A": wrong}}, allow_blank=True))
    book = gradebook.load(a.code, key)
    frame = gradebook.table(book, ["one", "two"], "Student", "Total")
    assert list(frame.columns) == ["Student", "one", "two", "Total"]
    assert frame["Student"].tolist() == ["Ada", "Alan"]
    assert frame.iloc[0, 1:].tolist() == [1.0, 1.0, 1.0]
    assert frame.iloc[1, 2] == 0.0 and frame.iloc[1, 3] == pytest.approx(frame.iloc[1, 1] / 2, abs=1e-3)
    csv = gradebook.csv_bytes(frame)
    assert csv.startswith("\ufeff".encode())
    pd.testing.assert_frame_equal(pd.read_csv(io.BytesIO(csv), encoding="utf-8-sig"), frame, check_dtype=False)
    mistakes = gradebook.mistakes_frame(book, ["one", "two"], str.upper)
    assert mistakes.to_dict("records") == [{"item": "one", "order": 0, "mistake": mistake.upper(), "students": 1}]
