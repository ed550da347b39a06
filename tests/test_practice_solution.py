"""AppTest: the worked solution, its cell picker, heatmaps and the aids on the Practice page."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import exercises
from attention_core import causal_mask
from tests import generated
from tests.apptest_helpers import click_check, current_exercise, fill_cells, open_page, reference_cells
from ui import mathview


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


def rectangle(n_q: int, n_k: int, causal: bool) -> tuple[list[list[float]], list[list[str]]]:
    """An n_q × n_k score matrix (−∞ where the decoding causal mask hides a key) and its labels."""
    values = np.arange(n_q * n_k, dtype=float).reshape(n_q, n_k) - 3  # (n_q, n_k)
    if causal:
        values[causal_mask(n_q, n_k)] = -np.inf
    labels = [[r"-\infty" if np.isneginf(x) else f"{x:g}" for x in row] for row in values]
    return values.tolist(), labels


@pytest.mark.parametrize("n_q,n_k", [(2, 4), (4, 2)])
@pytest.mark.parametrize("causal", [False, True])
def test_rectangular_heatmap_has_queries_on_rows_keys_on_columns_and_marks_the_mask(n_q, n_k, causal):
    from ui.solution import heatmap, heatmap_frame, heatmap_spec
    hidden = causal_mask(n_q, n_k) if causal else np.zeros((n_q, n_k), dtype=bool)  # (n_q, n_k)
    expected = sorted((i + 1, j + 1) for i, j in zip(*np.nonzero(hidden)))
    values, labels = rectangle(n_q, n_k, causal)
    for weights in (False, True):
        frame = heatmap_frame(values, labels, causal, weights)
        assert len(frame) == n_q * n_k
        assert sorted(set(frame["query"])) == list(range(1, n_q + 1))
        assert sorted(set(frame["key"])) == list(range(1, n_k + 1))
        for _, cell in frame.iterrows():  # query i is row i, key j is column j
            assert cell["label"] == labels[cell["query"] - 1][cell["key"] - 1].replace("-", "−").replace(
                r"−\infty", "−∞")
        masked = frame[frame["masked"]]
        assert sorted(zip(masked["query"], masked["key"])) == expected
        assert masked["value"].isna().all() and frame[~frame["masked"]]["value"].notna().all()
        assert (masked["label"] == "−∞").all()
    # weights: a 0 is masked because the causal mask hides its key, not because of its value
    zeros = [[0.0] * n_k for _ in range(n_q)]
    weights = heatmap_frame(zeros, [["0.00"] * n_k for _ in range(n_q)], causal, True)
    assert sorted(zip(weights[weights["masked"]]["query"], weights[weights["masked"]]["key"])) == expected
    assert not heatmap_frame(zeros, [["0.00"] * n_k for _ in range(n_q)], causal, False)["masked"].any()
    spec = heatmap(heatmap_frame(values, labels, causal, True), "A").to_dict()
    fast = heatmap_spec(f"rect-{n_q}-{n_k}-{causal}", "en", "A", True, causal, values, labels)
    case = f"{n_q}×{n_k}, causal={causal}"
    assert [r for (r,) in [fast["datasets"].values()]] == [r for (r,) in [spec["datasets"].values()]], case
    assert list(fast["datasets"]) == [fast["data"]["name"]], f"{case}: the chart draws the one dataset"
    assert {k: v for k, v in fast.items() if k not in ("datasets", "data")} == {
        k: v for k, v in spec.items() if k not in ("datasets", "data")}, (
        f"{case}: the page's spec (a template of its size with these cells) is Altair's own")
    assert (spec["width"], spec["height"]) == (max(160, 56 * n_k), max(160, 56 * n_q))
    encoding = spec["layer"][0]["encoding"]
    assert encoding["x"]["field"] == "key" and encoding["y"]["field"] == "query"
    (records,) = spec["datasets"].values()
    assert len(records) == n_q * n_k
    assert sum(r["masked"] for r in records) == len(expected)


def test_heatmap_picks_an_n_q_by_n_k_matrix_and_no_row_that_is_not_one():
    from ui.solution import _matrix_for
    A = np.full((2, 4), 0.25)  # (n_q, n_k)
    cross = SimpleNamespace(given={"Q": np.ones((2, 3)), "K": np.ones((4, 3)), "V": np.ones((4, 1))})
    view = [{"name": "scores", "shape": (2, 4), "value": A.tolist(), "labels": [["1"] * 4] * 2},
            {"name": "A", "shape": (2, 4), "value": A.tolist(), "labels": [["0.25"] * 4] * 2}]
    assert _matrix_for(cross, view, ("A",))[0] == "A"
    assert _matrix_for(cross, view, ("masked", "scaled", "scores"))[0] == "scores"
    memory = SimpleNamespace(given={"X": np.ones((2, 3)), "H": np.ones((4, 5))})  # keys from H, not X
    assert _matrix_for(memory, view, ("A",))[0] == "A"
    wrong_axes = SimpleNamespace(given={"Q": np.ones((4, 3)), "K": np.ones((2, 3))})
    assert _matrix_for(wrong_axes, view, ("A",)) is None, "a 2 × 4 matrix is not 4 queries × 2 keys"
    no_axes = SimpleNamespace(given={"n": 10})  # the shapes kind: its 'A' is a shape, 1 × 2
    shape_view = [{"name": "A", "shape": (1, 2), "value": [[10, 10]], "labels": [["10", "10"]]}]
    assert _matrix_for(no_axes, shape_view, ("A",)) is None


def _square_only_matrix_for(ex, view, names):
    """The choice before rectangles: the first square matrix of `names`, computed, else given."""
    by_name = {s["name"]: s for s in view}
    for name in names:
        if name in by_name and by_name[name]["shape"][0] == by_name[name]["shape"][1]:
            return name
    for name in names:
        value = ex.given.get(name)
        if isinstance(value, np.ndarray) and value.ndim == 2 and value.shape[0] == value.shape[1]:
            return name
    return None


RECTANGULAR_KINDS = {"cross_attention", "kv_cache"}  # n_q ≠ n_k by design, so no "before rectangles" to compare with


@pytest.mark.parametrize("kind", [k for k in exercises.KINDS if k not in RECTANGULAR_KINDS])
def test_every_kind_draws_the_same_heatmaps_as_before_rectangles(kind):
    from ui import solution
    for level in exercises.KINDS[kind].LEVELS:
        for seed in range(5):
            ex = generated.exercise(kind, seed, level)
            view = solution.steps_view(solution.fingerprint(ex), "en", ex)
            for names in (solution.SCORE_STEPS, solution.WEIGHT_STEPS):
                found = solution._matrix_for(ex, view, names)
                assert (found and found[0]) == _square_only_matrix_for(ex, view, names), (level, seed, names)


def test_show_solution_on_request_is_noted_in_the_next_attempt():
    at = open_page("app_pages/practice.py", {"kind": "softmax", "level": "2", "seed": "5"})
    ex = current_exercise(at)
    assert any(r"\hline" in el.value for el in at.latex), "the eˣ table is shown with the problem"
    click(at, "Show solution")
    assert not at.exception
    steps = exercises.solve(ex)
    assert mathview.spaced(steps[-1].display(exact=True)) in latex_text(at)
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
    assert all(mathview.spaced(step.display(exact=True)) in shown for step in steps)
