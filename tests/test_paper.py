"""Paper in, grades out: sheets printed with cell grids, registration marks and a QR code per page are
read back from (simulated) photos, cell by cell, and graded; nothing uncertain reaches the gradebook
without the teacher's review."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from exercises import worksheets
from exercises.teacher.assignments import AssignmentSpec, ItemSpec
from exercises.worksheets import paper

SECRET = b"paper-tests-secret-0123456789abcd"
CODE = "PAPER123"


def paper_sheets(items, students, space="none", secret=SECRET, code=CODE):
    spec = AssignmentSpec("Paper", tuple(ItemSpec(k, lv) for k, lv in items), 5, per_student=True)
    ws = worksheets.build(spec, students, code=code)
    pages = tuple((s.student, paper.qr_payloads(secret, code, s.student)) for s in ws.sheets)
    return dataclasses.replace(ws, paper=pages, space=space)


@functools.cache
def reader():
    from services import paper_reading

    return paper_reading.CellReader()


def test_qr_payload_is_signed_and_read_back_exactly():
    payload = paper.qr_payload(SECRET, CODE, "Ada Lovelace", 3)
    assert paper.read_payload(SECRET, payload) == paper.PageId(CODE, "Ada Lovelace", 3)
    forged = [payload.replace("Ada Lovelace", "Alan Turing"), payload.replace(" 3 ", " 4 "),
              payload + "\n", "", "ABH1", payload.replace(CODE, "OTHER123")]
    for text in forged:
        assert paper.read_payload(SECRET, text) is None, f"a forged or broken payload was taken: {text!r}"
    assert paper.read_payload(b"another secret", payload) is None, "a payload signed with another secret was taken"


def test_layout_gives_every_part_one_grid_with_its_own_markers():
    ws = paper_sheets([("masking", 2), ("concepts", 1), ("softmax", 1)], ["Ada"])
    items = ws.sheets[0].exercises
    layout = paper.grids(items)
    assert [(g.item, g.part) for g in layout] == [(i, p.name) for i, ex in enumerate(items) for p in ex.parts]
    ids = [k for g in layout for k in g.marker_corners()]
    assert len(ids) == len(set(ids)) == 4 * len(layout), "marker ids repeat between grids"
    for g in layout:
        part = next(p for p in items[g.item].parts if p.name == g.part)
        assert (g.choice > 0) == part.is_choice, f"{g.part}: a choice part must be one letter cell"
        assert g.frame_mm[0] <= paper.TEXT_WIDTH_MM, f"{g.part}: the grid is wider than the page"


def test_a_rendered_page_filled_in_print_is_read_back_cell_by_cell():
    """The first slice end to end: the app's sheet (Typst), answers printed into its cells, a mild
    photo (turned, blurred, JPEG), then the page identified by its QR and every cell read right."""
    import cv2

    from services import paper_reading
    from tests import paper_corpus

    ws = paper_sheets([("softmax", 2), ("masking", 2)], ["Ada Lovelace"])
    items = list(ws.sheets[0].exercises)
    layout = paper.grids(items)
    pages = paper_corpus.sheet_pages(ws, dpi=170)[0]
    rng = np.random.default_rng(1)
    answers = paper_corpus.answers_for(items, layout, rng)
    seen = {}
    for number, page in enumerate(pages, start=1):
        filled, written = paper_corpus.fill(page, layout, answers, "printed", rng, paper_corpus.fonts()[0])
        photo = paper_corpus.photograph(filled, rng, strength=0.5)
        gray = cv2.imdecode(np.frombuffer(photo, np.uint8), cv2.IMREAD_GRAYSCALE)
        read = paper_reading.read_page(gray, lambda page_id: layout, reader(), SECRET, f"page {number}")
        assert read.problem is None, f"page {number}: {read.problem}"
        assert read.page == paper.PageId(CODE, "Ada Lovelace", number), f"page {number} identified as {read.page}"
        for grid in read.grids:
            for cell in grid.cells:
                seen[(grid.index, cell.row, cell.col)] = cell
    for (g, r, c), text in answers.items():
        cell = seen.get((g, r, c))
        assert cell is not None, f"grid {g} cell ({r}, {c}) was not found on any page"
        assert cell.text == text, f"grid {g} ({layout[g].part}) cell ({r}, {c}): wrote {text!r}, read {cell.text!r}"
