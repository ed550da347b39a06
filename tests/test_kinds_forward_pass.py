"""The kinds of the forward-pass issue: attention, shapes, variance, concepts (multi_head: tests/kinds).

Each runs the generic self-test over 50 seeds per level; then what is special to each: errors carried
forward through every step of `attention`, the named wrong orders of `shapes`, the √d_k golden
example of `variance`, the wrong-option explanations of `concepts`.
"""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from attention_core import softmax
from exercises.cli import selftest
from exercises.core import pipeline
from exercises.core.grading import CONSISTENT, RIGHT, WRONG
from exercises.i18n import catalog, t
from exercises.kinds import concepts, shapes

MY_KINDS = ("attention", "shapes", "variance", "concepts")
KIND_LEVELS = [(k, level) for k in MY_KINDS for level in exercises.KINDS[k].LEVELS]
SEEDS = range(50)


def _find(kind: str, level: int, wanted, seeds=range(400)) -> exercises.Exercise:
    """The first exercise of (kind, level) that satisfies `wanted`."""
    for seed in seeds:
        ex = exercises.generate(kind, seed, level)
        if wanted(ex):
            return ex
    raise AssertionError(f"no {kind} level {level} exercise fits")


# ---------------------------------------------------------------- every kind: the generic self-test


def test_the_kinds_are_registered_in_order():
    assert set(MY_KINDS) <= set(exercises.KINDS)
    orders = [exercises.KINDS[k].ORDER for k in MY_KINDS]
    assert orders == sorted(orders) and all(70 <= o <= 110 for o in orders)


@pytest.mark.parametrize("kind_id", MY_KINDS)
def test_titles_prompts_and_part_labels_are_in_the_catalog(kind_id):
    en = catalog("en")
    for key in ("title", "summary", "prompt"):
        assert f"kind.{kind_id}.{key}" in en
    for level in exercises.KINDS[kind_id].LEVELS:
        for seed in range(10):
            ex = exercises.generate(kind_id, seed, level)
            rendered = t(f"kind.{kind_id}.prompt", **ex.params)
            assert "{" not in rendered, rendered  # every placeholder filled
            for part in ex.parts:
                assert f"part.{part.name}" in en, part.name
                if part.prompt:
                    assert "{" not in t(part.prompt, **part.params)
                for option in part.options or ():
                    assert option in en and "{" not in t(option, **part.params)


# ---------------------------------------------------------------- attention: the whole forward pass


@pytest.mark.parametrize("level", [1, 2, 3])
def test_attention_parts_follow_the_steps_and_numbers_are_hand_friendly(level):
    for seed in SEEDS:
        ex = exercises.generate("attention", seed, level)
        causal = ex.given["causal"]
        steps = ["scores", "scaled", "masked", "A", "O"] if level == 1 else \
            ["Q", "K", "V", "scores", "scaled", "masked", "A", "O"]
        if not causal:
            steps.remove("masked")
        assert ex.part_names == steps
        assert ("Q" in ex.given) == (level == 1) and ("X" in ex.given) == (level > 1)
        n = ex.part("scores").shape[0]
        assert n <= 3  # issue 14: four tokens at level 3 were 45-60 minutes of hand work
        S = ex.part("scores").reference
        step = 1.0 if level < 3 else 0.5
        np.testing.assert_array_equal(S / step, np.round(S / step))  # whole (or half) scores
        assert np.abs(S).max() <= (4 if level < 3 else 6)
        exponents = {round(float(x), 9) for x in pipeline.run(ex.given)["masked"].ravel() if np.isfinite(x)}
        assert len(exponents) <= 13  # a short e^x table covers the softmax


def _chain_answer(ex: exercises.Exercise, wrong_step: str) -> tuple[dict[str, np.ndarray], tuple[int, int]]:
    """A learner's answer: right up to `wrong_step`, one visible cell of it off by one, every later step
    computed correctly from that wrong value."""
    answer = {p.name: np.array(p.reference) for p in ex.parts}
    value = answer[wrong_step].copy()
    cell = (value.shape[0] - 1, 0)  # the last query sees the first key even under a causal mask
    value[cell] += 1.0
    answer[wrong_step] = value
    names = ex.part_names
    own = pipeline.run({**ex.given, **{k: answer[k] for k in names[:names.index(wrong_step) + 1]}})
    for later in names[names.index(wrong_step) + 1:]:
        answer[later] = np.asarray(own[later])
    return answer, cell


