"""Input budgets: no input from the hostile corpus costs more than 1 s of server time
for one run, the length is checked after Unicode normalisation, and every refusal says what is wrong.

Server time is time.process_time() around the library call (or the AppTest run, which runs the page
in this process)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import exercises
from exercises.core import parser
from exercises.core.checkwork import MAX_SIZE, check_work
from exercises.core.parser import MAX_CELL_CHARS, MAX_MATRIX_CHARS, AnswerError, parse_answer, parse_grid, parse_number
from services import submissions
from tests.apptest_helpers import ROOT

BUDGET_S = 1.0
EXPANDING = "ﷺ"  # NFKC writes it out as 18 characters


def cpu(fn, *args, **kwargs):
    start = time.process_time()
    result = fn(*args, **kwargs)
    return result, time.process_time() - start


def refusal(fn, *args) -> str:
    with pytest.raises(AnswerError) as err:
        fn(*args)
    return str(err.value)


# ---------------------------------------------------------------- the parser


def test_length_is_checked_after_normalisation():
    assert len(parser.normalise(EXPANDING)) == 18
    text = refusal(parse_answer, EXPANDING * 400)  # 400 typed, 7200 once written out
    assert "characters or more once its special characters are written out (400 as typed)" in text
    assert f"at most {MAX_MATRIX_CHARS}" in text
    text = refusal(parse_number, EXPANDING * 10)  # 10 typed, 180 written out
    assert "comes to 180 characters" in text and f"at most {MAX_CELL_CHARS}" in text


def test_too_many_cells_says_so():
    text = refusal(parse_answer, " ".join(["1"] * 401))  # 801 characters: the old message said "801 characters long"
    assert "401 entries" in text and "at most 400" in text
    assert "characters" not in text


@pytest.mark.parametrize("text", [EXPANDING * 6000, "1 " * 3000, "(" * 5999, "9" * 6000, "1," * 2999,
                                  "[" * 3000 + "]" * 3000, "e^" * 3000, "√" * 6000, "⁹" * 6000, "x" * 10**6])
def test_no_pasted_text_costs_a_second(text):
    start = time.process_time()
    with pytest.raises(AnswerError):
        parse_answer(text)
    assert time.process_time() - start < BUDGET_S / 10


def test_a_grid_of_hostile_cells_is_cheap():
    grid = [[EXPANDING * 120] * 8 for _ in range(8)]
    (values, errors), spent = cpu(parse_grid, grid)
    assert len(errors) == 64 and spent < BUDGET_S / 10


def test_run_budget_caps_one_runs_text():
    assert parser.run_budget({0: {"A": "1 2; 3 4"}}) is None
    too_much = parser.run_budget({i: {"A": "1" * 6000} for i in range(11)})
    assert too_much is not None and "66000 characters" in str(too_much)
    assert parser.answer_chars({"A": [["12", "3"], ["4", None]]}) == 4


def test_297_paste_boxes_of_an_expanding_character_cost_under_a_second():
    # the 5 MB message: every paste box of a large assignment filled with ﷺ×6000
    kinds = list(exercises.KINDS)
    items = [exercises.generate(kinds[i % len(kinds)], i, exercises.KINDS[kinds[i % len(kinds)]].LEVELS[-1])
             for i in range(40)]
    answers = {i: {p.name: EXPANDING * 6000 for p in ex.parts} for i, ex in enumerate(items)}
    boxes = sum(len(a) for a in answers.values())
    assert boxes >= 40
    graded, spent = cpu(submissions.grade_all, items, answers, False)
    assert set(graded.unreadable) == set(range(len(items)))
    assert spent < BUDGET_S, f"{boxes} boxes took {spent:.2f} s"
    assert parser.run_budget(answers) is not None  # and the page refuses the whole run before grading


# ---------------------------------------------------------------- Check my work


def test_check_work_refuses_large_arrays_at_once():
    big = np.ones((500, 500))
    report, spent = cpu(check_work, {"X": big, "W_Q": big, "W_K": big, "W_V": big}, {"A": big})
    assert not report.ok and spent < BUDGET_S / 10
    assert f"X is 500×500; Check my work takes matrices of at most {MAX_SIZE} rows and {MAX_SIZE} columns" \
        in str(report.errors[0])


def test_check_work_refuses_400_rows_typed():
    ones = "\n".join(["1"] * 400)
    wide = " ".join(["1"] * 400)
    report, spent = cpu(check_work, {"X": ones, "W_Q": wide, "W_K": wide, "W_V": wide})
    assert not report.ok and spent < BUDGET_S / 4
    assert "X is 400×1" in str(report.errors[0])


def test_check_work_takes_hand_sizes():
    x = "\n".join(" ".join("1" for _ in range(MAX_SIZE)) for _ in range(MAX_SIZE))
    report = check_work({"X": x, "W_Q": x, "W_K": x, "W_V": x})
    assert report.ok and report.reference["A"].shape == (MAX_SIZE, MAX_SIZE)
    report = check_work({"X": [[1.0] * 9] * 2, "W_Q": [[1.0]] * 9, "W_K": [[1.0]] * 9, "W_V": [[1.0]] * 9})
    assert "X is 2×9" in str(report.errors[0])
    assert not check_work({"X": "1"}, {f"s{i}": "1" for i in range(60)}).ok  # too many boxes


def test_the_check_work_page_with_400_rows_costs_under_a_second():
    at = AppTest.from_file(str(ROOT / "app_pages" / "check_work.py"), default_timeout=60).run()
    at.text_area(key="checkwork.in.X").input("\n".join(["1"] * 400))
    for name in ("W_Q", "W_K", "W_V"):
        at.text_area(key=f"checkwork.in.{name}").input(" ".join(["1"] * 400))
    next(b for b in at.button if b.label == "Check my work").click()
    _, spent = cpu(at.run)
    assert not at.exception
    assert any("at most 8 rows" in e.value for e in at.error)
    assert not at.dataframe
    assert spent < BUDGET_S, f"{spent:.2f} s"


def test_the_check_work_page_refuses_an_expanding_paste_quickly():
    at = AppTest.from_file(str(ROOT / "app_pages" / "check_work.py"), default_timeout=60).run()
    for name in ("X", "W_Q", "W_K", "W_V"):
        at.session_state[f"checkwork.in.{name}"] = EXPANDING * 5000
    next(b for b in at.button if b.label == "Check my work").click()
    _, spent = cpu(at.run)
    assert not at.exception and at.error
    assert spent < BUDGET_S, f"{spent:.2f} s"
