"""Worked solutions: the golden example, agreement with the grader's references, any cell explained, aids."""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from exercises import solutions
from exercises.core import pipeline
from exercises.core.model import Exercise, Part
from exercises.i18n import catalog
from tests import generated

SQRT2_2 = r"\frac{\sqrt{2}}{2}"


def golden_exercise() -> Exercise:
    """DESIGN §10: X = [[1,0],[0,1],[1,1]], W_Q = W_K = W_V = I₂, causal, d_k = 2; asks A and O."""
    I = np.eye(2)
    given = {"X": np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), "W_Q": I, "W_K": I, "W_V": I,
             "d_k": 2, "causal": True}
    env = pipeline.run(given)
    parts = tuple(Part(name=n, shape=env[n].shape, reference=env[n], decimals=3) for n in ("A", "O"))
    return Exercise(kind="golden", seed=0, level=1, version=1, given=given, parts=parts)


def step_named(steps, name):
    return next(s for s in steps if s.name == name)


# ---------------------------------------------------------------- the golden example


def test_golden_walks_every_forward_step_in_order():
    steps = exercises.solve(golden_exercise())
    assert [s.name for s in steps] == ["Q", "K", "V", "scores", "scaled", "masked", "A", "O"]


def test_golden_softmax_rows_and_exact_forms():
    A = step_named(exercises.solve(golden_exercise()), "A")
    assert A.decimals == (("1.000", "0.000", "0.000"), ("0.330", "0.670", "0.000"), ("0.248", "0.248", "0.503"))
    assert A.exact is not None
    assert A.exact[0] == ("1", "0", "0")
    assert A.exact[1][0] == rf"\frac{{e^{{0}}}}{{e^{{0}} + e^{{{SQRT2_2}}}}}"
    assert A.exact[1][1] == rf"\frac{{e^{{{SQRT2_2}}}}}{{e^{{0}} + e^{{{SQRT2_2}}}}}"
    row3 = rf"e^{{{SQRT2_2}}} + e^{{{SQRT2_2}}} + e^{{\sqrt{{2}}}}"
    assert A.exact[2] == (rf"\frac{{e^{{{SQRT2_2}}}}}{{{row3}}}",) * 2 + (rf"\frac{{e^{{\sqrt{{2}}}}}}{{{row3}}}",)
    shown = A.display(exact=True)
    assert "0.330 & 0.670" in shown and "0.248 & 0.248 & 0.503" in shown
    assert A.exact[1][0] in shown
    assert r"\frac{e^{0}}" not in A.display(exact=False)


def test_golden_softmax_cell_shows_the_rows_exponentials():
    A = step_named(exercises.solve(golden_exercise()), "A")
    c = A.cell(1, 0)
    assert c.latex == (r"A_{21} = \frac{e^{\tilde{Z}_{21}}}{\sum_{k} e^{\tilde{Z}_{2k}}} = "
                       rf"\frac{{e^{{0}}}}{{e^{{0}} + e^{{{SQRT2_2}}}}} \approx \frac{{1.000}}{{1.000 + 2.028}} "
                       r"\approx 0.330")
    assert c.note.key == "solution.cell.softmax_masked_row"


def test_golden_masked_cells_say_why():
    steps = exercises.solve(golden_exercise())
    masked = step_named(steps, "masked").cell(0, 2)
    assert masked.latex == r"\tilde{Z}_{13} = -\infty \quad (j = 3 > i = 1)"
    assert masked.note.key == "solution.cell.masked"
    weight = step_named(steps, "A").cell(1, 2)
    assert weight.latex.endswith(r"= \frac{e^{-\infty}}{e^{0} + e^{\frac{\sqrt{2}}{2}}} = \frac{0}{3.028} = 0")
    assert weight.note.key == "solution.cell.masked_weight"


def test_golden_scores_cell_and_scaling():
    steps = exercises.solve(golden_exercise())
    assert step_named(steps, "scores").cell(1, 2).latex == r"S_{23} = q_{2} \cdot k_{3} = 0 \cdot 1 + 1 \cdot 1 = 1"
    scaled = step_named(steps, "scaled")
    assert scaled.exact[2] == (SQRT2_2, SQRT2_2, r"\sqrt{2}")
    assert scaled.cell(0, 0).latex == (r"Z_{11} = \frac{S_{11}}{\sqrt{d_k}} = \frac{1}{\sqrt{2}} = "
                                       rf"{SQRT2_2} \approx 0.707")
    assert scaled.cell(0, 1).latex == r"Z_{12} = \frac{S_{12}}{\sqrt{d_k}} = \frac{0}{\sqrt{2}} = 0"


