"""Hostile text in a real browser: what a URL or the database carries is shown as text.

No link, image or KaTeX element is made from it, the browser fetches nothing it names, and the raw
text is there for the reader. (tests/test_hostile.py checks every page and parameter through AppTest.)"""

from __future__ import annotations

from playwright.sync_api import expect

import storage
from exercises.i18n.escape import WORD_JOINER
from exercises.teacher.assignments import make_spec
from services.submissions import class_exercises
from tests.e2e.streamlit_driver import StreamlitPage

LINK = "[Log in here](https://evil.example/x)"
IMAGE = "![p](http://127.0.0.1:9/p.png)"
KATEX = r"$\kern-60em\rule{99em}{9em}$"
MAIN = '[data-testid="stMain"]'


def watch_requests(app: StreamlitPage) -> list[str]:
    fetched: list[str] = []
    app.page.on("request", lambda request: fetched.append(request.url))
    return fetched


def assert_inert(app: StreamlitPage, hostile: str, fetched: list[str]) -> None:
    page = app.page
    assert page.locator('a[href^="https://evil.example"], a[href^="http://127.0.0.1:9"]').count() == 0
    assert page.locator('img[src*="127.0.0.1:9"]').count() == 0
    # (a practice problem has its own formulas: only the boxes and headings that echo text are checked)
    assert page.locator(f'{MAIN} [data-testid="stAlert"] .katex, {MAIN} h1 .katex').count() == 0
    assert page.locator('[data-testid="stSidebar"] .katex').count() == 0
    assert not [url for url in fetched if url.startswith(("http://127.0.0.1:9/", "https://evil.example"))]
    assert hostile[:40] in shown_text(page.locator(MAIN))


def shown_text(locator) -> str:
    """What the reader sees (escape.markdown's invisible word joiners dropped)."""
    return locator.inner_text().replace(WORD_JOINER, "")


def test_a_hostile_share_code_is_shown_as_text(app: StreamlitPage) -> None:
    fetched = watch_requests(app)
    for hostile in (LINK, IMAGE, KATEX):
        app.open(f"/assignments?assignment={_quoted(hostile)}")
        expect(app.page.locator('[data-testid="stAlert"]').first).to_be_visible()
        assert_inert(app, hostile, fetched)


def test_a_hostile_practice_link_is_shown_as_text(app: StreamlitPage) -> None:
    fetched = watch_requests(app)
    for param, hostile in (("kind", IMAGE), ("kind", KATEX), ("level", LINK)):
        app.open(f"/practice?{param}={_quoted(hostile)}")
        expect(app.page.locator('[data-testid="stAlert"]').first).to_be_visible()
        alert = app.page.locator('[data-testid="stAlert"]').first
        assert hostile[:20] in shown_text(alert)
        assert alert.locator(".katex, a, img").count() == 0
        assert_inert(app, hostile[:20], fetched)


def test_a_hostile_title_and_name_are_shown_as_text(people, app_db) -> None:
    spec = make_spec(LINK, [{"kind": "scores", "level": 1, "count": 1}], 5)
    created = storage.create_assignment(app_db, spec.title, spec.items, spec.seed, spec.per_student,
                                        spec.allow_solutions, exercises=class_exercises(spec))
    code = created.assignment.code
    student = people()
    fetched = watch_requests(student)
    student.open(f"/assignments?assignment={code}")
    heading = student.page.locator(f"{MAIN} h1").first
    assert shown_text(heading) == LINK
    box = student.keyed(f"assign.name_input.{code}").locator("input")
    box.fill(IMAGE)
    student.rerun(lambda: student.button("Start").click())
    expect(student.page.get_by_text("Working as")).to_be_visible()
    assert_inert(student, IMAGE, fetched)
    assert LINK in shown_text(student.page.locator(MAIN))


def _quoted(text: str) -> str:
    from urllib.parse import quote
    return quote(text, safe="")