@pytest.mark.parametrize("level", [1, 2, 3])
def test_attention_errors_carry_forward_through_every_step(level):
    checked = set()
    for causal in (True, False):
        ex = _find("attention", level, lambda e, c=causal: e.given["causal"] == c)
        for wrong_step in ex.part_names[:-1]:
            answer, cell = _chain_answer(ex, wrong_step)
            fb = exercises.grade(ex, answer)
            where = f"level {level} causal {causal} wrong {wrong_step}"
            assert fb.graded and not fb.correct, where
            assert fb.parts[wrong_step].status[cell] == WRONG, where
            later = ex.part_names[ex.part_names.index(wrong_step) + 1:]
            for name in later:  # nothing after the slip is counted wrong …
                assert not (fb.parts[name].status == WRONG).any(), (where, name, fb.parts[name].status)
            flagged = [name for name in later if fb.parts[name].consistent]
            assert flagged, where  # … and what differs from the reference is flagged as consistent
            share_right = np.mean([np.mean(p.status == RIGHT) for p in fb.parts.values()])
            assert fb.score > share_right, where  # the method earns credit
            checked.add(wrong_step)
    assert checked >= ({"scores", "scaled", "masked", "A"} | ({"Q", "K", "V"} if level > 1 else set()))


def test_attention_consistent_cells_match_recompute_from_the_learners_values():
    ex = _find("attention", 2, lambda e: e.given["causal"])
    answer, _ = _chain_answer(ex, "scores")
    fb = exercises.grade(ex, answer)
    learner = pipeline.run({**ex.given, "scores": answer["scores"]})
    for name in ("scaled", "masked", "A", "O"):
        np.testing.assert_allclose(pipeline.recompute(name, learner), answer[name])
        consistent = fb.parts[name].status == CONSISTENT
        differs = ~np.isclose(answer[name], ex.part(name).reference, atol=0.0051)
        np.testing.assert_array_equal(consistent, differs)
        assert consistent.any(), name


def test_attention_two_independent_mistakes_are_not_consistent():
    ex = _find("attention", 1, lambda e: not e.given["causal"])
    answer, _ = _chain_answer(ex, "scores")
    answer["O"] = answer["O"] + 1.0  # a second, unrelated slip in the last step
    fb = exercises.grade(ex, answer)
    assert (fb.parts["O"].status == WRONG).all()


def test_attention_names_a_catalogued_mistake():
    ex = _find("attention", 2, lambda e: e.given["d_k"] > 1 and e.given["causal"])
    env = pipeline.run(ex.given, mistakes={"no_scaling"})
    answer = {p.name: env[p.name] for p in ex.parts}
    fb = exercises.grade(ex, answer)
    assert fb.parts["scaled"].misconception == "no_scaling"
    assert fb.misconception == "no_scaling"


# ---------------------------------------------------------------- shapes


def test_shapes_references():
    ex = _find("shapes", 3, lambda e: True)
    s = ex.params
    expected = {"Q": (s["n"], s["d_k"]), "K_T": (s["d_k"], s["n"]), "scores": (s["n"], s["n"]),
                "A": (s["n"], s["n"]), "O": (s["n"], s["d_v"]), "concat": (s["n"], s["h"] * s["d_v"]),
                "W_O": (s["h"] * s["d_v"], s["d_model"])}
    for part in ex.parts:
        assert part.shape == (1, 2) and part.decimals == 0
        assert tuple(part.reference[0]) == expected[part.name]
    assert {k: ex.given[k] for k in ("n", "d_model", "h", "d_k", "d_v")} == s


@pytest.mark.parametrize("level", [1, 2, 3])
def test_shapes_every_transposed_answer_is_named(level):
    for seed in range(30):
        ex = exercises.generate("shapes", seed, level)
        for part in ex.parts:
            rows, cols = (int(x) for x in part.reference[0])
            if rows == cols:
                continue  # n × n: a transposed answer is right
            fb = exercises.grade(ex, {**selftest.correct_answer(ex), part.name: f"{cols}, {rows}"})
            assert not fb.correct
            assert fb.parts[part.name].misconception == "shape_transposed", (seed, part.name)
            assert fb.misconception == "shape_transposed"


def test_shapes_named_mistakes_for_kt_scores_and_concat():
    ex = _find("shapes", 2, lambda e: e.params["h"] > 1)
    s = ex.params
    n, d_k, h, d_v = s["n"], s["d_k"], s["h"], s["d_v"]
    cases = {"K_T": (f"{n}, {d_k}", "shape_transposed"),
             "scores": (f"{d_k} {d_k}", "shape_scores_inner"),
             "concat": (f"{h * n}, {d_v}", "shape_concat_stacked")}
    for name, (text, mid) in cases.items():
        fb = exercises.grade(ex, {**selftest.correct_answer(ex), name: text})
        assert fb.parts[name].misconception == mid, name
        assert t(f"misconception.{mid}") != f"misconception.{mid}"
    fb = exercises.grade(ex, {**selftest.correct_answer(ex), "concat": f"{n}, {d_v}"})
    assert fb.parts["concat"].misconception == "shape_concat_one_head"


