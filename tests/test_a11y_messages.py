"""The messages: each case of the accessibility review, in both languages where the text is ours.

Every test here fails on the code before the fix (the old texts, or the old drawing).
"""

from __future__ import annotations

import pytest

import exercises
from exercises import AnswerError, parse_answer
from exercises.core import engine
from exercises.i18n import languages, t
from tests.apptest_helpers import open_page
from ui import answer_grid
from ui import check_work as cw
from ui.practice_state import answer_prefix

LANGS = list(languages())


def first_seed(kind: str, level: int, test) -> exercises.Exercise:
    for seed in range(200):
        ex = exercises.generate(kind, seed, level)
        if test(ex):
            return ex
    raise AssertionError(f"no {kind} level {level} exercise found")


@pytest.mark.parametrize("lang", LANGS)
def test_non_causal_multi_head_shows_no_mask_in_its_formula(lang):
    plain = first_seed("multi_head", 2, lambda ex: not ex.given["causal"])  # level 1 always masks
    causal = first_seed("multi_head", 2, lambda ex: ex.given["causal"])
    assert "mask(" not in engine.prompt(plain, lang)
    assert "mask(" in engine.prompt(causal, lang)


def test_practice_says_no_mask_and_names_the_topic_not_its_id():
    plain = first_seed("multi_head", 2, lambda ex: not ex.given["causal"])
    at = open_page("app_pages/practice.py", {"kind": "multi_head", "level": "2", "seed": str(plain.seed)})
    captions = [str(c.value) for c in at.caption]
    # its own paragraph of the caption under the statement (with the rounding policy)
    assert any(t("problem.no_mask") in c.split("\n\n") for c in captions)
    share = next(c for c in captions if "seed" in c)
    assert t("kind.multi_head.title") in share and "multi_head" not in share


@pytest.mark.parametrize("lang", LANGS)
def test_the_caption_never_shows_the_internal_kind_id(lang):
    text = t("practice.share", lang, kind=t("kind.masking.title", lang), level=1, seed=3)
    assert "masking" not in text and "题型" not in text and "kind " not in text


def test_grid_headings_start_with_a_capital_and_a_masked_grid_asks_for_minus_infinity():
    ex = first_seed("masking", 1, lambda ex: True)
    heading = answer_grid.part_heading(ex.part("masked"))
    name = heading.split("**")[1]
    assert name[0].isupper(), heading
    assert "-inf" in heading
    softmax = exercises.generate("softmax", 5, 2)
    assert "-inf" not in answer_grid.part_heading(softmax.part("A"))


@pytest.mark.parametrize("lang", LANGS)
def test_one_name_for_the_softmax_input_gradient(lang):
    """The grid and the solution both call it G_Z (the grid said G_scaled)."""
    assert t("part.G_scaled", lang) == "G_Z"
    ex = exercises.generate("grad_softmax", 1, 1)
    prompt = engine.prompt(ex, lang)
    assert "G_scaled" not in prompt and "G_Z" in prompt
    assert answer_grid.cell_label(ex.parts[0].name, 1, 1, lang).startswith("G_Z")


@pytest.mark.parametrize("lang", LANGS)
def test_the_statements_ask_only_for_what_the_grids_ask(lang):
    for level in exercises.KINDS["grad_scores"].LEVELS:
        prompt = engine.prompt(exercises.generate("grad_scores", 1, level), lang)
        assert "when asked" not in prompt and "若要求" not in prompt
    projection = engine.prompt(exercises.generate("projection", 1, 1), lang)
    assert "each weight matrix" not in projection and "分别乘以每个权重矩阵" not in projection


@pytest.mark.parametrize("lang", LANGS)
def test_a_shape_error_is_not_called_unreadable(lang):
    ex = exercises.generate("softmax", 5, 2)
    fb = exercises.grade(ex, {"A": "1 2; 3 4; 5 6; 7 8; 9 10"})
    assert not fb.graded
    text = fb.message.render(lang)
    assert ("shape" in text) if lang == "en" else ("形状" in text)


def test_a_ragged_row_is_said_without_1_entries():
    with pytest.raises(AnswerError) as err:
        parse_answer("1 2\n3", "A")
    assert "1 entries" not in err.value.message.render("en")


def test_check_work_says_unreadable_not_not_entered():
    at = open_page("app_pages/check_work.py")
    at.text_area(key=cw.claim_key("A")).input("abc")
    at.run()
    at.button(key="checkwork.check_button").click()
    at.run()
    assert not at.exception
    shown = "\n".join(str(m.value) for m in at.markdown)
    assert t("checkwork.verdict.unreadable") in shown
    a_line = next(line for line in shown.splitlines() if line.startswith(f"**{t('part.A')}**"))
    assert t("checkwork.verdict.not_given") not in a_line


@pytest.mark.parametrize("lang, label", [("en", "The scaled scores S / √d_k, row 1, column 1"),
                                         ("zh", "缩放后的分数 S / √d_k，第 1 行第 1 列")])
def test_answer_cells_are_named_by_the_parts_catalog_label(lang, label):
    """A screen reader hears the part's label from the catalog (part.scaled), not its internal name
    ("scaled, row 1, column 1"); attention level 1 seed 77738, cell (1, 1) of the scaled scores, and
    every cell of every part on the page."""
    at = open_page("app_pages/practice.py", {"kind": "attention", "level": "1", "seed": "77738"}, lang=lang)
    assert not at.exception
    ex = exercises.generate("attention", 77738, 1)
    cell = at.text_input(key=answer_grid.cell_key(answer_prefix(ex), "scaled", 0, 0))
    assert cell.label == label, f"attention level 1 seed 77738, scaled (1, 1), {lang}: {cell.label!r}"
    for part in ex.parts:
        for i in range(part.shape[0]):
            for j in range(part.shape[1]):
                shown = at.text_input(key=answer_grid.cell_key(answer_prefix(ex), part.name, i, j)).label
                name = t(f"part.{part.name}", lang)
                assert name[1:] in shown and not shown.startswith(f"{part.name},"), (part.name, i, j, lang, shown)
