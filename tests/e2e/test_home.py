"""Opening the app in a real browser: Home, its links to every topic, the navigation."""

from __future__ import annotations

from playwright.sync_api import expect

import exercises
from tests.e2e.streamlit_driver import StreamlitPage


def test_home_opens_with_a_link_to_every_topic(app: StreamlitPage, screenshots) -> None:
    app.open("/")
    expect(app.page.get_by_role("heading", name=exercises.t("app.title"))).to_be_visible()
    links = app.page.locator('a[data-testid="stPageLink-NavLink"]')
    for kind in exercises.KINDS:
        to_kind = links.filter(has_text=exercises.t(f"kind.{kind}.title")).and_(
            app.page.locator(f'a[href*="kind={kind}&"], a[href$="kind={kind}"]'))
        expect(to_kind.first).to_be_visible()
    app.screenshot(str(screenshots / "home.png"))


def test_a_topic_link_opens_practice_on_that_topic(app: StreamlitPage) -> None:
    app.open("/")
    link = app.page.locator('a[data-testid="stPageLink-NavLink"][href*="kind=softmax&"]').first
    app.rerun(link.click)
    expect(app.page.get_by_role("heading", name=exercises.t("practice.title"))).to_be_visible()
    query = app.query()
    assert query["kind"] == "softmax" and query["level"] == "1" and query["seed"].isdigit()