def test_golden_output_rows():
    O = step_named(exercises.solve(golden_exercise()), "O")
    assert O.decimals == (("1.000", "0.000"), ("0.330", "0.670"), ("0.752", "0.752"))
    # the shown weights give 0.751 (the old line said ≈ 0.752, a sum that did not add up); the exact
    # value, whose rounding is 0.752, stands beside it
    assert O.cell(2, 0).latex == (r"O_{31} = \sum_{k} A_{3k} V_{k1} \approx 0.248 \cdot 1 + 0.248 \cdot 0 + "
                                  r"0.503 \cdot 1 = 0.751 \quad \left(O_{31} = 0.75174\ldots \approx 0.752\right)")


def test_golden_aids():
    a = exercises.aids(golden_exercise())
    assert [e.exponent for e in a.exp_table] == ["0", SQRT2_2, r"\sqrt{2}"]
    assert [e.latex for e in a.exp_table][1] == rf"e^{{{SQRT2_2}}} \approx 2.028"
    assert a.sqrt_dk.startswith(r"\sqrt{2} \approx 1.414")
    assert [name for name, _, _ in a.shapes] == ["X", "W_Q", "W_K", "W_V"]
    assert a.shapes[0][2] == r"X \in \mathbb{R}^{3 \times 2}"
    assert r"\hline" in a.table_latex()


# ---------------------------------------------------------------- every kind


def sample(kinds=None, seeds=range(6)):
    for kind in kinds or exercises.KINDS:
        for level in exercises.KINDS[kind].LEVELS:
            for seed in seeds:
                yield generated.exercise(kind, seed, level)


@pytest.mark.parametrize("kind", list(exercises.KINDS))
def test_every_part_has_a_step_holding_the_graders_reference(kind):
    for ex in sample([kind]):
        steps = exercises.solve(ex)
        assert steps, ex.id
        by_name = {s.name: s for s in steps}
        env = pipeline.run(ex.given)
        for part in ex.parts:
            if part.name in by_name:
                step = by_name[part.name]
                assert np.array_equal(step.value, part.reference, equal_nan=True), (ex.id, part.name)
                assert step.places == part.decimals or step.name not in pipeline.STEP_BY_NAME
        for step in steps:
            if step.name in env and step.name not in ex.part_names and step.name in pipeline.STEP_BY_NAME:
                assert np.array_equal(step.value, np.atleast_2d(env[step.name]), equal_nan=True), (ex.id, step.name)


@pytest.mark.parametrize("kind", list(exercises.KINDS))
def test_exact_forms_agree_with_the_values(kind):
    """Every exact cell, read back by the app's own answer parser, equals the reference (e^x forms included)."""
    checked = 0
    for ex in sample([kind], seeds=range(3)):
        for step in exercises.solve(ex):
            for (i, j), x in np.ndenumerate(step.value):
                text = step.exact_cells[i][j]
                if text is None or not np.isfinite(x) or r"\text" in text:
                    continue
                try:
                    value = exercises.parse_number(latex_to_answer(text))
                except exercises.AnswerError as err:  # e^{40}: beyond the parser's cap on typed answers
                    assert err.message.key == "parse.too_large", (ex.id, step.name, text)
                    continue
                assert abs(value - x) < 1e-9 * max(1, abs(x)), (ex.id, step.name, i, j, text, x)
                checked += 1
    assert checked > 0 or kind in {"shapes", "concepts"}


def latex_to_answer(text: str) -> str:
    """This builder's LaTeX shapes (fractions, roots, e^{…}) as answer text the parser reads."""
    import re
    for _ in range(12):
        new = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"((\1)/(\2))", text)
        new = re.sub(r"\\sqrt\{([^{}]*)\}", r"sqrt(\1)", new)
        new = re.sub(r"e\^\{([^{}]*)\}", r"exp(\1)", new)
        if new == text:
            break
        text = new
    text = text.replace(r"\cdot", "*")
    return re.sub(r"(\d)\s+(sqrt|\()", r"\1*\2", text)


