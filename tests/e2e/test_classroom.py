"""A classroom that can be trusted, in real browsers: no seed in the page, a Concepts item
submits, a name cannot overwrite another person's grade, one attempt stays one after the solutions,
the teacher finds their assignments again after a reload, and the CSV runs no formula."""

from __future__ import annotations

import csv
import io
import re
import unicodedata

from playwright.sync_api import expect

import storage
from exercises import Exercise
from exercises.cli import selftest
from exercises.i18n import t
from tests.e2e.streamlit_driver import StreamlitPage
from ui.answer_grid import paste_key

ITEMS = [{"kind": "softmax", "level": 1, "count": 1}, {"kind": "concepts", "level": 1, "count": 1}]


def exercises_of(engine, code: str, student: str | None = None) -> list[Exercise]:
    stored = storage.stored_exercises(engine, code, student)
    return [Exercise.from_dict(stored[i]) for i in sorted(stored)]


def slot_of(person: StreamlitPage) -> str:
    """The random slot id the page put in its answer grids' keys."""
    classes = person.page.evaluate(
        "() => [...document.querySelectorAll('[class*=\"st-key-asg-0-\"]')].map(e => e.className).join(' ')")
    found = set(re.findall(r"st-key-asg-0-([0-9a-f]+)-", classes))
    assert len(found) == 1, found
    return found.pop()


def start(person: StreamlitPage, code: str, name: str) -> None:
    person.open(f"/assignments?assignment={code}")
    box = person.keyed(f"assign.name_input.{code}").locator("input")
    box.fill(name)
    person.rerun(lambda: person.button(t("assign.start")).click())


def answer(person: StreamlitPage, ex: Exercise, index: int, right: bool) -> None:
    slot = slot_of(person)
    for part in ex.parts:
        if part.is_choice:
            choice = int(part.reference[0, 0]) if right else (int(part.reference[0, 0]) + 1) % len(part.options)
            group = person.page.locator(f'[class*="st-key-asg-{index}-{slot}-{part.name}-choice"]')
            group.get_by_role("radio").nth(choice).check(force=True)
            continue
        text = selftest.as_text(part.reference) if right else "\n".join(
            ", ".join(["7"] * part.shape[1]) for _ in range(part.shape[0]))
        person.keyed(paste_key(f"asg-{index}-{slot}", part.name)).locator("textarea").fill(text)


def test_no_seed_in_the_page_and_a_concepts_item_submits(people, app_db, screenshots) -> None:
    created = storage.create_assignment(app_db, "Concepts too", ITEMS, 3, rules={"attempts": 1})
    code = created.assignment.code
    student = people()
    start(student, code, "Ada Lovelace")
    items = exercises_of(app_db, code)
    html = student.page.content()
    for ex in items:
        assert str(ex.seed) not in html and ex.id not in html, "a seed in the page"
    assert "seed" not in student.page.url
    for index, ex in enumerate(items):
        answer(student, ex, index, right=True)
    student.rerun(lambda: student.button(t("assign.submit")).click())
    expect(student.page.get_by_text(t("assign.submitted", score="100%"))).to_be_visible()
    assert str(items[0].seed) not in student.page.content()
    student.screenshot(str(screenshots / "classroom-concepts.png"))


def test_the_same_name_in_another_browser_replaces_nothing(people, app_db) -> None:
    """The first browser to type a name holds it; another browser typing it (any letter case) is refused,
    and the teacher sees the clash."""
    created = storage.create_assignment(app_db, "Open", ITEMS[:1], 4)
    code, key = created.assignment.code, created.teacher_key
    ada, mallory = people(), people()
    start(ada, code, "Ada Lovelace")
    [ex] = exercises_of(app_db, code)
    answer(ada, ex, 0, right=True)
    ada.rerun(lambda: ada.button(t("assign.submit")).click())
    expect(ada.page.get_by_text(t("assign.submitted", score="100%"))).to_be_visible()
    start(mallory, code, "ADA   LOVELACE")
    expect(mallory.page.get_by_text(t("assign.refused.name_taken"))).to_be_visible()
    expect(mallory.button(t("assign.submit"))).to_have_count(0)
    book = storage.gradebook(app_db, code, key)
    assert book.scores == {("Ada Lovelace", 0): 1.0}
    assert [c.name for c in storage.clashes_of(app_db, code, key)] == ["ADA LOVELACE"]


def test_a_class_list_link_is_the_only_way_in(people, app_db) -> None:
    created = storage.create_assignment(app_db, "Roster", ITEMS[:1], 5, per_student=True)
    code, key = created.assignment.code, created.teacher_key
    links = storage.set_roster(app_db, code, key, ["Ada Lovelace", "Alan Turing"])
    mallory = people()
    mallory.open(f"/assignments?assignment={code}")
    expect(mallory.page.get_by_text(t("assign.roster.needs_link"))).to_be_visible()
    expect(mallory.keyed(f"assign.name_input.{code}")).to_have_count(0)
    mallory.open(f"/assignments?assignment={code}&t={'x' * 22}")
    expect(mallory.page.get_by_text(t("assign.error.link_unknown", code=code))).to_be_visible()
    ada = people()
    ada.open(f"/assignments?assignment={code}&t={links['Ada Lovelace']}")
    expect(ada.page.get_by_text("Ada Lovelace")).to_be_visible()
    [ex] = exercises_of(app_db, code, "Ada Lovelace")
    answer(ada, ex, 0, right=True)
    ada.rerun(lambda: ada.button(t("assign.submit")).click())
    expect(ada.page.get_by_text(t("assign.submitted", score="100%"))).to_be_visible()


