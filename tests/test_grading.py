"""Grading (DESIGN §4, §5): tolerance, shapes, partial credit, format errors, misconceptions, carry-forward."""

from __future__ import annotations

import math

import numpy as np
import pytest

import exercises
from exercises import Exercise, Part, grade
from exercises.cli.selftest import as_text
from exercises.core.grading import CONSISTENT, RIGHT, WRONG
from exercises.i18n import t
from tests import generated


def one_part(reference, decimals: int = 2, name: str = "A", **part_options) -> Exercise:
    """A hand-made exercise with a single part and nothing given (no step can recompute it)."""
    ref = np.atleast_2d(np.asarray(reference, dtype=float))  # (rows, cols)
    return Exercise(kind="test", seed=0, level=1, version=1, given={},
                    parts=(Part(name, ref.shape, ref, decimals=decimals, **part_options),))


def given_matrix(ex: Exercise, name: str) -> np.ndarray:
    return np.asarray(ex.given[name], dtype=float)


def column_softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=0, keepdims=True))  # (n, n); exp(−∞) = 0
    return e / e.sum(axis=0, keepdims=True)


# ---------------------------------------------------------------- tolerance


@pytest.mark.parametrize("answer, right", [
    ("0.67", True), ("0.667", True), ("2/3", True), ("0.6667", True), ("0,67", True),
    ("0.66", False), ("0.673", False), ("0.7", False), ("-0.67", False),
])
def test_two_thirds_at_two_decimals(answer, right):
    fb = grade(one_part([[2 / 3]], decimals=2), answer)
    assert fb.graded
    assert fb.correct is right
    assert fb.score == (1.0 if right else 0.0)


def test_tolerance_is_0_51_times_ten_to_minus_decimals():
    ex3 = one_part([[2 / 3]], decimals=3)
    assert grade(ex3, "0.667").correct
    assert not grade(ex3, "0.67").correct  # fine at 2 decimals, not at 3
    assert ex3.parts[0].tolerance == pytest.approx(0.51e-3)
    ex1 = one_part([[0.25]], decimals=1)
    assert grade(ex1, "0.3").correct and grade(ex1, "0.2").correct  # a half rounds either way
    assert not grade(ex1, "0.19").correct and not grade(ex1, "0.31").correct


@pytest.mark.parametrize("answer, right", [
    ("3", True), ("3.0", True), ("6/2", True), ("3.01", False), ("2.999", False), ("3.0000001", False),
])
def test_integer_parts_are_exact(answer, right):
    fb = grade(one_part([[3]], decimals=0), answer)
    assert fb.correct is right


@pytest.mark.parametrize("answer, right", [
    ("-inf 1", True), ("−∞ 1", True), ("-1e12 1", False), ("inf 1", False), ("0 1", False),
])
def test_minus_infinity_matches_only_minus_infinity(answer, right):
    fb = grade(one_part([[-math.inf, 1]], decimals=0), answer)
    assert fb.correct is right
    assert bool(fb.parts["A"].cells[0, 0]) is right and bool(fb.parts["A"].cells[0, 1])


def test_minus_infinity_is_wrong_where_a_number_is_expected():
    fb = grade(one_part([[0, 1]], decimals=0), "-inf 1")
    assert fb.graded and not fb.correct
    assert fb.parts["A"].cells.tolist() == [[False, True]]


# ---------------------------------------------------------------- shapes and format errors


def test_shape_mismatch_names_both_shapes_and_gives_no_score():
    ex = exercises.generate("softmax", seed=1, level=2)  # A is 3×3
    fb = grade(ex, "1 2 3; 4 5 6")
    part = fb.parts["A"]
    assert fb.score is None and not fb.graded and not fb.correct
    assert part.score is None and part.cells is None
    text = str(part.format_error)
    assert "3×3" in text and "2×3" in text
    fb = grade(ex, np.zeros((3, 4)))
    assert fb.score is None and "3×4" in str(fb.parts["A"].format_error)


def test_format_error_is_not_a_wrong_answer():
    ex = exercises.generate("softmax", seed=1, level=2)
    fb = grade(ex, "1 0 0; 0.12 0.88 0; 1/3 1/3 x")
    part = fb.parts["A"]
    assert fb.score is None and not fb.graded and not fb.correct
    assert part.format_error is not None and part.score is None and part.cells is None
    assert set(part.cell_errors) == {(2, 2)}  # 0-based (row, col)
    assert "row 3, column 3" in str(part.cell_errors[(2, 2)]) and t("part.A") in str(part.cell_errors[(2, 2)])
    assert fb.message is not None and fb.message.key == "grade.invalid"


