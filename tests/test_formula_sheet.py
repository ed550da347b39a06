"""The formula sheet and the Home map: KaTeX-safe, in the solutions' notation, every text translated."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import exercises
from exercises.i18n import catalog
from exercises.rendering import latex as L
from tests.apptest_helpers import ROOT
from tests.test_katex import katex_errors
from ui import formula_sheet as fs
from ui import pipeline_map as pm


def map_latex() -> list[tuple[str, str]]:
    stages = [s for row in pm.ROWS for s in pm.stages(row.key)]
    return [("forward path", pm.FORWARD_PATH), ("backward path", pm.BACKWARD_PATH)] + \
        [(f"stage {s.kind}", s.formula) for s in stages]


def test_every_formula_renders_in_katex():
    items = [(f"sheet {i}", text) for i, text in enumerate(fs.all_latex())] + map_latex()
    failures, summary = katex_errors(items)
    assert summary["checked"] == len(items)
    assert not failures, "\n".join(f"{f['id']}: {f['error']}  {f['latex'][:200]}" for f in failures)


def test_shapes_are_written_under_the_factors():
    assert fs.shaped("[[Q | n | d_k]] = X W_Q") == r"\underbrace{Q}_{n \times d_k} = X W_Q"
    assert all("[[" not in text for text in fs.all_latex()), "every shape marker is expanded"
    sheet = " ".join(fs.all_latex())
    for product in (r"\underbrace{S}_{n \times n} = \underbrace{Q}_{n \times d_k}\,\underbrace{K^{\top}}_{d_k \times n}",
                    r"\underbrace{O}_{n \times d_v} = \underbrace{A}_{n \times n}\,\underbrace{V}_{n \times d_v}",
                    r"\underbrace{G_V}_{n \times d_v} = \underbrace{A^{\top}}_{n \times n}"):
        assert product in sheet


def test_notation_matches_the_solutions():
    sheet = " ".join(fs.all_latex())
    for name in ("scores", "scaled", "masked", "A", "O", "G_A", "G_V", "G_scaled", "G_scores", "G_Q", "G_K",
                 "G_W_Q", "G_W_K", "G_W_V", "G_X", "G_X_V", "G_E"):
        assert L.symbol(name) in sheet, f"{name} is written {L.symbol(name)} in the solutions"
    for phrase in (r"\max_k z_k", r"\operatorname{Var}(q \cdot k)", r"\sqrt{64} = 8", r"\mathrm{head}_i",
                   r"\operatorname{triu}", r"r \mathbf{1}^{\top}", r"\sum_{p:\, t_p = v}", r"G_O V^{\top}"):
        assert phrase in sheet, phrase


def test_every_step_kind_has_its_section():
    sections = {s.key for s in fs.sections()}
    steps = {"projection", "scores", "scaling", "masking", "softmax", "weighted_sum", "multi_head", "variance",
             "grad_weighted_sum", "grad_value_proj", "grad_softmax", "grad_scores", "grad_projections",
             "grad_embedding"}
    assert steps <= sections


def test_every_sheet_text_is_in_both_catalogs():
    for lang in ("en", "zh"):
        missing = [key for key in fs.note_keys() if key not in catalog(lang)]
        assert missing == [], (lang, missing)


def test_formula_page_shows_the_whole_sheet_a_tab_at_a_time_in_both_languages():
    """Only the open tab is drawn (the browser typesets every formula of a hidden tab too); both reachable."""
    for lang in ("en", "zh"):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.query_params["lang"] = lang
        at.run()
        at.switch_page("app_pages/formulas.py")
        at.run()
        assert not at.exception
        forward = [f.latex for s in fs.forward() for f in s.formulas]
        assert [e.value.strip("$\n") for e in at.latex] == forward, f"{lang}: the forward tab alone"  # st.latex: $$
        assert at.title[0].value == catalog(lang)["formulas.title"]
        notes = {m.value for m in at.markdown}
        assert catalog(lang)["formulas.softmax.max"] in notes
        links = [e.proto.query_string for e in at.get("page_link")]
        at.session_state[f"{fs.TAB_KEY}.{lang}"] = catalog(lang)["home.backward"]
        at.run()
        assert not at.exception
        backward = [f.latex for s in fs.backward() for f in s.formulas]
        assert [e.value.strip("$\n") for e in at.latex] == backward, f"{lang}: the backward tab, once opened"
        links += [e.proto.query_string for e in at.get("page_link")]
        assert sum(1 for s in fs.sections() if s.key in exercises.KINDS) == len(links)


READ_FROM_RECORDS = ["projection", "scores", "scaling", "weighted_sum", "grad_weighted_sum", "grad_value_proj",
                     "grad_scores", "grad_projections", "grad_softmax"]


@pytest.mark.parametrize("kind_id", READ_FROM_RECORDS)
def test_a_kind_of_single_steps_shows_its_records_formulas_on_the_sheet_and_home(kind_id):
    """One home for a step's formula: the sheet and the Home card read the step record, not a copy."""
    from exercises.core.contract import shaped, step_source
    from exercises.core.steps import STEP_BY_NAME

    kind = exercises.KINDS[kind_id]
    sheet = {f.latex for f in kind.sheet.formulas}
    asked = {p.name for level in kind.LEVELS for seed in range(3) for p in exercises.generate(kind_id, seed, level).parts}
    records = sorted(asked & set(STEP_BY_NAME))
    for name in records:
        assert shaped(step_source(name)) in sheet, f"{kind_id}: the sheet does not show record {name}'s formula"
    # a card keeps to a line: it states at least one of its steps as the record does
    assert any(STEP_BY_NAME[name].formula_latex in kind.home.formula for name in records), kind_id
