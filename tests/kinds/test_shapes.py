"""shapes: the shape of every matrix of attention and multi-head attention, in rows × columns."""

from __future__ import annotations

import pytest

import exercises
from exercises.cli import selftest
from exercises.core import engine
from exercises.i18n import catalog, t
from exercises.kinds import shapes
from exercises.worksheets import model
from tests.kinds.common import find


def test_shapes_references():
    ex = find("shapes", 3, lambda e: True)
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
    ex = find("shapes", 2, lambda e: e.params["h"] > 1)
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


SEEDS = range(40)


@pytest.mark.parametrize("level", [2, 3])
def test_all_heads_queries_and_the_width_of_x_are_named_apart(level):
    """n × h·d_k is all heads side by side; n × d_model is X's own width, a mistake of its own where d_model is
    not h·d_k (level 3: d_model = 2 h·d_k in some seeds)."""
    for seed in SEEDS:
        ex = exercises.generate("shapes", seed, level)
        n, d_model, width = ex.params["n"], ex.params["d_model"], ex.params["h"] * ex.params["d_k"]
        x_width = "shape_q_all_heads" if d_model == width else "shape_q_d_model"
        for name, typed, want in (("Q", f"{n}, {width}", "shape_q_all_heads"), ("K_T", f"{width}, {n}", "shape_q_all_heads"),
                                  ("Q", f"{n}, {d_model}", x_width), ("K_T", f"{d_model}, {n}", x_width)):
            fb = exercises.grade(ex, {**selftest.correct_answer(ex), name: typed})
            got = fb.parts[name].misconception
            assert not fb.correct and got == want, f"shapes level {level} seed {seed} part {name} ({typed}): {got}"
    for lang in ("en", "zh"):
        text = catalog(lang)["misconception.shape_q_all_heads"]
        assert "h·d_k" in text and "= n × d_model" not in text, text  # h·d_k is d_model only when the heads fill it
        assert "d_model" in catalog(lang)["misconception.shape_q_d_model"]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("level", [1, 2, 3])
def test_every_part_asks_for_the_shape_of_one_named_matrix_as_rows_and_columns(level, lang):
    pair = "(rows, columns)" if lang == "en" else "(行数, 列数)"
    for seed in range(5):
        ex = exercises.generate("shapes", seed, level)
        for part, words in model.problem(ex, 1, lang).asks:
            assert part.prompt == f"shapes.ask.{part.name}"
            assert pair in words and "1×2" not in words, words  # the worksheet no longer says "Find Q (1×2)"
            assert t(part.prompt, lang, **part.params) == words  # Practice shows the same line above the box
        assert ("one head" if lang == "en" else "一个头") in t("shapes.ask.Q", lang)


def test_one_head_is_singular_and_several_are_plural():
    one = exercises.generate("shapes", 0, 1)
    assert one.params["h"] == 1
    text = engine.prompt(one, "en")
    assert "h = 1 head," in text and "1 heads" not in text
    several = exercises.generate("shapes", 0, 2)
    assert f"h = {several.params['h']} heads;" in engine.prompt(several, "en")
    for ex in (one, several):
        assert "{" not in engine.prompt(ex, "zh")
