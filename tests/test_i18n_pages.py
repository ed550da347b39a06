"""Every page registered in app.py renders in English and in Chinese without an exception and
without a raw catalog key on screen; the language follows the URL, the browser and the switch."""

from __future__ import annotations

import ast
import re

import pytest
import streamlit as st
from google.protobuf.message import Message
from streamlit.testing.v1 import AppTest

import storage
from exercises.i18n import catalog
from tests.apptest_helpers import ROOT
from tests.served_app import entrypoint_every_run  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("entrypoint_every_run")

CJK = re.compile(r"[\u4e00-\u9fff]")


def registered_pages() -> list[str]:
    """The paths of every st.Page(...) in app.py (pages others add are picked up too)."""
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    return [node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Page"
            and node.args and isinstance(node.args[0], ast.Constant)]


def _key_patterns() -> tuple[re.Pattern, re.Pattern]:
    keys = catalog("en").keys()
    prefixes = sorted({key.split(".")[0] for key in keys} | {"kind", "part"})
    known = re.compile(r"(?<![\w./])(?:" + "|".join(map(re.escape, sorted(keys, key=len, reverse=True)))
                       + r")(?![\w.])")
    # a key-like word: a catalog prefix, then dotted identifiers ("kind.concepts.title", "part.G_X")
    shaped = re.compile(r"(?<![\w./])(?:" + "|".join(map(re.escape, prefixes)) + r")\.[A-Za-z_]\w*(?:\.\w+)*")
    return known, shaped


KNOWN_KEY, KEY_SHAPED = _key_patterns()
DEFAULT_PAGE = "app_pages/home.py"


NOT_SHOWN = {"id", "form_id", "page_script_hash", "query_string", "page", "icon", "url", "key"}


def _strings(message: Message) -> list[str]:
    """Every string field of a protobuf message, nested messages and repeated fields included."""
    found = []
    for field, value in message.ListFields():
        if field.name in NOT_SHOWN:
            continue
        values = [value] if isinstance(value, (str, bytes, Message, int, float)) else list(value)
        for item in values:
            if isinstance(item, str):
                found.append(item)
            elif isinstance(item, Message):
                found += _strings(item)
    return found


def shown_strings(at: AppTest) -> list[str]:
    """The text of every element on screen (main area and sidebar), dataframe headers included."""
    texts: list[str] = []
    stack = [at._tree]
    while stack:
        node = stack.pop()
        proto = getattr(node, "proto", None)
        if isinstance(proto, Message) and type(node).__name__ not in ("Block", "Column", "SpecialBlock", "Tab"):
            texts += _strings(proto)
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            stack += list(children.values())
    for frame in at.dataframe:
        texts += [str(c) for c in frame.value.columns]
    for tab in at.tabs:
        texts.append(tab.label)
    for expander in at.expander:
        texts.append(expander.label)
    return texts


def raw_keys(texts: list[str]) -> list[str]:
    return sorted({m.group(0) for text in texts for pattern in (KNOWN_KEY, KEY_SHAPED)
                   for m in pattern.finditer(text)})


@pytest.fixture(autouse=True)
def temp_db(tmp_path, monkeypatch):
    """Each test gets its own database, with a few attempts so Progress shows everything it can."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "attention.sqlite3"))
    engine = storage.open_engine()
    for i, (kind, score, mistake) in enumerate([("scores", 0.5, "transposed_scores"), ("scores", 1.0, None),
                                                ("softmax", 0.25, "softmax_columns"), ("softmax", 0.5, "no_exp")]):
        storage.record_attempt(engine, "me", kind, 1, 10 + i, score, mistake, 0, 30.0, 1_700_000_000 + 600 * i)
    engine.dispose()


def open_in(page: str, lang: str) -> AppTest:
    """app.py with ?lang=…, then `page` (app.py runs again, so its sidebar is on screen too)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["lang"] = lang
    at.session_state["progress.profile"] = "me"  # the profile the attempts above are under (private)
    at.run()
    at.switch_page(page)
    at.run()
    return at


def default_page() -> str | None:
    """The path of the st.Page(..., default=True) in app.py."""
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Page":
            if any(k.arg == "default" and getattr(k.value, "value", None) is True for k in node.keywords):
                return node.args[0].value
    return None


def test_app_registers_the_pages_of_this_issue():
    pages = registered_pages()
    assert default_page() == DEFAULT_PAGE
    assert {"app_pages/home.py", "app_pages/practice.py", "app_pages/progress.py", "app_pages/formulas.py"} <= set(pages)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("page", registered_pages())
def test_page_renders_without_raw_keys(page, lang):
    at = open_in(page, lang)
    assert not at.exception, [e.value for e in at.exception]
    texts = shown_strings(at)
    assert texts, f"{page} shows nothing"
    assert raw_keys(texts) == []
    assert at.session_state["lang"] == lang
    assert at.sidebar.radio[0].value == lang, "the sidebar (language switch) is on every page"
    if lang == "zh":
        assert any(CJK.search(t) for t in texts), f"{page} shows no Chinese"
        headline = [e.value for e in at.title]
        assert headline and CJK.search(headline[0]), f"{page}: the title is not in Chinese: {headline}"