def test_grid_of_cell_texts_reports_errors_by_cell():
    ex = exercises.generate("softmax", seed=1, level=2)
    ref = ex.part("A").reference
    grid = [[f"{x:.4f}" for x in row] for row in ref]
    assert grade(ex, grid).correct
    grid[0][1] = "x"
    grid[2][0] = ""
    fb = grade(ex, grid)
    part = fb.parts["A"]
    assert fb.score is None
    assert set(part.cell_errors) == {(0, 1), (2, 0)}
    assert "row 1, column 2" in str(part.cell_errors[(0, 1)]).lower()
    assert "2 cells" in str(part.format_error)


def test_grid_with_one_wrong_cell_is_graded_cell_by_cell():
    ex = exercises.generate("softmax", seed=1, level=2)
    grid = [[f"{x:.4f}" for x in row] for row in ex.part("A").reference]
    grid[1][1] = "0.5"
    fb = grade(ex, grid)
    assert fb.graded and not fb.correct
    expected = np.ones((3, 3), dtype=bool)
    expected[1, 1] = False
    np.testing.assert_array_equal(fb.parts["A"].cells, expected)


# ---------------------------------------------------------------- partial credit and marks


def test_partial_credit_is_the_share_of_right_cells_per_part_and_the_mean_over_parts():
    ex = exercises.generate("masking", seed=4, level=2)  # parts masked and A
    masked, A = ex.part("masked").reference, np.array(ex.part("A").reference)
    A_wrong = A.copy()
    A_wrong[0, 0] += 1  # two cells of A wrong
    A_wrong[2, 1] += 1
    fb = grade(ex, {"masked": masked, "A": A_wrong})
    assert fb.parts["masked"].score == 1.0
    assert fb.parts["A"].score == pytest.approx(7 / 9)
    assert fb.score == pytest.approx((1 + 7 / 9) / 2)
    assert not fb.correct and fb.parts["masked"].correct and not fb.parts["A"].correct
    marks = fb.parts["A"].status
    assert marks[0, 0] == WRONG and marks[2, 1] == WRONG and (marks == RIGHT).sum() == 7
    assert fb.message.key == "grade.some_wrong" and fb.message.params == {"right": 16, "total": 18}


def test_all_right_answer_scores_one_with_every_cell_marked():
    ex = exercises.generate("scores", seed=3, level=1)
    fb = grade(ex, as_text(ex.part("scores").reference))
    assert fb.correct and fb.score == 1.0 and fb.misconception is None
    assert fb.parts["scores"].cells.all() and (fb.parts["scores"].status == RIGHT).all()
    assert fb.message.key == "grade.all_right"


def test_numeric_array_answers_are_accepted():
    ex = exercises.generate("scores", seed=3, level=1)
    ref = ex.part("scores").reference
    assert grade(ex, ref).correct
    assert grade(ex, ref.tolist()).correct
    assert grade(ex, {"scores": ref + 0.0}).correct


# ---------------------------------------------------------------- dict answers and part names


def test_dict_answer_with_text_and_arrays():
    ex = exercises.generate("masking", seed=4, level=2)
    fb = grade(ex, {"masked": as_text(ex.part("masked").reference), "A": np.array(ex.part("A").reference)})
    assert fb.correct and fb.score == 1.0


def test_unknown_part_name_is_a_message_and_no_score():
    ex = exercises.generate("masking", seed=4, level=2)
    fb = grade(ex, {"masked": "0", "B": "1"})
    assert fb.score is None and not fb.correct and fb.parts == {}
    assert fb.message.key == "grade.unknown_part"
    assert "'B'" in str(fb.message) and "masked" in str(fb.message) and "A" in str(fb.message)


def test_bare_answer_to_a_several_part_exercise_is_refused():
    ex = exercises.generate("masking", seed=4, level=2)
    fb = grade(ex, "1 2 3")
    assert fb.score is None and fb.message.key == "grade.several_parts"


def test_missing_part_is_a_format_error():
    ex = exercises.generate("masking", seed=4, level=2)
    fb = grade(ex, {"masked": ex.part("masked").reference})
    assert fb.score is None
    assert fb.parts["A"].format_error.key == "grade.missing_part"
    assert fb.parts["masked"].format_error is None


def test_multiple_choice_part_accepts_letter_number_or_index():
    ex = one_part([[1]], decimals=0, name="choice", options=("first", "second", "third"))
    for answer in ("B", "b", " 2 ", 1):
        assert grade(ex, answer).correct, answer
    assert not grade(ex, "C").correct and grade(ex, "C").graded
    for answer in ("Z", "4", 5, True, "1/2"):
        fb = grade(ex, answer)
        assert fb.score is None and fb.parts["choice"].format_error.key == "parse.choice", answer


