"""attention_block, linear_attention and mla on Practice in a real browser, at 1280 px and on a phone (390 px):
each kind's problem and title, one answer box per cell of every part, and no page wider than the screen.
One page per kind, opened at 1280 px and narrowed to 390 px (Streamlit lays the page out again)."""

from __future__ import annotations

import os
from pathlib import Path

from playwright.sync_api import expect

import exercises
from tests.e2e.streamlit_driver import StreamlitPage
from ui import cache

SCREENS = {"1280": {"width": 1280, "height": 900}, "390": {"width": 390, "height": 844}}
CASES = (("attention_block", 3, 1), ("linear_attention", 3, 1), ("mla", 3, 1))
OVERFLOW = """() => { const main = document.querySelector('[data-testid="stMain"]');
  return Math.max(0, main.scrollWidth - main.clientWidth); }"""


def test_the_new_kinds_pose_their_problem_with_a_box_per_cell(browser, site: str) -> None:
    context = browser.new_context(viewport=SCREENS["1280"], locale="en-US", device_scale_factor=1)
    shots = os.environ.get("E2E_SCREENSHOTS")
    try:
        for kind, level, seed in CASES:
            app = StreamlitPage(context.new_page(), site)  # a page per kind: none of the last one's boxes linger
            app.open(f"/practice?kind={kind}&level={level}&seed={seed}")
            ex = cache.exercise(kind, seed, level)
            cells = sum(p.shape[0] * p.shape[1] for p in ex.parts)
            for width, viewport in SCREENS.items():
                case = f"{kind} level {level} seed {seed} at {width} px"
                app.page.set_viewport_size(viewport)
                expect(app.page.get_by_text(exercises.t(f"kind.{kind}.title")).first).to_be_visible()
                expect(app.page.locator('[data-testid="stForm"] [data-testid="stTextInput"]')).to_have_count(cells)
                overflow = app.page.evaluate(OVERFLOW)
                assert overflow == 0, f"{case}: the page runs {overflow} px off the side"
                if shots:
                    app.screenshot(str(Path(shots) / f"practice-{kind}-{width}.png"))
            app.page.close()
    finally:
        context.close()
