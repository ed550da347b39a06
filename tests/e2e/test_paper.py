"""Paper in, grades out, in a real browser: the teacher uploads a small simulated class's photos in the
gradebook, meets a cell the reader is unsure of on the review screen (its crop beside the value),
corrects it from the keyboard, confirms the rest with Enter and records the sheets, read from paper."""

from __future__ import annotations

import numpy as np
from playwright.sync_api import expect

import storage
from exercises import worksheets
from exercises.i18n import t
from exercises.worksheets import paper
from tests import paper_corpus
from tests.test_paper import needs_pdftoppm

CLASS = ["Ada Lovelace", "Alan Turing"]
READING_MS = 240_000  # two reading processes start and read the class (a loaded 2-core machine)


def test_a_simulated_class_is_marked_and_an_unsure_cell_reviewed(people, app_db, tmp_path) -> None:
    needs_pdftoppm()
    created = storage.create_assignment(app_db, "Paper quiz", [{"kind": "softmax", "level": 1, "count": 1}], 3)
    code, key = created.assignment.code, created.teacher_key
    storage.set_roster(app_db, code, key, CLASS)
    secret = storage.server_secret(app_db)  # the one the server signs and checks page QR codes with
    items = tuple(created.assignment.spec.exercises(secret=secret))  # the class's set, stored as the app does
    storage.store_exercises(app_db, code, None, dict(enumerate(items)))
    ws = worksheets.Worksheet(created.assignment.spec, tuple(worksheets.Sheet(n, items) for n in CLASS), code,
                              paper=tuple((n, paper.qr_payloads(secret, code, n)) for n in CLASS), space="none")
    rng = np.random.default_rng(3)
    layout = paper.grids(list(items))
    files, written = [], {}
    for student, pages in zip(CLASS, paper_corpus.sheet_pages(ws)):
        answers = paper_corpus.answers_for(list(items), layout, rng, blank=0.0)
        for number, page in enumerate(pages, start=1):
            filled, _cells = paper_corpus.fill(page, layout, answers, "printed", rng, paper_corpus.fonts()[0])
            if student == CLASS[0] and number == 1:  # a value written over another: the reader is unsure
                over = {k: ("27" if k == (0, 0, 1) else "") for k in answers}
                filled, _cells = paper_corpus.fill(filled, layout, over, "hand", rng)
            path = tmp_path / f"{student.split()[0].lower()}-{number}.jpg"
            path.write_bytes(paper_corpus.photograph(filled, rng, strength=0.6))
            files.append(str(path))
        written[student] = answers

    book = people()
    book.open(f"/gradebook?code={code}")
    book.keyed("gradebook.key").locator("input").fill(key)
    book.rerun(lambda: book.button(t("gradebook.open")).click())
    book.page.get_by_text(t("paper.title")).click()  # the expander opens in the browser, no rerun
    book.page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(files)
    book.settle()
    book.button(t("paper.read")).click()
    review = book.keyed("paper-review")
    expect(review).to_be_visible(timeout=READING_MS)
    book.settle()

    # one cell at a time, its crop beside what was read: the teacher types what is written and presses
    # Enter, or presses Enter alone to keep the value read
    value = written[CLASS[0]][(0, 0, 1)]
    box = review.locator("input[type='text']")
    unsure_seen, steps = False, 0
    while review.count() and steps < 30:
        expect(review.locator("img")).to_be_visible()
        expect(box).to_be_focused()  # each cell's value box takes the keyboard: no mouse between cells
        text = review.inner_text()
        if CLASS[0] in text and t("paper.cell", student="", item=1, part="A", row=1, col=2).replace("*", "").strip() in text:
            assert t("paper.reason.unsure") in text, f"the written-over cell was not marked unsure: {text}"
            unsure_seen = True
            book.page.keyboard.type(value)  # typed over the value read (it is selected)
        book.rerun(lambda: book.page.keyboard.press("Enter"))
        steps += 1
    assert unsure_seen, "the written-over cell never came to review"
    assert review.count() == 0, "the review screen never emptied"
    book.rerun(lambda: book.button(t("paper.record", sheets=len(CLASS))).click())
    expect(book.page.get_by_text(t("paper.recorded", sheets=len(CLASS)))).to_be_visible()

    rows = storage.list_submissions(app_db, code, key)
    assert sorted({r.student for r in rows}) == sorted(CLASS) and {r.source for r in rows} == {"paper"}, rows
    ada = next(r for r in rows if r.student == CLASS[0])
    cells = {(c["grid"], c["row"], c["col"]): c for c in storage.paper_cells_of(app_db, code, ada.attempt_id)}
    assert cells[(0, 0, 1)]["text"] == value and cells[(0, 0, 1)]["reviewed"], cells[(0, 0, 1)]
