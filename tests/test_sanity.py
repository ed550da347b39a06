"""Sanity checks: properties of any right answer, shown as warnings, never scored."""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from exercises.cli import selftest
from exercises.core import pipeline, sanity
from exercises.core.model import Exercise, Part
from exercises.i18n import languages
from tests import generated
from tests.answers import near_answers

SEEDS = range(30)
CASES = [(kind, level) for kind, module in exercises.KINDS.items() for level in module.LEVELS]


def exercise(kind: str, level: int, seed: int) -> Exercise:
    return generated.exercise(kind, seed, level)


def keys(warnings) -> list[str]:
    return [w.key for w in warnings]


def make(given: dict, names: list[str], decimals: int = 2, kind: str = "softmax") -> Exercise:
    env = pipeline.run(given)
    parts = tuple(Part(name=n, shape=env[n].shape, reference=env[n], decimals=decimals) for n in names)
    return Exercise(kind=kind, seed=0, level=2, version=1, given=given, parts=parts)


CAUSAL = {"scaled": np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 2.0], [2.0, 0.0, 1.0]]), "causal": True}


# ---------------------------------------------------------------- never on a right answer


@pytest.mark.parametrize("kind,level", CASES)
def test_a_right_answer_exact_or_rounded_gets_no_warning(kind, level):
    for seed in SEEDS:
        ex = exercise(kind, level, seed)
        exact = {p.name: p.reference for p in ex.parts if not p.is_choice}
        rounded = {name: np.round(v, 2) if ex.part(name).decimals >= 2 else v for name, v in exact.items()}
        assert sanity.check(ex, exact) == [], (kind, level, seed)
        assert sanity.check(ex, rounded) == [], (kind, level, seed)
        answer = {p.name: int(p.reference[0, 0]) if p.is_choice else rounded[p.name] for p in ex.parts}
        fb = exercises.grade(ex, answer)
        assert fb.correct and fb.warnings == [], (kind, level, seed)


# ---------------------------------------------------------------- each property


def test_rows_of_a_must_sum_to_one():
    ex = make(CAUSAL, ["A"])
    columns = pipeline.run(CAUSAL, mistakes={"softmax_columns"})["A"]
    assert "sanity.rows_sum_one" in keys(sanity.check(ex, {"A": columns}))
    after = pipeline.run(CAUSAL, mistakes={"mask_after_softmax"})["A"]
    found = sanity.check(ex, {"A": after})
    assert keys(found) == ["sanity.rows_sum_one"]
    assert str(found[0].params["rows"]) == "rows 1, 2", "row 3 sees every key, so its sum is still 1"
    assert str(found[0]).endswith("Check rows 1, 2.")


def test_masked_weights_must_be_zero():
    ex = make(CAUSAL, ["A"])
    leaky = pipeline.run(CAUSAL, mistakes={"mask_zero_instead_of_inf"})["A"]
    found = sanity.check(ex, {"A": leaky})
    assert keys(found) == ["sanity.hidden_weight_zero"]
    assert str(found[0].params["cells"]) == "cells (1, 2), (1, 3), (2, 3)"


def test_weights_lie_between_zero_and_one():
    ex = make(CAUSAL, ["A"])
    bare = pipeline.run(CAUSAL, mistakes={"softmax_no_normalise"})["A"]
    assert keys(sanity.check(ex, {"A": bare}))[:2] == ["sanity.weights_range", "sanity.rows_sum_one"]


def test_minus_infinity_only_above_the_diagonal_of_the_mask():
    ex = make(CAUSAL, ["masked", "A"])
    no_mask = pipeline.run(CAUSAL, mistakes={"no_mask"})["masked"]
    assert keys(sanity.check(ex, {"masked": no_mask})) == ["sanity.mask_missing_inf"]
    diagonal = pipeline.run(CAUSAL, mistakes={"mask_diagonal"})["masked"]
    found = sanity.check(ex, {"masked": diagonal})
    assert keys(found) == ["sanity.mask_extra_inf"] and str(found[0].params["cells"]) == "cells (1, 1), (2, 2), (3, 3)"
    lower = pipeline.run(CAUSAL, mistakes={"mask_wrong_triangle"})["masked"]
    assert keys(sanity.check(ex, {"masked": lower})) == ["sanity.mask_missing_inf", "sanity.mask_extra_inf"]
    A = pipeline.run(CAUSAL)["A"].copy()
    A[0, 1] = -np.inf
    assert "sanity.inf_outside_mask" in keys(sanity.check(ex, {"A": A}))


