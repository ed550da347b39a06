"""services.gradebook without Streamlit: opening with code and key, the table, its CSV, the mistakes."""

from __future__ import annotations

import io

import pandas as pd
import pytest

import storage
from exercises.cli import selftest
from exercises.core import misconceptions
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
    # Total next to the name (it was off-screen), percent as on the page (the CSV had 0–1),
    # attempts, time, blank items apart from wrong ones, and a same-name flag
    assert list(frame.columns) == ["Student", "Total", "one", "two", "Attempts", "Last submitted", "Blank",
                                   "Same name"]
    assert frame["Student"].tolist() == ["Ada", "Alan"]
    assert frame.iloc[0, 1:4].tolist() == [100.0, 100.0, 100.0]
    assert frame.iloc[1, 3] == 0.0 and frame.iloc[1, 1] == pytest.approx(frame.iloc[1, 2] / 2, abs=0.1)
    assert frame["Blank"].tolist() == ["", "2"] and frame["Attempts"].tolist() == [1, 1]
    csv = gradebook.csv_bytes(frame)
    assert csv.startswith("\ufeff".encode())
    pd.testing.assert_frame_equal(pd.read_csv(io.BytesIO(csv), encoding="utf-8-sig", dtype={"Blank": str, "Same name": str},
                                              keep_default_na=False), frame, check_dtype=False)
    mistakes = gradebook.mistakes_frame(book, ["one", "two"], str.upper)
    assert mistakes.to_dict("records") == [{"item": "one", "order": 0, "mistake": mistake.upper(), "students": 1}]


def test_csv_cells_that_would_run_as_formulas_are_inert():
    """A student named =HYPERLINK(…) (or +, -, @, a tab, a CR, a full-width ＝) was exported raw."""
    names = ['=HYPERLINK("http://example.invalid","x")', "+1", "-2", "@SUM(A1)", "\tx", "\rx", "＝1+1", "Ada"]
    frame = pd.DataFrame({"Student": names, "Total": [50.0] * len(names)})
    text = gradebook.csv_bytes(frame).decode("utf-8-sig")
    back = pd.read_csv(io.StringIO(text), keep_default_na=False)
    assert all(v.startswith("'") for v in back["Student"][:-1]) and back["Student"].iloc[-1] == "Ada"
    assert back["Total"].tolist() == [50.0] * len(names)


INVISIBLE = ["\u200b", "\u061c", "\ufeff", "\u200e", "\u200f", "\u2060", "\u202e", "\u00a0", " ", "\u3164", "\u00ad",
             "\u0301", "\U000e0041", "\u200b\ufeff\u200e"]


@pytest.mark.parametrize("invisible", INVISIBLE, ids=lambda c: "+".join(f"U+{ord(x):04X}" for x in c))
@pytest.mark.parametrize("formula", ["=HYPERLINK(\"http://example.invalid\")", "+1", "-2", "@SUM(A1)", "＝1+1"])
def test_a_formula_behind_invisible_characters_is_inert(invisible, formula):
    """"=" behind a zero-width space, an ALM or a BOM reached the CSV unprefixed."""
    from exercises.i18n import escape

    assert escape.csv(invisible + formula).startswith("'")
    frame = pd.DataFrame({"Student": [invisible + formula, "Ada\u200b"], "Total": [50.0, 60.0]})
    back = pd.read_csv(io.StringIO(gradebook.csv_bytes(frame).decode("utf-8-sig")), keep_default_na=False)
    assert back["Student"].iloc[0].startswith("'") and back["Student"].iloc[1] == "Ada\u200b"


def test_item_statistics_facility_and_discrimination():
    created = assignments.create("Stats", [{"kind": "scores", "level": 1, "count": 3}], seed=5)
    a, key = created.assignment, created.teacher_key
    items = submissions.exercises_for(a, None)
    right = [selftest.correct_answer(ex) for ex in items]
    # item 1 tracks the rest (good students get it), item 3 goes against it (flagged)
    plans = {"A": [1, 1, 0], "B": [1, 1, 0], "C": [0, 0, 1], "D": [0, 0, 1], "E": [1, 1, 1]}
    for name, plan in plans.items():
        answers = {i: right[i] for i, ok in enumerate(plan) if ok}
        submissions.submit(a, name, items, submissions.grade_all(items, answers, allow_blank=True), person=name)
    book = gradebook.load(a.code, key)
    stats = gradebook.item_stats(book, ["1", "2", "3"])
    assert stats["facility"].tolist() == [60.0, 60.0, 60.0]
    assert stats["discrimination"].iloc[0] > 0.2 and stats["discrimination"].iloc[2] < 0.2
    assert stats["flagged"].tolist() == [False, False, True]
    cells = gradebook.student_cells(book, "C")
    assert set(cells["mark"]) >= {"blank", "right"}
