"""`shapes` says what it asks (issue 14): the shape of a named matrix of one head, as (rows, columns);
the n × d_model of all heads' queries is a named mistake with its explanation; one head is singular."""

from __future__ import annotations

import pytest

import exercises
from exercises.cli import selftest
from exercises.core import engine
from exercises.i18n import catalog, t
from exercises.worksheets import model

SEEDS = range(40)


@pytest.mark.parametrize("level", [2, 3])
def test_all_heads_queries_n_by_d_model_are_named_and_explained(level):
    for seed in SEEDS:
        ex = exercises.generate("shapes", seed, level)
        n, d_model = ex.params["n"], ex.params["d_model"]
        for name, typed in (("Q", f"{n}, {d_model}"), ("K_T", f"{d_model}, {n}")):
            fb = exercises.grade(ex, {**selftest.correct_answer(ex), name: typed})
            assert not fb.correct and fb.parts[name].misconception == "shape_q_all_heads", (seed, name)
    for lang in ("en", "zh"):
        text = catalog(lang)["misconception.shape_q_all_heads"]
        assert "d_model" in text and "d_k" in text


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