def test_one_attempt_stays_one_after_the_solutions(people, app_db) -> None:
    created = storage.create_assignment(app_db, "Once", [{"kind": "scaling", "level": 1, "count": 1}], 6,
                                        allow_solutions=True, rules={"attempts": 1})
    code, key = created.assignment.code, created.teacher_key
    bob = people()
    start(bob, code, "Bob")
    [ex] = exercises_of(app_db, code)
    answer(bob, ex, 0, right=False)
    bob.rerun(lambda: bob.button(t("assign.submit")).click())
    bob.rerun(lambda: bob.button(t("solution.show")).first.click())
    start(bob, code, "Bob")  # the link reopened in the same browser (a fresh one is refused the name)
    expect(bob.page.get_by_text(t("assign.state.no_attempts", allowed=1))).to_be_visible()
    expect(bob.button(t("assign.submit"))).to_have_count(0)
    assert [s.score for s in storage.list_submissions(app_db, code, key)] == [0.0]


def test_the_teacher_finds_their_assignments_after_a_reload(people, screenshots) -> None:
    from tests.e2e.test_teacher import create_assignment

    teacher = people()
    code, _link, key = create_assignment(teacher, "Week 5")
    later = people()
    later.open("/assignments")
    later.keyed("assign.dash_key").locator("input").fill(key)
    later.rerun(lambda: later.button(t("assign.dash_open")).click())
    expander = later.page.get_by_text(f"Week 5 · {code}")
    expect(expander).to_be_visible()
    expander.click()  # opening an expander is drawn in the browser, no rerun
    expect(later.button(t("assign.download_sheet"))).to_be_visible()
    later.screenshot(str(screenshots / "dashboard-1280.png"))
    later.page.set_viewport_size({"width": 390, "height": 844})
    later.screenshot(str(screenshots / "dashboard-390.png"))


def test_the_csv_runs_no_formula(people, app_db) -> None:
    created = storage.create_assignment(app_db, "Formulas", ITEMS[:1], 7)
    code, key = created.assignment.code, created.teacher_key
    names = ['=HYPERLINK("http://example.invalid","x")', "＝1+1", "@SUM(A1)"]
    for name in names:
        storage.record_submission(app_db, code, name, 0, "softmax", 1, 1, None, 0.0, None)
    book = people()
    book.open(f"/gradebook?code={code}")
    book.keyed("gradebook.key").locator("input").fill(key)
    book.rerun(lambda: book.button(t("gradebook.open")).click())
    with book.page.expect_download() as download:
        book.button(t("gradebook.csv")).click()
    rows = list(csv.reader(io.StringIO(download.value.path().read_text(encoding="utf-8-sig"))))
    # names are stored NFKC-normalised (the full-width ＝ is an = by then): each one starts with an apostrophe
    assert [row[0] for row in rows[1:]] == ["'" + unicodedata.normalize("NFKC", n) for n in names]


def slot_at(person: StreamlitPage, index: int) -> str:
    classes = person.page.evaluate(
        f"() => [...document.querySelectorAll('[class*=\"st-key-asg-{index}-\"]')].map(e => e.className).join(' ')")
    found = set(re.findall(rf"st-key-asg-{index}-([0-9a-f]+)-", classes))
    assert len(found) == 1, found
    return found.pop()


def test_a_long_set_is_answered_a_page_at_a_time(people, app_db) -> None:
    """A long assignment drew every item at once (seconds to open); a page at a time, Previous
    and Next keep what was typed in the browser, and Submit takes every page."""
    created = storage.create_assignment(app_db, "Pages", [{"kind": "softmax", "level": 3, "count": 3}], 8,
                                        rules={"attempts": 1})
    code, key = created.assignment.code, created.teacher_key
    student = people()
    start(student, code, "Ada Lovelace")
    items = exercises_of(app_db, code)  # stored at the first opening
    texts = [selftest.as_text(ex.parts[0].reference) for ex in items]
    for index in range(3):
        expect(student.page.get_by_text(f"page {index + 1} of 3")).to_be_visible()
        box = student.keyed(paste_key(f"asg-{index}-{slot_at(student, index)}", items[index].parts[0].name))
        box.locator("textarea").fill(texts[index])
        if index < 2:
            student.rerun(lambda: student.button(t("assign.page_next")).click())
    for _ in range(2):
        student.rerun(lambda: student.button(t("assign.page_prev")).click())
    box = student.keyed(paste_key(f"asg-0-{slot_at(student, 0)}", items[0].parts[0].name)).locator("textarea")
    expect(box).to_have_value(texts[0])
    student.rerun(lambda: student.button(t("assign.submit")).click())
    expect(student.page.get_by_text(t("assign.submitted", score="100%"))).to_be_visible()
    assert [s.score for s in storage.list_submissions(app_db, code, key)] == [1.0, 1.0, 1.0]