def test_minus_infinity_in_scores_is_flagged():
    ex = exercise("scores", 2, 3)
    S = np.array(ex.part("scores").reference)
    S[0, 1] = -np.inf
    found = sanity.check(ex, {"scores": S})
    assert keys(found) == ["sanity.inf_outside_mask"] and str(found[0].params["cells"]) == "cell (1, 2)"


def test_rows_of_the_softmax_gradient_sum_to_zero_and_hidden_cells_get_none():
    given = {"A": pipeline.run(CAUSAL)["A"], "G_A": np.array([[1.0, 2.0, 0.0], [2.0, -1.0, 1.0], [0.0, 1.0, 3.0]]),
             "causal": True}
    ex = make(given, ["G_scaled"], kind="grad_softmax")
    missing = pipeline.run(given, mistakes={"softmax_grad_missing_term"})["G_scaled"]
    assert "sanity.rows_sum_zero" in keys(sanity.check(ex, {"G_scaled": missing}))
    leaked = np.array(ex.part("G_scaled").reference)
    leaked[0, 2] = 0.5
    assert keys(sanity.check(ex, {"G_scaled": leaked})) == ["sanity.rows_sum_zero", "sanity.hidden_gradient_zero"]
    flipped = pipeline.run(given, mistakes={"softmax_grad_sign"})["G_scaled"]
    assert sanity.check(ex, {"G_scaled": flipped}) == [], "a flipped sign keeps every property: no warning"


def test_an_output_lies_within_its_column_of_v():
    given = {"A": np.array([[0.5, 0.5], [1.0, 0.0]]), "V": np.array([[1.0, 4.0], [3.0, 2.0]]), "causal": False}
    ex = make(given, ["O"], kind="weighted_sum")
    O = np.array(ex.part("O").reference)
    O[1, 0] = 5.0  # column 1 of V runs from 1 to 3
    found = sanity.check(ex, {"O": O})
    assert keys(found) == ["sanity.output_range"] and str(found[0].params["cells"]) == "cell (2, 1)"


def test_columns_of_grad_v_add_up_to_those_of_grad_o():
    given = {"A": np.array([[1.0, 0.0], [0.25, 0.75]]), "V": np.array([[1.0, 2.0], [0.0, 1.0]]),
             "G_O": np.array([[1.0, 2.0], [3.0, -1.0]]), "causal": True}
    ex = make(given, ["G_A", "G_V"], kind="grad_weighted_sum")
    wrong = pipeline.run(given, mistakes={"grad_v_no_transpose"})["G_V"]
    assert keys(sanity.check(ex, {"G_V": wrong})) == ["sanity.grad_v_columns"]


def test_embedding_gradient_rows_of_unused_tokens_and_totals():
    given = {"token_ids": np.array([0, 2, 0]), "E": np.ones((4, 2)), "G_X": np.array([[1.0, 2.0], [3.0, 0.0], [1.0, 1.0]])}
    ex = make(given, ["G_E"], kind="grad_embedding")
    overwritten = pipeline.run(given, mistakes={"embedding_grad_no_accumulate"})["G_E"]
    assert keys(sanity.check(ex, {"G_E": overwritten})) == ["sanity.grad_e_total"]
    stray = np.array(ex.part("G_E").reference)
    stray[3] = [1.0, 0.0]  # token 3 never appears
    found = sanity.check(ex, {"G_E": stray})
    assert keys(found) == ["sanity.unused_token", "sanity.grad_e_total"] and str(found[0].params["tokens"]) == "token 3"


def test_a_transposed_shape_gets_its_own_word_and_no_score():
    ex = exercise("weighted_sum", 3, 1)
    O = ex.part("O").reference
    assert O.shape[0] != O.shape[1]
    fb = exercises.grade(ex, {"O": O.T})
    assert fb.score is None and fb.parts["O"].format_error.key == "grade.shape"
    assert keys(fb.warnings) == ["sanity.transposed_shape"]
    assert fb.warnings[0].params["rows"] == O.shape[0] and fb.warnings[0].params["got_rows"] == O.shape[1]