def test_shapes_every_named_mistake_is_explained_and_differs_from_the_answer():
    en = catalog("en")
    for level in (1, 2, 3):
        for seed in range(30):
            ex = exercises.generate("shapes", seed, level)
            for part in ex.parts:
                wrong = shapes._wrong_shapes(ex, part.name)
                assert len(set(wrong.values())) == len(wrong), (level, seed, part.name, wrong)
                for mid, shape in wrong.items():
                    assert f"misconception.{mid}" in en
                    assert shape != tuple(int(x) for x in part.reference[0])


def test_shapes_answer_typed_as_a_product_is_a_shape_error_not_a_wrong_answer():
    ex = exercises.generate("shapes", 1, 1)
    fb = exercises.grade(ex, {**selftest.correct_answer(ex), "Q": "3×4"})
    assert not fb.graded and fb.parts["Q"].format_error is not None


# ---------------------------------------------------------------- variance


def test_variance_golden_dk_64_gives_8_then_1():
    ex = _find("variance", 1, lambda e: e.given["d_k"] == 64)
    refs = {p.name: float(p.reference[0, 0]) for p in ex.parts if p.shape == (1, 1)}
    assert refs == {"var_before": 64.0, "std_before": 8.0, "var_after": 1.0, "std_after": 1.0}
    assert all(ex.part(name).decimals == 0 for name in refs)


@pytest.mark.parametrize("level", [1, 2, 3])
def test_variance_scaling_flattens_the_softmax(level):
    for seed in range(30):
        ex = exercises.generate("variance", seed, level)
        d_k, z = ex.given["d_k"], ex.given["scores"]
        assert np.sqrt(d_k) == int(np.sqrt(d_k))
        np.testing.assert_allclose(ex.part("A_unscaled").reference, softmax(z))
        np.testing.assert_allclose(ex.part("A_scaled").reference, softmax(z / np.sqrt(d_k)))
        assert ex.part("A_unscaled").reference.max() > ex.part("A_scaled").reference.max()  # sharper


def test_variance_names_swapped_std_and_missing_scaling():
    ex = _find("variance", 2, lambda e: True)
    d_k = ex.given["d_k"]
    base = selftest.correct_answer(ex)
    fb = exercises.grade(ex, {**base, "std_before": str(d_k)})
    assert fb.parts["std_before"].misconception == "variance_std_confused"
    fb = exercises.grade(ex, {**base, "var_after": str(int(np.sqrt(d_k)))})
    assert fb.parts["var_after"].misconception == "variance_divide_squared"
    fb = exercises.grade(ex, {**base, "A_scaled": selftest.as_text(softmax(ex.given["scores"]))})
    assert fb.parts["A_scaled"].misconception == "no_scaling"


# ---------------------------------------------------------------- concepts


def _choice_parts(level_seeds):
    for level, seed in level_seeds:
        ex = exercises.generate("concepts", seed, level)
        for part in ex.parts:
            if part.is_choice:
                yield ex, part


ALL = [(level, seed) for level in (1, 2, 3) for seed in range(30)]


def test_concepts_every_wrong_option_has_its_own_explanation_that_hides_the_answer():
    seen = set()
    for ex, part in _choice_parts(ALL):
        right = int(part.reference[0, 0])
        right_text = t(part.options[right], **part.params)
        for index, option in enumerate(part.options):
            fb = exercises.grade(ex, {**selftest.correct_answer(ex), part.name: chr(ord("A") + index)})
            pfb = fb.parts[part.name]
            if index == right:
                assert fb.correct and pfb.explanation is None and pfb.misconception is None
                continue
            assert not fb.correct and pfb.misconception == option
            assert pfb.explanation is not None and pfb.explanation.key == f"misconception.{option}"
            why = pfb.explanation.render()
            assert why != pfb.explanation.key and "{" not in why
            assert right_text not in why and right_text not in fb.message.render()
            assert why in fb.message.render()  # the feedback message carries the explanation
            assert t(f"misconception.{option}") == why  # the same text without parameters
            seen.add(option)
    explanations = {seen_key: t(f"misconception.{seen_key}") for seen_key in seen}
    assert len(set(explanations.values())) == len(explanations)  # one explanation per wrong option
    wrong_options = {concepts.option_key(q.id, w) for q in concepts.QUESTIONS.values()
                     if isinstance(q, concepts.MultipleChoice) for w in q.wrong}
    assert seen == wrong_options


