"""AppTest: the worked solution, its cell picker, heatmaps and the aids on the Practice page."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import exercises
from tests.apptest_helpers import click_check, current_exercise, fill_cells, open_page, reference_cells


def click(at: AppTest, label: str) -> None:
    next(b for b in at.button if b.label == label).click()
    at.run()


def latex_text(at: AppTest) -> str:
    return "\n".join(el.value for el in at.latex)


def last_latex(at: AppTest) -> str:
    """The body of the last st.latex element (st.latex wraps it in $$ … $$)."""
    return at.latex[-1].value.strip().strip("$").strip()


def charts(at: AppTest) -> list:
    return at.get("vega_lite_chart")


def golden_script() -> None:
    """Runs as its own Streamlit script: the golden example's solution through ui.solution."""
    import streamlit as st

    from tests.test_solutions import golden_exercise
    from ui import solution

    ex = golden_exercise()
    if solution.show_button(ex, key="golden"):
        solution.show(ex, key="golden")
    st.session_state["golden.id"] = ex.id


def test_golden_solution_renders_steps_heatmaps_and_cells():
    at = AppTest.from_function(golden_script, default_timeout=60).run()
    assert not at.exception
    assert not at.latex, "nothing is shown before the learner asks"
    click(at, "Show solution")
    assert not at.exception
    shown = latex_text(at)
    assert "0.330 & 0.670" in shown and "0.248 & 0.248 & 0.503" in shown
    assert r"\frac{e^{0}}{e^{0} + e^{\frac{\sqrt{2}}{2}}}" in shown
    assert len(charts(at)) == 2, "a heatmap of the scores and one of the weights"
    at.toggle(key="golden.exact").set_value(False).run()
    assert not at.exception
    assert r"\frac{e^{0}}" not in latex_text(at).split(r"\begin{aligned} A_{ij}")[1].split(r"\end{aligned}")[0]
    # the cell picker: step 7 (softmax), row 2, column 1
    at.selectbox(key="golden.cell_step.en").set_value(6).run()
    at.selectbox(key="golden.cell_row.6").set_value(1).run()
    at.selectbox(key="golden.cell_col.6").set_value(0).run()
    assert not at.exception
    assert last_latex(at).startswith(r"A_{21} = \frac{e^{\tilde{Z}_{21}}}")
    assert any("same denominator" in c.value for c in at.caption)
    # a masked cell says why its weight is exactly 0
    at.selectbox(key="golden.cell_col.6").set_value(2).run()
    assert last_latex(at).endswith("= 0")
    assert any("exactly 0" in c.value for c in at.caption)


def test_heatmap_marks_masked_cells():
    from ui.solution import heatmap_frame
    frame = heatmap_frame([[1.0, float("-inf")], [0.5, 2.0]], [["1", r"-\infty"], ["0.5", "2"]], True, False)
    masked = frame[frame["masked"]]
    assert list(zip(masked["query"], masked["key"])) == [(1, 2)]
    assert masked["label"].iloc[0] == "−∞" and masked["value"].isna().all()
    weights = heatmap_frame([[1.0, 0.0], [0.5, 0.5]], [["1.00", "0.00"], ["0.50", "0.50"]], True, True)
    assert weights["masked"].tolist() == [False, True, False, False]


def test_show_solution_on_request_is_noted_in_the_next_attempt():
    at = open_page("app_pages/practice.py", {"kind": "softmax", "level": "2", "seed": "5"})
    ex = current_exercise(at)
    assert any(r"\hline" in el.value for el in at.latex), "the eˣ table is shown with the problem"
    click(at, "Show solution")
    assert not at.exception
    steps = exercises.solve(ex)
    assert steps[-1].display(exact=True) in latex_text(at)
    assert any("before checking" in c.value for c in at.caption)
    fill_cells(at, ex, reference_cells(ex))
    click_check(at)
    assert not at.exception
    assert at.session_state["practice.attempts"][-1]["solution_shown"] is True


def test_show_solution_after_an_attempt_marks_that_attempt():
    at = open_page("app_pages/practice.py", {"kind": "scores", "level": "1", "seed": "3"})
    ex = current_exercise(at)
    fill_cells(at, ex, reference_cells(ex))
    click_check(at)
    assert at.session_state["practice.attempts"][-1]["solution_shown"] is False
    click(at, "Show solution")
    assert not at.exception
    assert at.session_state["practice.attempts"][-1]["solution_shown"] is True
    assert r"S &= Q K^{\top}" in latex_text(at)
    assert not any("before checking" in c.value for c in at.caption)


def test_backward_kind_solution_renders():
    at = open_page("app_pages/practice.py", {"kind": "grad_softmax", "level": "2", "seed": "1"})
    click(at, "Show solution")
    assert not at.exception
    assert r"\odot" in latex_text(at)


@pytest.mark.parametrize("kind", list(exercises.KINDS))
def test_every_kind_shows_its_solution_without_exception(kind):
    level = exercises.KINDS[kind].LEVELS[-1]
    at = open_page("app_pages/practice.py", {"kind": kind, "level": str(level), "seed": "2"})
    click(at, "Show solution")
    assert not at.exception
    steps = exercises.solve(current_exercise(at))
    shown = latex_text(at)
    assert all(step.display(exact=True) in shown for step in steps)