def test_a_part_that_only_shares_a_name_is_left_alone():
    """The shapes kind's part "A" is (rows, columns) of A: the weight checks do not apply to it."""
    ex = exercise("shapes", 1, 0)
    part = ex.part("A")
    assert sanity.rules(ex, part) == [sanity._infinities]
    assert sanity.check(ex, {"A": np.array([[7.0, 7.0]])}) == []


def test_warnings_never_change_the_score(monkeypatch):
    ex = make(CAUSAL, ["masked", "A"])
    wrong = {name: pipeline.run(CAUSAL, mistakes={"mask_zero_instead_of_inf"})[name] for name in ("masked", "A")}
    fb = exercises.grade(ex, wrong)
    assert fb.warnings, "the zeros above the diagonal are flagged"
    monkeypatch.setattr(sanity, "check", lambda ex, values: [])
    silent = exercises.grade(ex, wrong)
    assert silent.warnings == []
    assert (fb.score, fb.correct, fb.misconception) == (silent.score, silent.correct, silent.misconception)
    assert all((fb.parts[n].status == silent.parts[n].status).all() for n in ex.part_names)
    assert fb.misconception == "mask_zero_instead_of_inf"


def test_unreadable_parts_still_get_warnings_for_the_readable_ones():
    ex = make(CAUSAL, ["masked", "A"])
    columns = pipeline.run(CAUSAL, mistakes={"softmax_columns"})["A"]
    fb = exercises.grade(ex, {"masked": "1 2; oops", "A": columns})
    assert not fb.graded and "sanity.rows_sum_one" in keys(fb.warnings)


@pytest.mark.parametrize("lang", languages())
def test_every_warning_renders_without_raw_keys_or_placeholders(lang):
    samples = [sanity.check(make(CAUSAL, ["masked", "A"]),
                            {"masked": pipeline.run(CAUSAL, mistakes={m})["masked"],
                             "A": pipeline.run(CAUSAL, mistakes={m})["A"]})
               for m in ("no_mask", "mask_diagonal", "mask_zero_instead_of_inf", "softmax_no_normalise")]
    rendered = [w.render(lang) for found in samples for w in found]
    assert rendered
    for text in rendered:
        assert "sanity." not in text and "{" not in text and "part." not in text, text


