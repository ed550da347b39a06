"""AppTest page tests for Home and Practice."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import exercises
from exercises.cli import selftest
from exercises.i18n import t
from tests.apptest_helpers import ROOT, click_check, current_exercise, fill_cells, open_page, reference_cells
from ui.answer_grid import paste_key, round_key
from ui.practice_state import answer_prefix


def answer_cells(at):
    """The answer grid's cells (the sidebar has text inputs of its own)."""
    return [w for w in at.text_input if (w.key or "").startswith("ans-")]


def feedback_of(at):
    stored = at.session_state["practice.feedback"]
    assert stored is not None
    return stored[1]


def test_home_renders_and_links_every_kind():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30).run()
    assert not at.exception
    assert at.title[0].value == "Attention by Hand"
    text = " ".join(c.value for c in at.caption)
    for kind in exercises.KINDS:
        assert exercises.t(f"kind.{kind}.summary") in text


def test_deep_link_opens_that_exact_problem():
    at = open_page("app_pages/practice.py", {"kind": "softmax", "level": "2", "seed": "5"})
    assert not at.exception
    assert (at.session_state["practice.kind"], at.session_state["practice.level"], at.session_state["practice.seed"]) == ("softmax", 2, 5)
    ex = exercises.generate("softmax", 5, 2)
    given = ex.given.get("scaled", ex.given.get("masked"))
    shown = " ".join(l.value for l in at.latex)
    first_row = " & ".join(str(int(x)) if np.isfinite(x) else "-\\infty" for x in given[0])
    assert first_row in shown
    assert len(answer_cells(at)) == ex.part("A").reference.size


@pytest.mark.parametrize("kind", ["softmax", "scores", "masking", "weighted_sum"])
def test_correct_answer_turns_all_green(kind):
    at = open_page("app_pages/practice.py", {"kind": kind, "level": "2", "seed": "11"})
    ex = current_exercise(at)
    fill_cells(at, ex, reference_cells(ex))
    click_check(at)
    assert not at.exception
    fb = feedback_of(at)
    assert fb.score == 1.0 and fb.correct
    assert all((p.status == "right").all() for p in fb.parts.values())
    assert at.success, "a success message is shown"
    assert len(at.session_state["practice.attempts"]) == 1


def test_checking_the_same_answer_again_is_no_new_attempt_but_a_changed_answer_is():
    """A spaced review is one new attempt: five Checks of one answer record one attempt (they once made
    the topic "mastered"); the same answer changed and checked again records the next."""
    at = open_page("app_pages/practice.py", {"kind": "projection", "level": "1", "seed": "74237"})
    ex = current_exercise(at)
    cells = reference_cells(ex)
    fill_cells(at, ex, cells)
    for _ in range(5):
        click_check(at)
        assert not at.exception
    assert len(at.session_state["practice.attempts"]) == 1, "the same answer checked five times"
    name = ex.parts[0].name
    cells[name][0][0] = str(float(cells[name][0][0]) + 3)
    fill_cells(at, ex, cells)
    click_check(at)
    assert len(at.session_state["practice.attempts"]) == 2, "a changed answer is a new attempt"


def test_wrong_answer_marks_red_cells():
    at = open_page("app_pages/practice.py", {"kind": "scores", "level": "1", "seed": "3"})
    ex = current_exercise(at)
    cells = reference_cells(ex)
    cells["scores"][0][0] = str(int(float(cells["scores"][0][0])) + 5)
    fill_cells(at, ex, cells)
    click_check(at)
    fb = feedback_of(at)
    assert fb.graded and not fb.correct
    assert fb.parts["scores"].status[0, 0] == "wrong"
    assert (fb.parts["scores"].status == "right").sum() == ex.part("scores").reference.size - 1
    assert at.error, "an error box shows the score"
    marks = " ".join(c.value for c in at.caption)
    assert "✗" in marks and "✓" in marks


def test_garbage_everywhere_gives_messages_not_exceptions():
    at = open_page("app_pages/practice.py", {"kind": "softmax", "level": "1", "seed": "2"})
    ex = current_exercise(at)
    junk = ["abc", "1/0", "((", "__import__('os')", "1e999", "∞∞", "2**", "", "😀"]
    rows, cols = ex.part("A").shape
    fill_cells(at, ex, {"A": [[junk[(i * cols + j) % len(junk)] for j in range(cols)] for i in range(rows)]})
    click_check(at)
    assert not at.exception
    fb = feedback_of(at)
    assert fb.score is None and not fb.graded
    assert len(fb.parts["A"].cell_errors) == rows * cols
    assert at.warning, "the 'nothing was graded' notice is shown"
    assert len(at.session_state["practice.attempts"]) == 0, "a format error spends no attempt"
    # the paste box with garbage: a message by the box (the pasted text stays), no exception, and
    # nothing graded (the paste was once graded in the grid's place)
    at.text_area(key=paste_key(answer_prefix(ex), "A")).input("[[1, 2], [3")
    click_check(at)
    assert not at.exception
    assert any("brackets" in e.value for e in at.error)
    assert at.text_area(key=paste_key(answer_prefix(ex), "A")).value == "[[1, 2], [3"
    assert len(at.session_state["practice.attempts"]) == 0


