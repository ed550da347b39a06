"""Progress and the formula sheet in a real browser."""

from __future__ import annotations

import numpy as np
from playwright.sync_api import expect

import exercises
from exercises.cli import selftest
from exercises.i18n import t
from tests.e2e.streamlit_driver import StreamlitPage
from ui.answer_grid import cell_key
from ui.practice_state import answer_prefix


def test_a_checked_answer_shows_up_in_progress(app: StreamlitPage, screenshots) -> None:
    app.open("/practice?kind=softmax&level=2&seed=5")
    # a browser context of its own is a private profile of its own: other tests' answers stay apart
    ex = exercises.generate("softmax", 5, 2)
    for (i, j), x in np.ndenumerate(ex.part("A").reference):
        text = "0.5" if (i, j) == (0, 0) else selftest.format_cell(x)
        app.keyed(cell_key(answer_prefix(ex), "A", i, j)).locator("input").fill(text)
    app.rerun(lambda: app.button(t("practice.check")).click())
    score = exercises.grade(ex, {"A": [["0.5" if (i, j) == (0, 0) else selftest.format_cell(x)
                                        for j, x in enumerate(row)] for i, row in enumerate(ex.part("A").reference)]})

    nav = app.page.locator('[data-testid="stSidebarNav"]')
    app.rerun(lambda: nav.get_by_role("link", name=t("nav.progress"), exact=True).click())
    expect(app.page.get_by_role("heading", name=t("progress.title"))).to_be_visible()
    metrics = app.page.locator('[data-testid="stMetric"]')
    expect(metrics.filter(has_text=t("progress.metric.attempts"))).to_contain_text("1")
    expect(metrics.filter(has_text=t("progress.metric.mean"))).to_contain_text(f"{score.score:.0%}")
    app.screenshot(str(screenshots / "progress.png"))


def test_the_formula_sheet_shows_forward_and_backward(app: StreamlitPage, screenshots) -> None:
    app.open("/formulas")
    expect(app.page.get_by_role("heading", name=t("formulas.title"))).to_be_visible()
    formulas = app.page.locator('[data-testid="stTabs"] .katex')
    expect(formulas.first).to_be_visible()
    app.screenshot(str(screenshots / "formulas.png"))
    from ui import formula_sheet as fs

    forward_count = sum(len(s.formulas) for s in fs.forward())
    expect(formulas).to_have_count(forward_count)  # the hidden tab is not typeset on arrival
    backward = app.page.get_by_role("tab", name=t("home.backward"))
    app.rerun(backward.click)  # the open tab is drawn by a rerun
    expect(backward).to_have_attribute("aria-selected", "true")
    expect(app.page.get_by_role("tabpanel").locator(".katex")).to_have_count(sum(len(s.formulas) for s in fs.backward()))
