"""Paper in, grades out: sheets printed with cell grids, registration marks and a QR code per page are
read back from (simulated) photos, cell by cell, and graded; nothing uncertain reaches the gradebook
without the teacher's review."""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np
import pytest

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


def needs_pdftoppm() -> None:
    """The corpus rasterises the app's sheets with poppler's pdftoppm (scripts/install_test_tools.sh):
    skipped without it, failed without it under CI."""
    import shutil

    if shutil.which("pdftoppm") is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but pdftoppm is missing: install Debian's poppler-utils (scripts/install_test_tools.sh)")
        pytest.skip("pdftoppm (poppler-utils) is not installed")


@pytest.fixture
def class_db(tmp_path, monkeypatch):
    from services import db as services_db

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("ATTENTION_DB_PATH", str(tmp_path / "paper.sqlite3"))
    monkeypatch.setenv("ATTENTION_SECRET", os.environ.get("PAPER_TEST_SECRET", "paper corpus"))  # the same class every run
    return services_db.engine()


CLASS = ["Ada Lovelace", "Alan Turing", "Rózsa Péter"]  # printed, hand, printed (her pages scanned into a PDF)
ITEMS = [{"kind": "softmax", "level": 2}, {"kind": "masking", "level": 2}, {"kind": "concepts", "level": 1}]