def test_raw_key_detector_catches_missing_keys():
    assert raw_keys(["kind.concepts.title"]) == ["kind.concepts.title"]
    assert raw_keys(["Score: practice.title"]) == ["practice.title"]
    assert raw_keys(["Fill in part.G_E here"]) == ["part.G_E"]
    assert raw_keys(["a brand-new progress.something_else key"]) == ["progress.something_else"]
    assert raw_keys(["np.triu(ones, k=1)", "app_pages/practice.py", "注意力权重 A", "e.g. 0.5"]) == []


def test_url_language_is_used_and_kept():
    at = open_in(DEFAULT_PAGE, "zh")
    assert at.title[0].value == catalog("zh")["app.title"]
    assert at.query_params["lang"] == ["zh"] or at.query_params["lang"] == "zh"
    assert at.sidebar.radio[0].value == "zh"


def test_unknown_url_language_falls_back_to_english_and_fixes_the_url():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["lang"] = "fr"
    at.run()
    assert not at.exception
    assert at.session_state["lang"] == "en"
    assert at.title[0].value == catalog("en")["app.title"]
    assert dict(at.query_params)["lang"] in ("en", ["en"])


def test_sidebar_switch_changes_language_and_url():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert at.session_state["lang"] == "en"
    at.sidebar.radio[0].set_value("zh").run()
    assert not at.exception
    assert at.session_state["lang"] == "zh"
    assert dict(at.query_params)["lang"] in ("zh", ["zh"])
    assert at.title[0].value == catalog("zh")["app.title"]
    # (the Formula sheet, not Practice: AppTest formats selectbox options outside the script run,
    # in the default language, and so cannot send back a Chinese option label)
    at.switch_page("app_pages/formulas.py")
    at.run()
    assert at.title[0].value == catalog("zh")["formulas.title"], "the choice survives a page change"
    assert dict(at.query_params)["lang"] in ("zh", ["zh"])
    at.sidebar.radio[0].set_value("en").run()
    assert at.session_state["lang"] == "en" and at.title[0].value == catalog("en")["formulas.title"]
    assert dict(at.query_params)["lang"] in ("en", ["en"])


@pytest.mark.parametrize(("locale", "expected"), [("zh-CN", "zh"), ("zh-TW", "zh"), ("en-US", "en"), ("fr-FR", "en")])
def test_browser_locale_sets_the_default(monkeypatch, locale, expected):
    monkeypatch.setattr(type(st.context), "locale", property(lambda self: locale))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert at.session_state["lang"] == expected


def test_url_wins_over_the_browser(monkeypatch):
    monkeypatch.setattr(type(st.context), "locale", property(lambda self: "zh-CN"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["lang"] = "en"
    at.run()
    assert at.session_state["lang"] == "en"


def test_accept_language_header_parsing():
    from ui.i18n import accept_language, pick
    assert accept_language("en-US,en;q=0.9,zh-CN;q=0.8") == ["en-US", "en", "zh-CN"]
    assert accept_language("de;q=0.5, zh-CN, *;q=0.1") == ["zh-CN", "de"]
    assert accept_language("") == [] and accept_language(None) == []
    assert accept_language("zh;q=abc,en") == ["en"]
    assert pick(["fr-FR", "zh-Hans-CN", "en"], ["en", "zh"]) == "zh"
    assert pick(["fr", None, ""], ["en", "zh"]) is None


def _option_widgets_app():
    import streamlit as st

    from ui.i18n import lang_key, language_switch, resolve
    resolve()
    language_switch()
    labels = {"en": {"a": "first", "b": "second"}, "zh": {"a": "第一", "b": "第二"}}[st.session_state["lang"]]
    choice = st.selectbox("kind", ["a", "b"], format_func=labels.get, key=lang_key("demo.select", carry=True))
    with st.form("demo.form"):
        st.radio("mode", ["a", "b"], index=None, format_func=labels.get, key=lang_key("demo.radio", carry=True))
        st.form_submit_button("go")
    st.write(f"choice {choice}; radio {st.session_state[lang_key('demo.radio')]}")


def test_option_widgets_have_a_key_per_language_and_keep_their_choice():
    """A widget with translated options is a new widget after a switch (so the browser never sends a
    label of the other language back), and the switch carries its choice over."""
    at = AppTest.from_function(_option_widgets_app).run()
    at.selectbox(key="demo.select.en").set_value("b").run()
    at.radio(key="demo.radio.en").set_value("a")
    at.button[0].click().run()
    assert at.markdown[-1].value == "choice b; radio a"
    at.sidebar.radio[0].set_value("zh").run()
    assert not at.exception
    assert at.markdown[-1].value == "choice b; radio a", "the choices survive the switch"
    assert at.selectbox(key="demo.select.zh").options == ["第一", "第二"]
    assert at.selectbox(key="demo.select.zh").value == "b"


def test_the_language_switch_uses_public_streamlit_api_only():
    source = (ROOT / "ui" / "i18n.py").read_text(encoding="utf-8")
    for internal in ("streamlit.runtime", "get_session_state", "._state", "Serde", "widget_metadata"):
        assert internal not in source, internal