def test_pasted_matrix_of_wrong_shape_names_both_shapes():
    at = open_page("app_pages/practice.py", {"kind": "softmax", "level": "2", "seed": "4"})
    ex = current_exercise(at)
    at.text_area(key=paste_key(answer_prefix(ex), "A")).input("1 0; 0 1")
    click_check(at)
    # the paste cannot go into the 3×3 grid: said by the paste box, nothing graded (one input)
    assert any("3×3" in e.value and "2×2" in e.value for e in at.error)
    assert at.session_state["practice.feedback"] is None


def test_typed_cells_survive_a_format_error():
    at = open_page("app_pages/practice.py", {"kind": "scores", "level": "1", "seed": "8"})
    ex = current_exercise(at)
    cells = reference_cells(ex)
    cells["scores"][0][0] = "oops"
    fill_cells(at, ex, cells)
    click_check(at)
    from ui.answer_grid import cell_key
    assert at.text_input(key=cell_key(answer_prefix(ex), "scores", 0, 0)).value == "oops"
    assert at.text_input(key=cell_key(answer_prefix(ex), "scores", 0, 1)).value == cells["scores"][0][1]


def test_new_problem_changes_seed_and_url_and_keeps_topic():
    at = open_page("app_pages/practice.py", {"kind": "masking", "level": "2", "seed": "7"})
    next(b for b in at.button if b.label == "New problem").click()
    at.run()
    assert not at.exception
    assert at.session_state["practice.kind"] == "masking"
    assert at.query_params["seed"] in (str(at.session_state["practice.seed"]), [str(at.session_state["practice.seed"])])
    assert at.query_params["kind"] in ("masking", ["masking"])


def test_new_problem_empties_the_grid_and_forgets_its_pastes():
    """The boxes keep their keys from problem to problem (the browser keeps them); what they held, typed or
    pasted, is gone, and the new problem is graded on what is typed for it."""
    at = open_page("app_pages/practice.py", {"kind": "softmax", "level": "2", "seed": "4"})
    ex = current_exercise(at)
    prefix = answer_prefix(ex)
    rows, cols = ex.part("A").shape
    at.text_area(key=paste_key(prefix, "A")).input("; ".join(" ".join(["0.5"] * cols) for _ in range(rows))).run()
    assert at.session_state[round_key(prefix, "A")] == 1, "the paste went into the grid (its cells' second keys)"
    next(b for b in at.button if b.label == "New problem").click()
    at.run()
    fresh = current_exercise(at)
    assert fresh.id != ex.id and answer_prefix(fresh) == prefix
    assert round_key(prefix, "A") not in at.session_state
    assert [w.value for w in answer_cells(at)] == [""] * fresh.part("A").reference.size
    assert at.text_area(key=paste_key(prefix, "A")).value == ""
    fill_cells(at, fresh, reference_cells(fresh))
    click_check(at)
    assert feedback_of(at).correct, "the new problem is graded on what was typed for it"


def test_a_link_naming_another_topic_opens_it_over_the_problem_on_screen():
    """A link into Practice (Home's Up next, the pipeline map) names a topic and a level: it opens a new
    problem of them even when Practice already shows one; the address the page wrote itself does not."""
    at = open_page("app_pages/practice.py", {"kind": "softmax", "level": "2", "seed": "5"})
    at.run()
    assert (at.session_state["practice.kind"], at.session_state["practice.seed"]) == ("softmax", 5)
    at.query_params.clear()
    at.query_params.update({"kind": "scores", "level": "1"})
    at.run()
    assert not at.exception
    assert (at.session_state["practice.kind"], at.session_state["practice.level"]) == ("scores", 1)
    assert at.query_params["kind"] in ("scores", ["scores"])
    seed = at.session_state["practice.seed"]
    at.query_params.clear()  # the navigation's own link names no topic: the problem stays
    at.run()
    assert (at.session_state["practice.kind"], at.session_state["practice.seed"]) == ("scores", seed)


