"""gqa on Practice in a real browser: its single-number part, cache_floats, is an input as wide
as a grid's, at 1280 px and on a phone. Before, the row-number column's 1.6 rem width (ui/theme) also
applied to a 1 × 1 part's only column: a 26 px box that could not show its own placeholder."""

from __future__ import annotations

import pytest

import exercises
from tests.e2e.streamlit_driver import StreamlitPage
from ui import cache
from ui.answer_grid import cell_key

PAGE = "/practice?kind=gqa&level=3&seed=3"


@pytest.mark.parametrize("width", [1280, 390])
def test_the_cache_part_is_a_wide_input_and_the_heads_a_grid(browser, site: str, width: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900}, locale="en-US", device_scale_factor=1)
    try:
        app = StreamlitPage(context.new_page(), site)
        app.open(PAGE)
        ex = cache.exercise("gqa", 3, 3)
        prefix = f"ans-{ex.id}"
        single = app.keyed(cell_key(prefix, "cache_floats", 0, 0)).locator("input").bounding_box()
        head = app.keyed(cell_key(prefix, "O1", 0, 0)).locator("input").bounding_box()
        assert single["width"] >= head["width"] >= 50, (single, head)
        # the concatenation keeps its 2 rows of 8 cells side by side (scrolling sideways on a phone)
        tops = {round(app.keyed(cell_key(prefix, "concat", 0, j)).locator("input").bounding_box()["y"])
                for j in range(8)}
        assert len(tops) == 1
        assert app.page.get_by_text(exercises.t("kind.gqa.title")).count() >= 1
    finally:
        context.close()
