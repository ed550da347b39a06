"""Accessibility in a real browser: fractions that never collide, grids labelled for everyone, a phone layout.

* Fraction matrices: js/matrix_row_gaps.js measures, for every displayed matrix that holds a fraction,
  the smallest gap between the ink of two cells one above the other (canvas text metrics place each
  glyph run's ink around its baseline). Before the fix the rows overlapped (about −1.5 px).
* Grids: every cell is named "A, row 2, column 3" for a screen reader, rows and columns are numbered on
  the page, and Tab goes along a row, then to the next row.
* A phone (390 × 844): the 4 × 4 grid keeps 4 rows of 4 cells (it scrolls sideways inside its own
  block); no equation or aid makes the page itself wider than the screen, and an equation too wide for
  its block scrolls there and can be reached with the keyboard.

The pictures go where the screenshots fixture says (docs/screenshots with E2E_SCREENSHOTS=docs/screenshots).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

import exercises
from tests.e2e.streamlit_driver import StreamlitPage
from ui import cache
from ui.answer_grid import cell_key, cell_label
from ui.practice_state import answer_prefix

GAPS_JS = (Path(__file__).parent / "js" / "matrix_row_gaps.js").read_text()
PHONE = {"width": 390, "height": 844}
MIN_GAP_PX = 4.0
FRACTION_CASES = ["/practice?kind=softmax&level=3&seed=103", "/practice?kind=weighted_sum&level=3&seed=5",
                  "/practice?kind=grad_weighted_sum&level=2&seed=301"]


@pytest.fixture
def phone(browser, site: str):
    context = browser.new_context(viewport=PHONE, locale="en-US", device_scale_factor=1)
    try:
        yield StreamlitPage(context.new_page(), site)
    finally:
        context.close()


def row_gaps(app: StreamlitPage) -> list[float]:
    return app.page.evaluate(GAPS_JS)


@pytest.mark.parametrize("path", FRACTION_CASES)
def test_fraction_rows_do_not_collide_in_the_given_matrices(app: StreamlitPage, path: str) -> None:
    app.open(path)
    gaps = row_gaps(app)
    assert gaps, "the problem shows a matrix with fractions"
    assert min(gaps) >= MIN_GAP_PX, f"rows of a fraction matrix touch or overlap: gaps {gaps} px"


def test_fraction_rows_do_not_collide_in_the_exact_solution(app: StreamlitPage) -> None:
    app.open(FRACTION_CASES[1])
    app.rerun(lambda: app.button(exercises.t("solution.show")).click())
    gaps = row_gaps(app)
    assert len(gaps) >= 2, "the exact solution shows matrices with fractions"
    assert min(gaps) >= MIN_GAP_PX, f"rows of a fraction matrix touch or overlap: gaps {gaps} px"


def grid_boxes(app: StreamlitPage, prefix: str, part: str, shape: tuple[int, int]) -> list[list[dict]]:
    return [[app.keyed(cell_key(prefix, part, i, j)).locator("input").bounding_box() for j in range(shape[1])]
            for i in range(shape[0])]


# what a row's number is drawn from: the counter the row adds 1 to, and its ::before's content
ROW_NUMBERS_JS = """(rows) => rows.map(row => ({counter: getComputedStyle(row).counterIncrement,
                                                content: getComputedStyle(row, '::before').content}))"""


def test_cells_are_named_numbered_and_tabbed_row_by_row(app: StreamlitPage) -> None:
    app.open(FRACTION_CASES[0])
    ex = cache.exercise("softmax", 103, 3)
    prefix = answer_prefix(ex)
    for i in range(4):
        for j in range(4):
            name = cell_label("A", i + 1, j + 1, "en")
            expect(app.page.get_by_role("textbox", name=name, exact=True)).to_have_count(1)
    grid = app.page.locator('[class*="st-key-abh-grid-"]')
    expect(grid.locator(".abh-grid-head")).to_have_text(["1", "2", "3", "4"])
    numbers = grid.locator(".stHorizontalBlock").evaluate_all(ROW_NUMBERS_JS)
    assert numbers == [{"counter": "abh-row 1", "content": 'counter(abh-row) / ""'}] * 4, \
        f"each row is not numbered by the grid's counter (and kept from screen readers): {numbers}"
    first = app.keyed(cell_key(prefix, "A", 0, 0)).locator("input")
    first.focus()
    order = []
    for _ in range(5):
        order.append(app.page.evaluate("() => document.activeElement.getAttribute('aria-label')"))
        app.page.keyboard.press("Tab")
    assert order == [cell_label("A", r, c, "en") for r, c in [(1, 1), (1, 2), (1, 3), (1, 4), (2, 1)]]


def test_a_phone_keeps_the_grid_a_grid(phone: StreamlitPage, screenshots) -> None:
    phone.open(FRACTION_CASES[0])
    ex = cache.exercise("softmax", 103, 3)
    boxes = grid_boxes(phone, answer_prefix(ex), "A", (4, 4))
    tops = [{round(box["y"]) for box in row} for row in boxes]
    assert all(len(row) == 1 for row in tops), f"a row's cells are not side by side: {tops}"
    assert len({next(iter(row)) for row in tops}) == 4, "four rows"
    for row in boxes:
        lefts = [box["x"] for box in row]
        assert lefts == sorted(lefts) and all(box["width"] >= 50 for box in row), row
    phone.screenshot(str(screenshots / "practice-phone.png"))


FADES_JS = """async () => {
  const edges = (el) => ['--abh-fade-left', '--abh-fade-right'].map(
    (name) => parseFloat(getComputedStyle(el).getPropertyValue(name)) || 0);
  const all = [...document.querySelectorAll('[data-testid="stMain"] .katex-display')];
  const wide = all.filter(el => el.scrollWidth > el.clientWidth + 1);
  const before = wide.map(edges);
  for (const el of wide) el.scrollLeft = el.scrollWidth;
  await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  const scrolled = wide.map(edges);
  for (const el of wide) el.scrollLeft = 0;
  return {wide: before, scrolled, narrow: all.filter(el => el.scrollWidth <= el.clientWidth).slice(0, 5).map(edges)};
}"""


def page_overflow(app: StreamlitPage) -> int:
    """How many px the page's main block is wider than the screen (0 when nothing runs off the side)."""
    return app.page.evaluate("""() => { const main = document.querySelector('[data-testid="stMain"]');
      return Math.max(0, main.scrollWidth - main.clientWidth); }""")


