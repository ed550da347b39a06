"""The glossary page: every term defined in English and Chinese, its formula rendered in KaTeX."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from exercises.i18n import catalog
from tests.apptest_helpers import ROOT
from tests.test_katex import katex_errors
from ui import glossary

CJK = re.compile(r"[\u4e00-\u9fff]")
ASKED_FOR = ("query", "key", "value", "score", "logit", "scaled", "mask", "softmax", "weight", "head", "group",
             "kv_cache", "tile", "position", "rotary", "padding", "gradient")


def test_the_glossary_holds_the_terms_learners_meet():
    keys = [t.key for t in glossary.TERMS]
    assert len(keys) == len(set(keys)), "each term once"
    assert [k for k in ASKED_FOR if k not in keys] == []


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_term_has_a_name_and_a_short_definition(lang):
    texts = catalog(lang)
    for key in glossary.text_keys():
        assert texts.get(key, "").strip(), f"{lang}: {key} is missing"
    for term in glossary.TERMS:
        definition = texts[f"glossary.{term.key}.text"]
        sentences = [s for s in re.split(r"(?<=[.;。；])\s*", definition) if s.strip()]
        assert 1 <= len(sentences) <= 3, f"{lang}: {term.key} is {len(sentences)} sentences: {definition}"
        if lang == "zh":
            assert CJK.search(definition) and definition != catalog("en")[f"glossary.{term.key}.text"], term.key


def test_every_glossary_formula_renders_in_katex():
    items = [(f"glossary {t.key}", t.latex) for t in glossary.TERMS if t.latex]
    failures, summary = katex_errors(items)
    assert summary["checked"] == len(items)
    assert not failures, "\n".join(f"{f['id']}: {f['error']}  {f['latex'][:200]}" for f in failures)


def test_the_glossary_is_in_the_navigation():
    assert 'st.Page("app_pages/glossary.py", title=tr("nav.glossary")' in (ROOT / "app.py").read_text(encoding="utf-8")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_glossary_page_shows_every_term_with_its_definition_and_formula(lang):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["lang"] = lang
    at.run()
    at.switch_page("app_pages/glossary.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    texts = catalog(lang)
    assert at.title[0].value == texts["glossary.title"]
    shown = " ".join(m.value for m in at.markdown)
    for term in glossary.TERMS:
        name, definition = texts[f"glossary.{term.key}.name"], texts[f"glossary.{term.key}.text"]
        assert f"**{name}** — {definition}" in shown, f"{lang}: {term.key} is not on the page"
    formulas = [e.value.strip("$\n") for e in at.latex]
    assert len(formulas) == sum(1 for t in glossary.TERMS if t.latex)
    assert r"\operatorname{softmax}(z)_j" in " ".join(formulas)