def test_latex_to_answer_reads_back_the_key_shapes():
    assert exercises.parse_number(latex_to_answer(SQRT2_2)) == pytest.approx(2 ** 0.5 / 2)
    assert exercises.parse_number(latex_to_answer(r"- \frac{3 \sqrt{2}}{4}")) == pytest.approx(-3 * 2 ** 0.5 / 4)
    assert exercises.parse_number(latex_to_answer(rf"\frac{{e^{{0}}}}{{e^{{0}} + e^{{{SQRT2_2}}}}}")) == \
        pytest.approx(1 / (1 + np.exp(2 ** 0.5 / 2)))


@pytest.mark.parametrize("kind", list(exercises.KINDS))
def test_every_cell_of_every_step_has_a_derivation(kind):
    cat = catalog("en")
    for ex in sample([kind], seeds=range(3)):
        for step in exercises.solve(ex):
            assert step.title.key in cat, step.title.key
            assert step.note is None or step.note.key in cat, step.note.key
            rows, cols = step.shape
            for i in range(rows):
                for j in range(cols):
                    cell = step.cell(i, j)
                    assert cell.latex.strip(), (ex.id, step.name, i, j)
                    assert cell.note is None or cell.note.key in cat, cell.note.key
                    assert step.decimals[i][j] in cell.latex or (step.exact_cells[i][j] or "@") in cell.latex, \
                        (ex.id, step.name, i, j, cell.latex)
            with pytest.raises(IndexError):
                step.cell(rows, 0)


def test_scores_cell_is_a_dot_product_of_rows():
    ex = exercises.generate("scores", 3, 1)
    step = exercises.solve(ex)[0]
    Q, K = ex.given["Q"], ex.given["K"]
    terms = " + ".join(rf"{int(a)} \cdot {int(b)}" for a, b in zip(Q[1], K[0]))
    assert step.cell(1, 0).latex == rf"S_{{21}} = q_{{2}} \cdot k_{{1}} = {terms} = {int(Q[1] @ K[0])}"


def test_weighted_sum_with_fraction_weights_is_exact():
    for seed in range(20):
        ex = exercises.generate("weighted_sum", seed, 1)
        step = exercises.solve(ex)[0]
        if any(r"\frac" in c for row in step.exact or () for c in row):
            assert step.exact is not None
            assert r"\frac" in step.display(exact=True)
            return
    pytest.fail("no weighted_sum exercise with fractional output in 20 seeds")


def test_non_causal_softmax_reads_the_scaled_scores():
    for seed in range(30):
        ex = exercises.generate("softmax", seed, 2)
        if not ex.given.get("causal"):
            (step,) = exercises.solve(ex)
            assert r"e^{Z_{ij}}" in step.latex
            return
    pytest.fail("no non-causal softmax exercise in 30 seeds")


def test_backward_softmax_cell_derivation_subtracts_the_row_average():
    ex = exercises.generate("grad_softmax", 1, 1)
    step = step_named(exercises.solve(ex), "G_scaled")
    cell = step.cell(0, 0)
    assert r"r_{1}" in cell.latex and r"\begin{aligned}" in cell.latex


def test_masked_gradient_cell_is_zero_with_a_reason():
    for seed in range(40):
        ex = exercises.generate("grad_softmax", seed, 2)
        if ex.given.get("causal"):
            step = step_named(exercises.solve(ex), "G_scaled")
            assert step.cell(0, 1).latex == r"(G_Z)_{12} = 0"
            assert step.cell(0, 1).note.key == "solution.cell.masked_gradient"
            return
    pytest.fail("no causal grad_softmax exercise in 40 seeds")


def test_solution_is_cached_per_triple_and_per_exercise():
    first = solutions.solution("softmax", 4, 2)
    assert solutions.solution("softmax", 4, 2) is first
    ex = exercises.generate("softmax", 4, 2)
    assert exercises.solve(ex) == exercises.solve(ex)
    assert exercises.solve(ex)[0] is exercises.solve(ex)[0]
    assert [s.decimals for s in first] == [s.decimals for s in exercises.solve(ex)]
    assert exercises.solve(ex)[0] is first[0], "the triple's cache and the exercise's cache agree"
    assert exercises.aids(ex) is exercises.aids(exercises.generate("softmax", 4, 2))