@pytest.mark.parametrize("kind", list(exercises.KINDS))
def test_any_matrix_of_any_shape_gets_warnings_not_errors(kind):
    """Whatever a learner types (−∞ anywhere, huge numbers, any shape), the checks only warn."""
    rng = np.random.default_rng(6)
    for level in exercises.KINDS[kind].LEVELS:
        ex = exercise(kind, level, 0)
        for _ in range(25):
            values = {}
            for part in ex.parts:
                shape = part.shape if rng.random() < 0.7 else (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
                value = rng.choice([-np.inf, -1e6, -2.0, 0.0, 0.5, 1.0, 3.0, 1e6], size=shape)
                values[part.name] = value
            for message in sanity.check(ex, values):
                assert message.key.startswith("sanity.") and message.render("en")
            fb = exercises.grade(ex, {p.name: values[p.name] if not p.is_choice else 0 for p in ex.parts})
            assert all(w.key.startswith("sanity.") for w in fb.warnings)


def test_a_single_row_reads_in_the_singular_in_both_languages():
    ex = make(CAUSAL, ["A"])
    A = np.array(ex.part("A").reference)
    A[1] = A[1] * 2  # only row 2 no longer sums to 1
    (found,) = [m for m in sanity.check(ex, {"A": A}) if m.key == "sanity.rows_sum_one"]
    assert found.render("en").endswith("Check row 2.")
    assert found.render("zh").endswith("请检查第 2 行。")


def _check_as_before(ex, values):
    """sanity.check as it was: every rule that holds for the reference (sanity.rules) put to the answer."""
    read = {name: np.atleast_2d(np.asarray(v, dtype=float)) for name, v in values.items()
            if name in ex.part_names and not ex.part(name).is_choice}
    env = {**pipeline.reference_env(ex), **{k: v for k, v in read.items() if v.shape == ex.part(k).shape}}
    warnings = []
    for part in ex.parts:
        value = read.get(part.name)
        if value is None:
            continue
        if value.shape != part.shape:
            if value.shape == part.shape[::-1]:
                warnings.append(("transposed", part.name))
            continue
        if np.isnan(value).any():
            continue
        for rule in sanity.rules(ex, part):
            warnings.extend(rule(ex, part, value, env))
    return warnings


@pytest.mark.parametrize("kind", list(exercises.KINDS))
def test_sanity_puts_a_rule_to_the_reference_only_when_the_answer_fails_it(kind):
    """check() tries every rule on the answer first and asks whether it holds for the reference only
    when it warns: the same warnings, in the same order, as putting only the rules that hold."""
    rng = np.random.default_rng(11)
    for level in exercises.KINDS[kind].LEVELS:
        for seed in range(2):
            ex = generated.exercise(kind, seed, level)
            before = exercises.Exercise.from_dict(ex.to_dict())  # the same exercise, nothing memoised
            for _ in range(8):
                values = {}
                for part in ex.parts:
                    value = np.array(part.reference, dtype=float)
                    if rng.random() < 0.6:
                        value = value + rng.choice([0.0, 0.004, -0.3, 1.0], size=part.shape)
                    if rng.random() < 0.2:
                        value[tuple(rng.integers(s) for s in part.shape)] = rng.choice([-np.inf, 2.0, -1.0])
                    values[part.name] = value
                got = [w.to_dict() for w in sanity.check(ex, values)]
                want = [w if isinstance(w, tuple) else w.to_dict() for w in _check_as_before(before, values)]
                assert [w for w in got if w["key"] != "sanity.transposed_shape"] == want


@pytest.mark.parametrize("kind", list(exercises.KINDS))
def test_a_quiet_rule_decides_as_its_warnings(kind):
    rng = np.random.default_rng(21)
    asked = 0
    for level in exercises.KINDS[kind].LEVELS:
        for seed in range(2):
            ex = generated.exercise(kind, seed, level)
            env = pipeline.reference_env(ex)
            for values in [{p.name: np.array(p.reference, dtype=float) for p in ex.parts}, *near_answers(ex, rng)]:
                for part in ex.parts:
                    value = values[part.name]
                    if part.is_choice or np.isnan(value).any():
                        continue
                    for rule in sanity._checks(part.name):
                        said = bool(rule(ex, part, value, env))
                        assert rule(ex, part, value, env, say=False) is said, (kind, part.name, rule.__name__)
                        finite = bool(np.isfinite(value).all())
                        assert rule(ex, part, value, env, say=False, finite=finite) is said
                        asked += 1
    assert asked


def test_an_answer_right_in_every_cell_is_not_sanity_checked_and_would_have_had_no_warning(monkeypatch):
    """grade skips the sanity rules when every cell is right: over every kind and level, the careful
    student's answer (rounded as told) would have had no warning either; a wrong answer is still checked."""

    checked = []
    real = sanity.check
    monkeypatch.setattr(sanity, "check", lambda ex, values: checked.append(ex.kind) or real(ex, values))
    for kind, k in exercises.KINDS.items():
        for level in k.LEVELS:
            for seed in range(4):
                ex = generated.exercise(kind, seed, level)
                answer = selftest.correct_answer(ex)
                fb = exercises.grade(ex, answer)
                assert fb.correct and fb.warnings == [] and not checked, (kind, level, seed)
                read = {p.name: np.asarray(fb.parts[p.name].value, dtype=float) for p in ex.parts}
                assert real(ex, sanity.Values(read, set())) == [], (kind, level, seed)
    ex = exercises.generate("softmax", 0, 1)
    wrong = {p.name: np.full(p.shape, 0.9) for p in ex.parts}
    fb = exercises.grade(ex, wrong)
    assert checked == ["softmax"] and fb.warnings


def test_an_answer_right_at_the_edge_of_its_tolerance_gets_no_false_alarm():
    """G_O and G_A typed just under the reference and G_V just over it (each cell within its tolerance)
    is right in every cell; the G_V column rule, comparing two typed sums, would have warned (before
    grade skipped the rules for right answers it did: sanity.grad_v_columns)."""
    ex = exercises.generate("backprop_loss", 0, 3)  # the level that asks G_V
    shift = {"G_O": -0.98, "G_A": -0.98, "G_V": 0.98}
    answer = {p.name: p.reference + shift.get(p.name, 0.0) * p.tolerance for p in ex.parts}
    fb = exercises.grade(ex, answer)
    assert fb.correct and fb.warnings == []
    read = {name: np.asarray(value, dtype=float) for name, value in answer.items()}
    assert [w.key for w in sanity.check(ex, sanity.Values(read, set(read)))] == ["sanity.grad_v_columns"]