def test_a_photographed_class_is_read_reviewed_and_lands_in_the_gradebook(class_db):
    """The corpus test: the app's own paper sheets for a class, filled in print (several fonts) and in
    handwriting-like strokes, photographed in simulation, read by the child processes, marked; the
    figures the README states hold, no grade differs from the truth without review, and after the
    review every sheet is stored as read from paper with its cells."""
    import storage
    from services import assignments, gradebook
    from services import paper as marking_service
    from tests import paper_corpus

    needs_pdftoppm()
    created = assignments.create("Paper class", ITEMS, seed=11, per_student=True)
    a = created.assignment
    assignments.set_roster(a, created.teacher_key, "\n".join(CLASS))
    ws = assignments.paper_worksheet(a, CLASS, space="none")
    started = time.perf_counter()
    files, truth = paper_corpus.class_corpus(ws, np.random.default_rng(7))
    made = time.perf_counter() - started
    scanned = [data for name, data in files if name.startswith("002-")]  # the last student's pages: a scan
    files = [f for f in files if not f[0].startswith("002-")] + [("scan.pdf", _pdf(scanned))]
    huge = _png(np.full((8000, 7000), 255, np.uint8))  # 56 megapixels in a small file: refused from its header
    junk = [("notes.txt", b"not a photo"), ("blank.png", _png(np.full((300, 200), 255, np.uint8))), ("huge.png", huge)]
    pages = marking_service.read_uploads(a, files + junk)
    marking = marking_service.mark(a, pages)
    for page in pages:  # each page's own QR code: the file 001-2.jpg (or scan.pdf #2) is page 2
        if page.page is not None:
            assert page.page.page == int(page.source.replace(".jpg", "").split("-")[-1].split("#")[-1]), \
                f"{page.source} read as page {page.page.page}"
    print(f"corpus: {len(files)} pages made in {made:.1f} s, read and marked in "
          f"{time.perf_counter() - started - made:.1f} s")

    figures = paper_corpus.figures(marking, truth, len(files))
    shown = "\n".join(figures.misreads) + f"\npages not read: {marking.problems}"  # which, and why (no_qr…)
    assert figures.share("printed") >= 0.99, f"printed cells read right {figures.share('printed'):.3f}:\n{shown}"
    assert figures.share("hand") >= 0.90, f"handwritten cells read right {figures.share('hand'):.3f}:\n{shown}"
    assert figures.wrong_unreviewed == [], "grades differing from what was written, not sent to review:\n" + \
        "\n".join(figures.wrong_unreviewed)
    assert sorted(marking.problems) == [("blank.png", "no_qr"), ("huge.png", "too_many_pixels"),
                                        ("notes.txt", "not_an_image")], marking.problems
    assert figures.review <= 0.2 * sum(figures.cells.values()), f"{figures.review} cells sent to review"

    for _round in range(3):  # the teacher reads each crop and types what is written; a corrected cell may
        for cell in marking.review:  # send others of its item to review (judged anew from it)
            marking_service.correct(marking, cell.key, truth[cell.key[0]][cell.key].text)
    assert marking.review == [], "cells still waiting after three rounds of review"
    stored = marking_service.record(a, marking)
    assert sorted(stored) == sorted(CLASS) and all(isinstance(v, list) for v in stored.values()), stored

    rows = storage.list_submissions(class_db, a.code, created.teacher_key)
    assert {r.source for r in rows} == {"paper"}, "a submission read from paper is not marked as such"
    frame = gradebook.table(gradebook.load(a.code, created.teacher_key), [str(i) for i in range(len(ITEMS))])
    assert frame["Last submitted"].str.endswith("· from paper").all(), frame["Last submitted"].tolist()
    for student in CLASS:
        sheet = marking.sheets[student]
        truth_sheet = marking_service.StudentSheet(student, sheet.items, sheet.layout)
        for key, w in truth[student].items():
            truth_sheet.cells[key] = marking_service.Cell(key, w.item, w.part, w.text, 1.0, not w.text, b"")
        marking_service.grade_sheet(truth_sheet)
        mine = [r for r in rows if r.student == student]
        for r in mine:
            fb = truth_sheet.feedback[r.item_index]
            cells_seen = [f"{k[1:]} wrote {truth[student][k].text!r} read {c.read!r} ({c.confidence:.3f}, {c.reason})"
                          for k, c in sheet.cells.items() if c.item == r.item_index]
            assert r.score == pytest.approx(0.0 if fb is None else fb.score), \
                f"{student} item {r.item_index + 1}: stored {r.score}, written answers give {fb and fb.score}: " \
                + "; ".join(cells_seen)
        cells = storage.paper_cells_of(class_db, a.code, mine[0].attempt_id)
        assert len(cells) == len(truth[student]), f"{student}: {len(cells)} cells kept of {len(truth[student])}"
        assert all(c["crop"].startswith(b"\x89PNG") for c in cells), f"{student}: a cell without its crop"
        # the student's view: their grids as written, and the first wrong step where the truth has it
        first = marking_service.first_wrong(cells)
        wrong = [k for k in sorted(truth_sheet.cells) if truth_sheet.cells[k].right is False]
        assert (first and (first["grid"], first["row"], first["col"])) == (wrong and wrong[0][1:]) or \
            (first is None and not wrong), f"{student}: first wrong step {first and first['grid']} vs {wrong[:1]}"
        assert len(marking_service.grid_images(cells)) == len(sheet.layout), f"{student}: a grid not shown"


def _pdf(jpegs: list[bytes]) -> bytes:
    """Photos as one PDF, a page each (a scanner's output)."""
    import io

    from PIL import Image

    images = [Image.open(io.BytesIO(data)).convert("L") for data in jpegs]
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:], resolution=180)
    return out.getvalue()


def _png(gray: np.ndarray) -> bytes:
    cv2 = paper.opencv()

    return cv2.imencode(".png", gray)[1].tobytes()


def test_uploads_past_their_bounds_are_refused_unread():
    from services import paper as marking_service

    with pytest.raises(marking_service.TooBig):
        marking_service.check_upload([("a.jpg", b"\xff\xd8\xff")] * (marking_service.MAX_FILES + 1))
    with pytest.raises(marking_service.TooBig):
        marking_service.check_upload([("big.jpg", b"\xff\xd8\xff" + bytes(marking_service.MAX_FILE_BYTES))])
    assert marking_service.sniff(b"%PDF-1.7") == "pdf" and marking_service.sniff(b"GIF89a") is None