def test_rerun_does_not_regenerate():
    at = open_page("app_pages/practice.py", {"kind": "scaling", "level": "1"})
    seed = at.session_state["practice.seed"]
    at.run()
    at.run()
    assert at.session_state["practice.seed"] == seed


@pytest.mark.parametrize("query, fragment", [
    ({"kind": "nonsense", "level": "1", "seed": "1"}, "nonsense"),
    ({"kind": "softmax", "level": "9", "seed": "1"}, "level '9'"),
    ({"kind": "softmax", "level": "2", "seed": "-4x"}, "-4x"),
])
def test_bad_url_gives_message_and_fallback_problem(query, fragment):
    at = open_page("app_pages/practice.py", query)
    assert not at.exception
    assert any(fragment in w.value for w in at.warning)
    assert at.session_state["practice.kind"] in exercises.KINDS
    assert len(answer_cells(at)) > 0, "a fallback problem is shown"


def test_topic_change_draws_a_problem_of_that_topic():
    at = open_page("app_pages/practice.py", {"kind": "softmax", "level": "1", "seed": "1"})
    at.selectbox(key="practice.kind_widget.en").set_value("weighted_sum").run()
    assert not at.exception
    assert at.session_state["practice.kind"] == "weighted_sum"
    assert at.query_params["kind"] in ("weighted_sum", ["weighted_sum"])


def test_the_mask_prompt_asks_for_the_softmax_when_the_exercise_has_an_a_part():
    import exercises
    from ui.problem import prompt_text

    one, two = exercises.generate("masking", 3, 1), exercises.generate("masking", 3, 2)
    assert t("kind.masking.prompt_softmax") not in prompt_text(one)
    assert prompt_text(two).endswith(" " + t("kind.masking.prompt_softmax"))


BACKWARD = ["grad_weighted_sum", "grad_value_proj", "grad_softmax", "grad_scores", "grad_projections",
            "grad_embedding", "backprop"]  # backprop: tests/kinds/test_backprop.py


@pytest.mark.parametrize("kind_id", BACKWARD)
def test_practice_page_poses_grades_and_solves_each_backward_kind(kind_id):
    from tests.apptest_helpers import click_check, current_exercise, fill_cells, open_page, reference_cells

    at = open_page("app_pages/practice.py", {"kind": kind_id, "level": "2", "seed": "3"})
    assert not at.exception
    ex = current_exercise(at)
    assert ex.kind == kind_id
    fill_cells(at, ex, reference_cells(ex))
    click_check(at)
    assert not at.exception
    fb = at.session_state["practice.feedback"][1]
    assert fb.correct and fb.score == 1.0
    next(b for b in at.button if b.label == exercises.t("solution.show")).click()
    at.run()
    assert not at.exception
    shown = " ".join(x.value for x in at.latex)
    assert r"\frac{L(" in shown  # the closing finite-difference check is on the page


MY_KINDS = ("attention", "shapes", "variance", "concepts")


@pytest.mark.parametrize("kind_id", MY_KINDS)
def test_practice_page_shows_and_grades_each_kind(kind_id):
    from tests.apptest_helpers import click_check, current_exercise, fill_cells, open_page
    from ui.answer_grid import choice_key

    at = open_page("app_pages/practice.py", {"kind": kind_id, "level": "2", "seed": "3"})
    assert not at.exception and at.session_state["practice.kind"] == kind_id
    ex = current_exercise(at)
    cells = {}
    for part in ex.parts:
        if part.is_choice:
            at.radio(key=choice_key(answer_prefix(ex), part.name)).set_value(int(part.reference[0, 0]))
        else:
            cells[part.name] = [[selftest.format_cell(x) for x in row] for row in part.reference]
    fill_cells(at, ex, cells)
    click_check(at)
    assert not at.exception
    assert at.success and not at.error, [e.value for e in at.error]


def test_the_given_matrices_follow_in_reading_order():
    """A phone stacks columns one under the other: the given matrices come in the page's order, row by row
    (W_Q1 before W_Q3), not column by column (X, W_Q3, W_K2, … under three columns)."""
    from exercises.solutions import given_latex
    from ui.mathview import spaced

    at = open_page("app_pages/practice.py", {"kind": "gqa", "level": "2", "seed": "5"})
    ex = current_exercise(at)
    wanted = [" ".join(spaced(latex).split()) for _name, latex in given_latex(ex)]
    shown = [" ".join(block.value.strip("$").split()) for block in at.latex]
    order = [shown.index(latex) for latex in wanted]
    assert order == sorted(order), (f"gqa level 2 seed 5: the givens drawn as "
                                    f"{[name for _i, name in sorted(zip(order, [n for n, _ in given_latex(ex)]))]}")