def test_feedback_summary_is_plain_data():
    import json

    ex = exercises.generate("masking", seed=4, level=2)
    fb = grade(ex, {"masked": ex.part("masked").reference, "A": "1 2 x; 1 1 1; 1 1 1"})
    d = json.loads(json.dumps(fb.to_dict()))
    assert d["score"] is None and d["parts"]["A"]["format_error"]["key"]


# ---------------------------------------------------------------- misconceptions


@pytest.mark.parametrize("level", [1, 2, 3])
@pytest.mark.parametrize("seed", range(8))
def test_column_softmax_is_diagnosed(seed, level):
    ex = exercises.generate("softmax", seed=seed, level=level)
    z = given_matrix(ex, "masked" if "masked" in ex.given else "scaled")
    wrong = column_softmax(z)  # (n, n)
    for answer in (wrong, np.round(wrong, 2)):
        fb = grade(ex, answer)
        assert fb.graded and fb.score < 1.0
        assert fb.misconception == "softmax_columns"
        assert fb.parts["A"].misconception == "softmax_columns"


@pytest.mark.parametrize("level", [1, 2, 3])
@pytest.mark.parametrize("seed", range(8))
def test_transposed_scores_are_diagnosed(seed, level):
    ex = exercises.generate("scores", seed=seed, level=level)
    Q, K = given_matrix(ex, "Q"), given_matrix(ex, "K")
    fb = grade(ex, K @ Q.T)  # (n, n): the transpose of the right scores
    assert fb.graded and not fb.correct
    assert fb.misconception == "transposed_scores"


def test_a_random_wrong_answer_names_no_misconception():
    ex = exercises.generate("scores", seed=2, level=2)
    wrong = np.array(ex.part("scores").reference)
    wrong[0, 0] += 7
    fb = grade(ex, wrong)
    assert not fb.correct and fb.misconception is None


def test_no_scaling_is_diagnosed_in_the_scaling_kind():
    ex = exercises.generate("scaling", seed=5, level=2)
    fb = grade(ex, given_matrix(ex, "scores"))
    assert fb.misconception == "no_scaling"
    fb = grade(ex, given_matrix(ex, "scores") / ex.given["d_k"])
    assert fb.misconception == "scaled_by_dk"


# ---------------------------------------------------------------- carry-forward


def diagonal_masked(scaled: np.ndarray) -> np.ndarray:
    n = scaled.shape[0]
    out = np.array(scaled, dtype=float)  # (n, n)
    out[np.triu(np.ones((n, n), dtype=bool), k=0)] = -np.inf  # the diagonal masked too
    return out


