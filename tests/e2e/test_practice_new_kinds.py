"""online_softmax, alibi, sliding_window and temperature on Practice in a real browser, at 1280 px and on a
phone (390 px, the same page narrowed): each level-3 problem opens with its title, an answer box for every
cell of every part, and no sideways overflow of the page (wide grids scroll inside their own block)."""

from __future__ import annotations

import os

from playwright.sync_api import expect

import exercises
from tests.e2e.streamlit_driver import StreamlitPage
from ui import cache

KINDS = ("online_softmax", "alibi", "sliding_window", "temperature")
SEED, LEVEL = 1, 3
WIDTHS = (1280, 390)


def _overflow(app: StreamlitPage) -> int:
    return app.page.evaluate("""() => { const main = document.querySelector('[data-testid="stMain"]');
      return Math.max(0, main.scrollWidth - main.clientWidth); }""")


def test_the_new_kinds_open_with_every_answer_box_on_a_desktop_and_a_phone(browser, site: str, screenshots) -> None:
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900}, locale="en-US", device_scale_factor=1)
    try:
        app = StreamlitPage(context.new_page(), site)
        for kind in KINDS:
            app.open(f"/practice?kind={kind}&level={LEVEL}&seed={SEED}")
            ex = cache.exercise(kind, SEED, LEVEL)
            cells = sum(p.shape[0] * p.shape[1] for p in ex.parts)
            for width in WIDTHS:
                app.page.set_viewport_size({"width": width, "height": 900})
                app.settle()
                case = f"{kind} level {LEVEL} seed {SEED} at {width} px"
                expect(app.page.get_by_text(exercises.t(f"kind.{kind}.title")).first).to_be_visible()
                expect(app.page.locator('[data-testid="stForm"] [data-testid="stTextInput"]')).to_have_count(cells)
                assert _overflow(app) == 0, f"{case}: the page runs {_overflow(app)} px off the side"
                if os.environ.get("E2E_SCREENSHOTS"):  # pictures to look at, on request (they cost seconds each)
                    app.screenshot(str(screenshots / f"practice-{kind}-{width}.png"))
    finally:
        context.close()
