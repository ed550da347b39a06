"""The KV cache on Practice in a real browser, at 1280 px and on a phone (390 px): the problem with its
given rows, an answer grid per part, and a one-cell part (the cache size, O at level 1 and 2) whose box
is as wide as a grid's cells (before the fix a lone column took the row-number column's 1.6rem, so the
box showed about one digit)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

import exercises
from tests.e2e.streamlit_driver import StreamlitPage
from ui import cache
from ui.answer_grid import cell_key
from ui.practice_state import answer_prefix

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
PATH = "/practice?kind=kv_cache&level=2&seed=1"
MIN_BOX_PX = 50


@pytest.fixture(params=[DESKTOP, PHONE], ids=["1280", "390"])
def screen(browser, site: str, request):
    context = browser.new_context(viewport=request.param, locale="en-US", device_scale_factor=1)
    try:
        yield StreamlitPage(context.new_page(), site)
    finally:
        context.close()


def test_kv_cache_practice_shows_its_grids_and_a_wide_one_cell_box(screen: StreamlitPage) -> None:
    screen.open(PATH)
    ex = cache.exercise("kv_cache", 1, 2)
    expect(screen.page.get_by_text(exercises.t("kind.kv_cache.title")).first).to_be_visible()
    prefix = answer_prefix(ex)
    total = sum(p.shape[0] * p.shape[1] for p in ex.parts)
    expect(screen.page.locator('[data-testid="stForm"] [data-testid="stTextInput"]')).to_have_count(total)
    for name in ("cache_floats", "O"):
        assert ex.part(name).shape == (1, 1)
        box = screen.keyed(cell_key(prefix, name, 0, 0)).locator("input").bounding_box()
        assert box is not None and box["width"] >= MIN_BOX_PX, (name, box)
    overflow = screen.page.evaluate("""() => { const main = document.querySelector('[data-testid="stMain"]');
      return Math.max(0, main.scrollWidth - main.clientWidth); }""")
    assert overflow == 0, f"the page runs {overflow} px off the side"