def test_the_reader_loads_its_weights_from_the_wheel_and_downloads_nothing(monkeypatch):
    """rapidocr downloads a missing model or character list at run time: the reader names the wheel's
    own files, so a download is never tried (here it would fail the test), and it reads a cell."""
    from rapidocr.utils.download_file import DownloadFile

    from services import paper_reading
    from tests import paper_corpus

    def refuse(*args, **kwargs):
        raise AssertionError(f"rapidocr tried to download {args} {kwargs}")

    monkeypatch.setattr(DownloadFile, "run", classmethod(refuse))
    canvas = np.full((60, 200), 255, np.uint8)
    canvas = paper_corpus.draw_printed(canvas, "-0.75", (10, 8, 190, 52), paper_corpus.fonts()[0],
                                       np.random.default_rng(0))
    level = paper_reading._even_light(canvas)
    blots, box = paper_reading._ink_box(level)
    assert box is not None, "the printed value was taken for a blank cell"
    [(text, confidence)] = paper_reading.CellReader().read([paper_reading._for_recogniser(level, box)])
    assert text == "-0.75" and confidence >= paper_reading_sure(), f"read {text!r} ({confidence:.3f}) for -0.75"


def paper_reading_sure() -> float:
    from services import paper as marking_service

    return marking_service.REVIEW_BELOW


def test_a_dropped_point_is_put_back_only_where_its_place_is_sure():
    from services import paper_reading

    digits = [(0, 0, 20, 40, 300), (30, 0, 20, 40, 300), (60, 0, 20, 40, 300)]
    point = (52, 34, 5, 5, 20)  # small, on the baseline, after the first two digits
    assert paper_reading.restore_point("125", digits + [point]) == "12.5"
    assert paper_reading.restore_point("-125", digits + [point]) == "-12.5"
    assert paper_reading.restore_point("125", digits) == "125", "a point put back with no blot for it"
    assert paper_reading.restore_point("12.5", digits + [point]) == "12.5"
    assert paper_reading.restore_point("1250", digits + [point]) == "1250", "digits and blots disagree: unsure"


def test_a_misread_that_would_change_the_grade_is_a_near_miss():
    from services import paper as marking_service

    cases = [("033", 0.33, 2, True), ("0.38", 0.33, 2, True), ("-0.5", 0.5, 2, True), ("3/12", 0.25, 0, True),
             ("0.91", 0.33, 2, False), ("8", 2.0, 0, False), ("-inf", float("-inf"), 2, True)]
    for text, reference, decimals, expected in cases:
        assert marking_service._near_miss(text, reference, decimals) is expected, (text, reference, decimals)


def test_the_qr_code_of_a_far_blurred_photo_is_found():
    """The page's QR code is read on photos taken far and blurred, where its modules are ~3 px wide and
    soft: a page of this assignment code was once not read at all (the whole page's cells lost), and
    the same sheet photographed under other seeds must be read as well."""
    cv2 = paper.opencv()

    from services import paper_reading
    from tests import paper_corpus

    needs_pdftoppm()
    secret, code = b"secret-8", "I8EZDI9H"  # the photo of this sheet's page 3 (rng 7) defeated the reader
    ws = paper_sheets([("softmax", 2), ("masking", 2), ("concepts", 1)], ["Ada Lovelace"], secret=secret, code=code)
    files, _truth = paper_corpus.class_corpus(ws, np.random.default_rng(7))
    pages = paper_corpus.sheet_pages(ws)[0]
    rng = np.random.default_rng(1)
    files += [(f"seed 1 #{n}: page {n % len(pages) + 1}", paper_corpus.photograph(pages[n % len(pages)], rng))
              for n in range(12)]
    for name, data in files:
        gray = paper_reading.shrink(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_GRAYSCALE))
        payload = paper_reading.find_payload(gray)
        assert payload is not None, f"{name}: no QR code found"
        page = paper.read_payload(secret, payload)
        assert page is not None and page.code == code, f"{name}: the QR code read as {payload!r}"