def test_concepts_option_order_and_numbers_vary():
    orders, cells = set(), set()
    for _ex, part in _choice_parts(ALL):
        if part.name == "score_cell":
            orders.add(part.options)
            cells.add((part.params["i"], part.params["j"]))
            assert part.params["i"] != part.params["j"]
            assert 1 <= part.params["i"] <= part.params["n"] and 1 <= part.params["j"] <= part.params["n"]
    assert len(orders) >= 6 and len(cells) >= 6


def test_concepts_questions_come_from_the_reference_topics():
    asked = {p.name for level, seed in ALL for p in exercises.generate("concepts", seed, level).parts}
    assert {"score_cell", "k_transposed", "mask_inf", "max_shift", "rows_sum", "heads"} <= asked


def test_concepts_short_answers():
    ex = _find("concepts", 1, lambda e: True)
    part = ex.part("masked_count")
    n = part.params["n"]
    assert part.reference[0, 0] == n * (n - 1) / 2 and part.decimals == 0
    fb = exercises.grade(ex, {**selftest.correct_answer(ex), "masked_count": str(n * (n + 1) // 2)})
    assert fb.parts["masked_count"].misconception == "mask_diagonal"

    ex = _find("concepts", 3, lambda e: "std_dk" in e.part_names)
    d_k = ex.part("std_dk").params["d_k"]
    assert ex.part("std_dk").reference[0, 0] == np.sqrt(d_k)
    fb = exercises.grade(ex, {**selftest.correct_answer(ex), "std_dk": str(d_k)})
    assert fb.parts["std_dk"].misconception == "variance_std_confused"

    ex = _find("concepts", 2, lambda e: "softmax_big" in e.part_names)
    p = ex.part("softmax_big").params
    expected = softmax(np.array([[p["a"], p["b"]]], dtype=float))[0, 1]
    assert abs(ex.part("softmax_big").reference[0, 0] - expected) < 1e-12


def test_concepts_json_round_trip_keeps_options_and_params():
    ex = exercises.generate("concepts", 11, 2)
    back = exercises.Exercise.from_dict(ex.to_dict())
    for a, b in zip(ex.parts, back.parts):
        assert a.options == b.options and a.params == b.params and a.prompt == b.prompt


# ---------------------------------------------------------------- worked solutions


@pytest.mark.parametrize("kind_id", MY_KINDS)
def test_solutions_show_every_part_with_its_reference(kind_id):
    for level in exercises.KINDS[kind_id].LEVELS:
        for seed in range(8):
            ex = exercises.generate(kind_id, seed, level)
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


def test_concepts_solution_shows_the_letter_and_the_reason():
    ex = _find("concepts", 2, lambda e: True)
    for step, part in zip(exercises.solve(ex), ex.parts):
        if part.is_choice:
            right = int(part.reference[0, 0])
            assert step.display() == rf"\text{{{chr(ord('A') + right)}}}"
            assert step.note.key == part.options[right]


def test_variance_solution_golden_lines():
    ex = _find("variance", 1, lambda e: e.given["d_k"] == 64)
    steps = {s.name: s for s in exercises.solve(ex)}
    assert steps["std_before"].display().endswith(r"&= \sqrt{64} \\  &= 8 \end{aligned}")
    # the unscaled row is S (minus its maximum, Ŝ, when it has a score beyond ±10: issue 14), the scaled one Z
    unscaled = "e^{\\hat{S}_{ij}}" if abs(ex.given["scores"]).max() > 10 else "e^{S_{ij}}"
    assert unscaled in steps["A_unscaled"].display() and "e^{Z_{ij}}" in steps["A_scaled"].display()


# ---------------------------------------------------------------- reachable from Practice


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
            at.radio(key=choice_key(f"ans-{ex.id}", part.name)).set_value(int(part.reference[0, 0]))
        else:
            cells[part.name] = [[selftest.format_cell(x) for x in row] for row in part.reference]
    fill_cells(at, ex, cells)
    click_check(at)
    assert not at.exception
    assert at.success and not at.error, [e.value for e in at.error]


def test_variance_aids_hold_every_exponent_of_every_softmax():
    for level in (1, 2, 3):
        for seed in range(6):
            ex = exercises.generate("variance", seed, level)
            table = {round(e.x, 9) for e in exercises.aids(ex).exp_table}
            z = ex.given["scores"]
            z = z - z.max() if np.abs(z).max() > 10 else z  # a row with large scores: max-shifted (issue 14)
            needed = set(np.round(z, 9).ravel()) | set(np.round(ex.given["scores"] / np.sqrt(ex.given["d_k"]), 9).ravel())
            assert needed == table, ("variance", level, seed)
