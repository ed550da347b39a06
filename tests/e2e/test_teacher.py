"""The teacher flow in real browsers: a teacher creates a set, a student submits it by its link,
the teacher opens the gradebook with the key and exports it as CSV. Three separate sessions."""

from __future__ import annotations

import csv
import io

from playwright.sync_api import expect

import storage
from exercises.cli import selftest
from exercises.i18n import t
from tests.e2e.streamlit_driver import StreamlitPage
from ui.answer_grid import paste_key

STUDENT = "Ada Lovelace"


def create_assignment(teacher: StreamlitPage, title: str) -> tuple[str, str, str]:
    """Fill in the builder (title; the first topic, level and count as offered) and create; (code, link, key)."""
    teacher.open("/assignments")
    expect(teacher.page.get_by_role("heading", name=t("assign.page_title"), exact=True)).to_be_visible()
    box = teacher.keyed("assign.title").locator("input")
    box.fill(title)
    teacher.rerun(lambda: box.press("Enter"))
    teacher.rerun(lambda: teacher.keyed("assign.create").locator("button").click())
    expect(teacher.page.get_by_text(t("assign.created", title=title))).to_be_visible()
    code, link, key = [text.strip() for text in teacher.page.locator('[data-testid="stCode"]').all_inner_texts()]
    assert link.endswith(f"?assignment={code}")
    return code, link, key


def test_create_submit_and_read_the_gradebook(people, app_db, screenshots) -> None:
    teacher = people()
    code, link, key = create_assignment(teacher, "Week 3")
    teacher.screenshot(str(screenshots / "assignments.png"))
    assignment = storage.get_assignment(app_db, code)
    assert assignment is not None and assignment.title == "Week 3"

    # a student opens the link the page gave, names themself and submits right answers
    student = people()
    student.page.goto(link)
    student.settle()
    name_box = student.keyed(f"assign.name_input.{code}").locator("input")
    name_box.fill(STUDENT)
    student.rerun(lambda: student.button(t("assign.start")).click())
    expect(student.page.get_by_text(STUDENT)).to_be_visible()
    from tests.e2e.test_classroom import exercises_of, slot_of

    slot = slot_of(student)  # the grids' keys: position and a random slot id, never the seed
    for index, ex in enumerate(exercises_of(app_db, code)):
        for part in ex.parts:
            area = student.keyed(paste_key(f"asg-{index}-{slot}", part.name)).locator("textarea")
            area.fill(selftest.as_text(part.reference))
    student.rerun(lambda: student.button(t("assign.submit")).click())
    expect(student.page.get_by_text(t("assign.submitted", score="100%"))).to_be_visible()
    student.screenshot(str(screenshots / "assignment-student.png"))

    # later, the teacher opens the gradebook with the code and the key, and exports it
    book = people()
    book.open("/gradebook")
    book.keyed("gradebook.code").locator("input").fill(code)
    book.keyed("gradebook.key").locator("input").fill(key)
    book.rerun(lambda: book.button(t("gradebook.open")).click())
    expect(book.page.get_by_role("heading", name=t("gradebook.heading", title="Week 3", code=code))).to_be_visible()
    expect(book.page.locator('[data-testid="stDataFrame"]').first).to_be_visible()
    with book.page.expect_download() as download:
        book.button(t("gradebook.csv")).click()
    rows = list(csv.reader(io.StringIO(download.value.path().read_text(encoding="utf-8-sig"))))
    assert rows[0][0] == t("gradebook.student") and rows[0][1] == t("gradebook.total")
    assert [row[0] for row in rows[1:]] == [STUDENT]
    assert all(float(x) == 100.0 for x in rows[1][1:3])  # Total and the item, in percent, as on the page (issue 15)
    book.screenshot(str(screenshots / "gradebook.png"))


def test_a_wrong_key_does_not_open_the_gradebook(people) -> None:
    code, _link, _key = create_assignment(people(), "Quiz")
    book = people()
    book.open("/gradebook")
    book.keyed("gradebook.code").locator("input").fill(code)
    book.keyed("gradebook.key").locator("input").fill("x" * 24)
    book.rerun(lambda: book.button(t("gradebook.open")).click())
    expect(book.page.locator('[data-testid="stAlertContentError"]')).to_be_visible()
    expect(book.page.locator('[data-testid="stDataFrame"]')).to_have_count(0)