def softmax_rows_or_nan(z: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        e = np.exp(z - z.max(axis=1, keepdims=True))  # (n, n); an all −∞ row gives NaN
        return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("seed", range(6))
def test_masking_level_2_carries_a_diagonal_mistake_forward(seed):
    ex = exercises.generate("masking", seed=seed, level=2)
    masked_wrong = diagonal_masked(given_matrix(ex, "scaled"))
    A_own = softmax_rows_or_nan(masked_wrong)
    A_own[0] = ex.part("A").reference[0]  # row 0 is all −∞ in the wrong mask: the learner keeps the right row
    fb = grade(ex, {"masked": masked_wrong, "A": A_own})
    masked, A = fb.parts["masked"], fb.parts["A"]
    n = masked_wrong.shape[0]
    assert masked.misconception == "mask_diagonal"
    assert list(np.diag(masked.status)) == [WRONG] * n
    assert masked.score == pytest.approx(1 - n / n**2)
    # A computed correctly from the learner's own masked matrix: consistent, credited, not "correct"
    assert A.consistent and not A.correct
    assert set(A.status[1:].ravel()) <= {RIGHT, CONSISTENT} and (A.status == CONSISTENT).any()
    assert not (A.status == WRONG).any()
    assert A.score == 1.0
    assert fb.misconception == "mask_diagonal"


def test_a_wrong_A_from_a_right_mask_is_not_consistent():
    ex = exercises.generate("masking", seed=0, level=2)
    A_wrong = np.array(ex.part("A").reference)[::-1]  # rows in the wrong order
    fb = grade(ex, {"masked": ex.part("masked").reference, "A": A_wrong})
    assert not fb.parts["A"].consistent
    assert (fb.parts["A"].status == WRONG).any()


# ---------------------------------------------------------------- every kind grades its own reference

KIND_LEVELS = [(kind_id, level) for kind_id, kind in exercises.KINDS.items() for level in kind.LEVELS]
SEEDS = range(6)


def letter(part: Part) -> str:
    return chr(ord("A") + int(part.reference[0, 0]))


@pytest.mark.parametrize("kind_id, level", KIND_LEVELS)
def test_the_reference_of_every_part_scores_one_choice_parts_included(kind_id, level):
    for seed in SEEDS:
        ex = generated.exercise(kind_id, seed, level)
        where = f"{kind_id} level {level} seed {seed}"
        answers = {
            "reference": {p.name: p.reference for p in ex.parts},
            "letters": {p.name: letter(p) if p.is_choice else p.reference for p in ex.parts},
            "lower-case letters": {p.name: letter(p).lower() if p.is_choice else p.reference for p in ex.parts},
            "index": {p.name: int(p.reference[0, 0]) if p.is_choice else p.reference for p in ex.parts},
        }
        for form, answer in answers.items():
            fb = grade(ex, answer)
            assert fb.score == 1.0 and fb.correct, (where, form, str(fb.message))
            assert fb.message.key == "grade.all_right", (where, form)


def choice_exercise() -> Exercise:
    return one_part([[1]], decimals=0, name="choice", options=("first", "second", "third"))


@pytest.mark.parametrize("answer", [
    1, np.int64(1), np.int32(1), 1.0, np.float64(1.0), np.array([[1.0]]), np.array([[1]]), [[1]], [[1.0]], [1],
    np.array(1), "B", "b", " b ", "2", " 2 ",  # an index as a number is 0-based; as text it is the option's number
])
def test_a_choice_reads_its_index_in_every_numeric_form_and_its_letter(answer):
    fb = grade(choice_exercise(), answer)
    assert fb.correct and fb.score == 1.0, repr(answer)


@pytest.mark.parametrize("answer", [1.5, math.nan, math.inf, True, np.bool_(True), [[1, 2]], np.zeros((2, 1)),
                                    3, -1, np.int64(7), "0", "4", "2.0", "BB", "", [], [[]]])
def test_a_choice_refuses_what_names_no_option(answer):
    fb = grade(choice_exercise(), answer)
    assert fb.score is None and not fb.correct, repr(answer)
    assert fb.parts["choice"].format_error.key == "parse.choice", repr(answer)


def test_a_wrong_choice_index_is_graded_wrong():
    for answer in (0, 2.0, np.array([[2]]), "A", "c"):
        fb = grade(choice_exercise(), answer)
        assert fb.graded and not fb.correct and fb.score == 0.0, repr(answer)


# ---------------------------------------------------------------- correct, score and the summary


def rounded_student(ex: Exercise) -> dict[str, np.ndarray]:
    """attention: A rounded to 2 decimals as the prompt says, O computed on from the rounded A."""
    A = np.round(ex.part("A").reference, 2)  # (n, n)
    V = ex.part("V").reference if "V" in ex.part_names else given_matrix(ex, "V")  # asked from level 2 on
    return {**{p.name: p.reference for p in ex.parts}, "A": A, "O": A @ V}


def test_rounding_as_told_is_right():
    """(Was: O from the rounded A only "consistent", score 100% beside "not right yet"): a
    student who rounds A as the prompt says and computes O from it is right, every cell."""
    ex = exercises.generate("attention", seed=0, level=1)
    fb = grade(ex, rounded_student(ex))
    assert all((p.status == RIGHT).all() for p in fb.parts.values())
    assert fb.correct and fb.score == 1.0 and fb.message.key == "grade.all_right"


def test_correct_means_every_cell_right_while_score_credits_consistent_cells():
    """A cell that follows from an earlier *wrong* value is consistent: credited in the score, not
    right, so `correct` is false and the summary counts it."""
    ex = exercises.generate("attention", seed=0, level=1)
    answer = {p.name: p.reference for p in ex.parts}
    A = answer["A"].copy()
    row = next(i for i in range(len(A)) if not np.allclose(A[i], A[i][::-1]))  # a row its reverse changes
    A[row] = A[row][::-1]  # a wrong row of A, carried into O
    answer.update(A=A, O=A @ given_matrix(ex, "V"))
    fb = grade(ex, answer)
    assert (fb.parts["A"].status[row] == WRONG).any(), f"attention level 1 seed 0: row {row + 1} of A reversed"
    O = fb.parts["O"]
    consistent = int((O.status == CONSISTENT).sum())
    assert consistent > 0 and not (O.status == WRONG).any()
    assert O.score == 1.0  # consistent cells score in full
    assert not O.correct and not fb.correct  # ... but they are not right
    total = sum(p.cells.size for p in fb.parts.values())
    right = sum(int(p.cells.sum()) for p in fb.parts.values())
    summary = fb.message.params.get("summary", fb.message)  # the message may add how the score is made
    assert summary.key == "grade.some_wrong_consistent"
    assert summary.params == {"right": right, "consistent": consistent, "total": total}


def test_the_message_counts_what_the_score_counts():
    """backprop_loss level 1 seed 1: G_O wrong, G_A computed from it. The score (50 %) credits the
    consistent cells; the message says how many are right and how many consistent, and that the score is
    the mean over the parts (the cells' share, 9 of 15, would read 60 %)."""
    ex = exercises.generate("backprop_loss", seed=1, level=1)
    V = given_matrix(ex, "X") @ given_matrix(ex, "W_V")
    G_O = 2 * np.array(ex.part("G_O").reference)
    fb = grade(ex, {"G_O": G_O, "G_A": G_O @ V.T})
    case = "backprop_loss level 1 seed 1, G_O doubled and carried forward"
    statuses = np.concatenate([p.status.ravel() for p in fb.parts.values()])
    right, consistent = int((statuses == RIGHT).sum()), int((statuses == CONSISTENT).sum())
    assert (right, consistent, statuses.size) == (1, 8, 15) and round(100 * fb.score) == 50, case
    assert fb.message.key == "grade.score_mean_of_parts" and fb.message.params["parts"] == 2, case
    summary = fb.message.params["summary"]
    assert summary.key == "grade.some_wrong_consistent", case
    assert summary.params == {"right": right, "consistent": consistent, "total": 15}, case
    assert "1 of 15 cells right, 8 more consistent" in fb.message.render("en"), case
    assert "15 个格子中 1 个正确，另有 8 个" in fb.message.render("zh"), case


@pytest.mark.parametrize("kind_id, level", [("attention", 1), ("backprop", 1), ("masking", 2), ("softmax", 1)])
def test_a_message_without_the_mean_sentence_has_the_scores_share_of_cells(kind_id, level):
    """Every cell counted once: right + consistent + wrong = all cells; when the message does not say the
    score is a mean over parts, (right + consistent) / cells reads as the score does."""
    for seed in range(10):
        ex = generated.exercise(kind_id, seed, level)
        answer = {p.name: np.array(p.reference, dtype=float) for p in ex.parts}
        first = ex.parts[0].name
        answer[first] = answer[first] + 1  # every cell of the first part wrong, later parts as they are
        fb = grade(ex, answer)
        case = f"{kind_id} level {level} seed {seed}"
        summary = fb.message
        while summary.key in ("grade.explained", "grade.score_mean_of_parts"):
            summary = summary.params["summary"]
        statuses = np.concatenate([p.status.ravel() for p in fb.parts.values()])
        assert summary.params["right"] == int((statuses == RIGHT).sum()), case
        assert summary.params.get("consistent", 0) == int((statuses == CONSISTENT).sum()), case
        assert summary.params["total"] == statuses.size, case
        if fb.message.key != "grade.score_mean_of_parts":
            share = (statuses != WRONG).mean()
            assert round(100 * share) == round(100 * fb.score), f"{case}: score {fb.score}, cells {share}"


@pytest.mark.parametrize("kind_id, level", KIND_LEVELS)
def test_correct_and_the_summary_agree_with_the_cells(kind_id, level):
    rng = np.random.default_rng(13)
    for seed in range(4):
        ex = generated.exercise(kind_id, seed, level)
        candidates = [exercises.cli.selftest.correct_answer(ex), exercises.cli.selftest.incorrect_answer(ex, rng)]
        if {"A", "O"} <= set(ex.part_names) and "V" in ex.given:  # attention: consistent cells
            candidates.append(rounded_student(ex))
        for answer in candidates:
            fb = grade(ex, answer)
            assert fb.graded, (kind_id, level, seed)
            cells = [p.cells for p in fb.parts.values()]
            every_cell_right = all(bool(c.all()) for c in cells)
            assert fb.correct is every_cell_right, (kind_id, level, seed)
            summary = fb.message
            while summary.key in ("grade.explained", "grade.score_mean_of_parts"):
                summary = summary.params["summary"]
            assert (summary.key == "grade.all_right") is every_cell_right
            if fb.correct:
                assert fb.score == 1.0
            else:
                right = sum(int(c.sum()) for c in cells)
                assert summary.params["right"] == right < sum(c.size for c in cells), (kind_id, level, seed)
                assert summary.params["total"] == sum(c.size for c in cells)