def test_display_has_exact_and_decimal_modes():
    ex = exercises.generate("scaling", 0, 2)
    (step,) = exercises.solve(ex)
    assert ex.given["d_k"] == 2 or r"\sqrt{" in step.display(True)
    if ex.given["d_k"] == 2:
        assert r"\sqrt{2}" in step.display(True).split(r"\approx")[0]
        assert step.display(False).count(r"\sqrt{2}") <= 2  # only in √d_k and 1/√2 lines


def test_aids_hold_every_softmax_input_on_the_levels_grid():
    """The eˣ table is the level's fixed grid (tests/test_exp_aid.py); every exponent the softmax meets is
    on it, and a problem with no softmax has no table."""
    for ex in sample(["softmax", "masking"], seeds=range(8)):
        a = exercises.aids(ex)
        z = pipeline.run(ex.given)["masked"]  # after the mask: hidden scores need no e^x
        needs_softmax = "A" in ex.part_names
        expected = {round(float(x), 9) for x in np.ravel(z) if np.isfinite(x)} if needs_softmax else set()
        listed = {round(e.x, 9) for e in a.exp_table}
        assert expected <= listed and bool(listed) == needs_softmax, ex.id
        for e in a.exp_table:
            assert e.value == pytest.approx(np.exp(e.x))


def test_aids_give_the_root_only_when_scaling_is_computed():
    ex = exercises.generate("scaling", 2, 1)
    assert exercises.aids(ex).sqrt_dk is not None
    assert exercises.aids(exercises.generate("scores", 2, 1)).sqrt_dk is None
    assert exercises.aids(exercises.generate("scores", 2, 1)).exp_table == ()


def test_a_kind_module_can_bring_its_own_solve(monkeypatch):
    module = exercises.KINDS["scores"]
    marker = [solutions.make_step("scores", exercises.Msg("solution.step.scores"), np.ones((1, 1)), 0,
                                  formula="1")]
    monkeypatch.setattr(module, "solve", lambda ex: marker, raising=False)
    ex = exercises.generate("scores", 99, 1)
    try:
        assert exercises.solve(ex) == marker
    finally:
        solutions._solved.cache_clear()


def test_pipeline_steps_for_a_head_carry_the_tag():
    ex = golden_exercise()
    steps = solutions.pipeline_steps(ex.given, ["scores"], tag="1")
    assert steps[-1].latex == r"S^{(1)} = Q^{(1)} (K^{(1)})^{\top}"
    assert steps[-1].cell(0, 0).latex.startswith(r"S^{(1)}_{11} = q^{(1)}_{1} \cdot k^{(1)}_{1}")
    assert steps[0].latex == r"Q^{(1)} = X W_Q^{(1)} = X I = X"  # W_Q = I: read off


def test_given_latex_is_exact():
    ex = exercises.generate("weighted_sum", 0, 3)
    lines = dict(solutions.given_latex(ex))
    A = ex.given["A"]
    if any(abs(x - 1 / 3) < 1e-12 for x in np.ravel(A)):
        assert r"\frac{1}{3}" in lines["A"]
    assert "0.333" not in lines["A"]


MY_KINDS = ("attention", "shapes", "variance", "concepts")


@pytest.mark.parametrize("kind_id", MY_KINDS)
def test_solutions_show_every_part_with_its_reference(kind_id):
    for level in exercises.KINDS[kind_id].LEVELS:
        for seed in range(8):
            ex = generated.exercise(kind_id, seed, level)
            steps = exercises.solve(ex)
            by_name = {s.name: s for s in steps}
            assert len(by_name) == len(steps), [s.name for s in steps]  # one step per name
            for part in ex.parts:
                step = by_name[part.name]
                np.testing.assert_allclose(step.value, part.reference)
                for text in step.latex_strings():
                    assert text and "None" not in text
                for message in (step.title, step.note):
                    if message is not None:
                        rendered = message.render()
                        assert "{" not in rendered and not rendered.startswith(("solution.", "part.")), rendered