@pytest.mark.parametrize("path", ["/practice?kind=multi_head&level=3&seed=2", "/practice?kind=backprop&level=3&seed=1"])
def test_a_phone_shows_aids_and_long_equations_inside_the_screen(phone: StreamlitPage, path: str, screenshots) -> None:
    phone.open(path)
    assert page_overflow(phone) == 0, "the problem and its aids run off the side"
    phone.rerun(lambda: phone.button(exercises.t("solution.show")).click())
    assert page_overflow(phone) == 0, "the solution runs off the side"
    wide = phone.page.evaluate("""() => [...document.querySelectorAll('.katex-display')]
      .filter(el => el.scrollWidth > el.clientWidth + 1)
      .map(el => [el.getAttribute('tabindex'), el.getAttribute('aria-label')])""")
    assert wide, "some solution line is wider than a phone"
    assert all(tabindex == "0" and label for tabindex, label in wide), f"{path}: named once settled: {wide}"
    # a block that scrolls shows it: its hidden side fades out (right at the start, left at the end)
    fades = phone.page.evaluate(FADES_JS)
    assert fades["wide"] and all(right > 0 and left == 0 for left, right in fades["wide"]), f"{path}: {fades}"
    assert all(left > 0 and right == 0 for left, right in fades["scrolled"]), f"{path}: scrolled to the end {fades}"
    assert fades["narrow"] and all(edges == [0, 0] for edges in fades["narrow"]), f"{path}: a block that fits {fades}"
    phone.screenshot(str(screenshots / f"solution-phone-{path.split('kind=')[1].split('&')[0]}.png"))
