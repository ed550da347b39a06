"""Check my work in a real browser: the golden example of the reference notes, then one slip."""

from __future__ import annotations

from playwright.sync_api import expect

from exercises.i18n import t
from tests.e2e.streamlit_driver import StreamlitPage
from ui import check_work as cw

# DESIGN §10: X = [[1,0],[0,1],[1,1]], identity weights, causal
GOLDEN_INPUTS = {"X": "1 0\n0 1\n1 1", "W_Q": "1 0\n0 1", "W_K": "1 0\n0 1", "W_V": "1 0\n0 1"}
GOLDEN_CLAIMS = {"scores": "1 0 1\n0 1 1\n1 1 2", "A": "1 0 0\n0.330 0.670 0\n0.248 0.248 0.503",
                 "O": "1 0\n0.330 0.670\n0.752 0.752"}


def area(app: StreamlitPage, key: str):
    return app.keyed(key).locator("textarea")


def type_into(app: StreamlitPage, key: str, text: str) -> None:
    """Type into a text area and apply it (Ctrl+Enter), waiting for the run that follows when it changed."""
    box = area(app, key)
    if box.input_value() == text:
        return
    box.fill(text)
    app.rerun(lambda: box.press("Control+Enter"))


def press_check(app: StreamlitPage) -> None:
    app.rerun(lambda: app.keyed("checkwork.check_button").locator("button").click())


def test_golden_example_is_all_right(app: StreamlitPage, screenshots) -> None:
    app.open("/check_work")
    expect(app.page.get_by_role("heading", name=t("checkwork.page.title"))).to_be_visible()
    for name, text in GOLDEN_INPUTS.items():
        type_into(app, cw.input_key(name), text)
    for name, text in GOLDEN_CLAIMS.items():
        type_into(app, cw.claim_key(name), text)
    press_check(app)
    expect(app.page.get_by_text(t("checkwork.all_right.other", count=3))).to_be_visible()
    # the learner's values beside the correct ones for the three steps typed, the others' correct values
    tables = app.page.locator('[data-testid="stDataFrame"]')
    expect(tables.first).to_be_visible()
    assert tables.count() >= 6
    app.screenshot(str(screenshots / "check-work.png"))


def test_one_slip_in_the_scores_is_the_first_error(app: StreamlitPage) -> None:
    app.open("/check_work")
    for name, text in GOLDEN_INPUTS.items():
        type_into(app, cw.input_key(name), text)
    type_into(app, cw.claim_key("scores"), "1 0 1\n1 1 1\n1 1 2")  # row 2, column 1 should be 0
    press_check(app)
    expect(app.page.get_by_text(t("checkwork.first_error", step=t("part.scores")))).to_be_visible()
    expect(area(app, cw.claim_key("scores"))).to_have_value("1 0 1\n1 1 1\n1 1 2")  # nothing typed is lost


def test_a_practice_problem_checked_end_to_end_on_a_phone(browser, site: str) -> None:
    """RoPE from Practice at 390 px: "Check my work on this one" fills in the problem's given data; the
    rows typed (one turned with positions off by one) are checked, the first wrong step and its mistake
    named, and the convention the numbers fit is said."""
    import numpy as np

    from exercises.kinds import rope
    from ui import cache

    context = browser.new_context(viewport={"width": 390, "height": 900}, locale="en-US", device_scale_factor=1)
    try:
        app = StreamlitPage(context.new_page(), site)
        app.open("/practice?kind=rope&level=2&seed=1")
        ex = cache.exercise("rope", 1, 2)
        app.rerun(lambda: app.button(t("practice.check_my_work")).click())
        expect(app.page.get_by_role("heading", name=t("checkwork.page.title"))).to_be_visible()
        expect(area(app, cw.input_key("Q"))).to_have_value(cw.given_text(ex.given["Q"]))
        slip = rope.mistakes_of(ex, "K_rot")["rope_position_off_by_one"]
        type_into(app, cw.claim_key("Q_rot", "rope"), cw.given_text(np.round(ex.part("Q_rot").reference, 2)))
        type_into(app, cw.claim_key("K_rot", "rope"), cw.given_text(np.round(slip, 2)))
        box = area(app, cw.claim_key("K_rot", "rope")).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box  # on the phone's screen, not beside it
        press_check(app)
        expect(app.page.get_by_text(t("checkwork.first_error", step=t("part.K_rot")))).to_be_visible()
        expect(app.page.get_by_text(t("misconception.rope_position_off_by_one")).first).to_be_visible()
        expect(area(app, cw.claim_key("K_rot", "rope"))).to_have_value(cw.given_text(np.round(slip, 2)))
    finally:
        context.close()
