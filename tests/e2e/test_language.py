"""The language in a real browser: ?lang=zh opens in Chinese; the sidebar switch changes it in place."""

from __future__ import annotations

import numpy as np
from playwright.sync_api import expect

import exercises
from exercises.cli import selftest
from exercises.i18n import t
from tests.e2e.streamlit_driver import StreamlitPage
from ui.answer_grid import cell_key
from ui.i18n import NAMES
from ui.practice_state import answer_prefix


def test_lang_zh_in_the_address_opens_the_app_in_chinese(app: StreamlitPage, screenshots) -> None:
    app.open("/?lang=zh")
    expect(app.page.get_by_role("heading", name=t("app.title", "zh"))).to_be_visible()
    nav = app.page.locator('[data-testid="stSidebarNav"]')
    expect(nav.get_by_role("link", name=t("nav.practice", "zh"))).to_be_visible()
    assert app.query().get("lang") == "zh"
    app.screenshot(str(screenshots / "home-zh.png"))


def switch_to(app: StreamlitPage, language: str) -> None:
    radio = app.page.locator('[data-testid="stSidebar"] [data-testid="stRadio"]')
    app.rerun(lambda: radio.get_by_text(NAMES[language], exact=True).click())


def test_the_sidebar_switch_translates_practice_and_keeps_the_problem(app: StreamlitPage, screenshots) -> None:
    app.open("/practice?kind=softmax&level=2&seed=5&lang=en")
    ex = exercises.generate("softmax", 5, 2)
    for (i, j), x in np.ndenumerate(ex.part("A").reference):
        text = "0.5" if (i, j) == (0, 0) else selftest.format_cell(x)  # one wrong cell
        app.keyed(cell_key(answer_prefix(ex), "A", i, j)).locator("input").fill(text)
    typed = app.keyed(cell_key(answer_prefix(ex), "A", 0, 0)).locator("input")
    app.rerun(lambda: app.button(t("practice.check")).click())
    switch_to(app, "zh")
    expect(app.page.get_by_role("heading", name=t("practice.title", "zh"))).to_be_visible()
    expect(app.button(t("practice.check", "zh"))).to_be_visible()
    assert app.query().items() >= {"lang": "zh", "kind": "softmax", "level": "2", "seed": "5"}.items()
    expect(app.page.get_by_text(t("practice.share", "zh", kind=t("kind.softmax.title", "zh"), level=2, seed=5))).to_be_visible()
    expect(typed).to_have_value("0.5")  # a checked answer stays
    app.screenshot(str(screenshots / "practice-zh.png"))

    switch_to(app, "en")
    expect(app.page.get_by_role("heading", name=t("practice.title", "en"))).to_be_visible()
    assert app.query().get("lang") == "en"
    expect(typed).to_have_value("0.5")


def test_switching_language_keeps_what_was_typed_but_not_yet_checked(app: StreamlitPage) -> None:
    app.open("/practice?kind=softmax&level=2&seed=5&lang=en")
    ex = exercises.generate("softmax", 5, 2)
    typed = app.keyed(cell_key(answer_prefix(ex), "A", 0, 0)).locator("input")
    typed.fill("0.11")
    switch_to(app, "zh")
    expect(typed).to_have_value("0.11")
