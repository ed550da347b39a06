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
    assert all(float(x) == 100.0 for x in rows[1][1:3])  # Total and the item, in percent, as on the page
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


def _boxes_overlap(a: dict | None, b: dict | None) -> bool:
    if not a or not b:
        return False
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
            and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


def test_the_gradebook_fits_five_items_at_1280_and_no_toolbar_covers_the_student_box_at_390(people, app_db,
                                                                                           screenshots) -> None:
    """At 1280 px the fifth item's column was cut; at 390 px the tables' toolbars covered the Student box."""
    kinds = ("softmax", "scores", "masking", "scaling", "weighted_sum")
    created = storage.create_assignment(app_db, "Five items", [{"kind": k, "level": 2} for k in kinds], 4)
    code, key = created.assignment.code, created.teacher_key
    for name in ("Ada Lovelace", "Alan Turing"):
        for index, kind in enumerate(kinds):
            storage.record_submission(app_db, code, name, index, kind, 2, index, {"x": "1"}, 0.5, None)
    book = people()
    book.open("/gradebook")
    book.keyed("gradebook.code").locator("input").fill(code)
    book.keyed("gradebook.key").locator("input").fill(key)
    book.rerun(lambda: book.button(t("gradebook.open")).click())
    tables = book.page.locator('[data-testid="stDataFrame"]')
    expect(tables.first).to_be_visible()
    for width in (1280, 390):
        book.page.set_viewport_size({"width": width, "height": 900})
        book.settle()
        book.page.wait_for_timeout(300)  # the grid lays its columns out again
        # the grid draws on a canvas; its accessible header row lists the columns in view
        headers = tables.first.locator('[role="columnheader"]').all_inner_texts()
        if width == 1280:
            assert t("gradebook.col.attempts") in headers, \
                f"at 1280 px the fifth item's column is cut: the columns in view are {headers}"
        book.screenshot(str(screenshots / f"gradebook-{width}.png"))
        student = book.keyed("gradebook.one_student")
        student.scroll_into_view_if_needed()
        for n in range(tables.count()):  # hovering a table shows its toolbar (if it has one)
            tables.nth(n).hover()
            toolbars = book.page.locator('[data-testid="stElementToolbar"]')
            for bar in (toolbars.nth(i) for i in range(toolbars.count())):
                assert not (bar.is_visible() and _boxes_overlap(bar.bounding_box(), student.bounding_box())), \
                    f"at {width} px the toolbar of table {n + 1} covers the Student box"
