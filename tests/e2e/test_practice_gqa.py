"""gqa on Practice in a real browser: its single-number parts, concat_width and cache_floats, are inputs as
wide as a grid's, at 1280 px and on a phone (the row-number column's 1.6 rem width, ui/theme, once also
applied to a 1 × 1 part's only column: a 26 px box that could not show its own placeholder), and concat,
the heads' outputs side by side, has no cells of its own: nothing typed once is asked again."""

from __future__ import annotations

import pytest

import exercises
from tests.e2e.streamlit_driver import StreamlitPage
from ui import cache
from ui.answer_grid import cell_key
from ui.practice_state import answer_prefix

PAGE = "/practice?kind=gqa&level=3&seed=3"


@pytest.mark.parametrize("width", [1280, 390])
def test_the_counts_are_wide_inputs_and_the_heads_are_asked_once(browser, site: str, width: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900}, locale="en-US", device_scale_factor=1)
    try:
        app = StreamlitPage(context.new_page(), site)
        app.open(PAGE)
        ex = cache.exercise("gqa", 3, 3)
        prefix = answer_prefix(ex)
        head = app.keyed(cell_key(prefix, "O1", 0, 0)).locator("input").bounding_box()
        for part in ("concat_width", "cache_floats"):
            single = app.keyed(cell_key(prefix, part, 0, 0)).locator("input").bounding_box()
            assert single["width"] >= head["width"] >= 50, (part, single, head)
        cells = app.page.locator('[data-testid="stForm"] [data-testid="stTextInput"] input').count()
        assert cells == sum(p.shape[0] * p.shape[1] for p in ex.parts) == 4 * 4 + 2, cells  # O1 … O4, two counts
        assert app.keyed(cell_key(prefix, "concat", 0, 0)).count() == 0
        assert app.page.get_by_text(exercises.t("kind.gqa.title")).count() >= 1
    finally:
        context.close()
