"""Paper in, grades out (no Streamlit): a class's photos or scans read in child processes, each page
identified by its QR code, each cell read alone (services.paper_reading), graded by the same grader,
rounding policy and mistake catalog as typed answers, and nothing uncertain stored without review.

    pages = read_uploads(a, [(name, data), …])  # child processes with size, count, pixel and memory limits
    marking = mark(a, pages)                     # sheets per student, every cell with its confidence
    marking.review                               # the cells the teacher must confirm or correct
    correct(marking, key, "0.33")                # the teacher's value (or confirm(marking, key))
    record(a, marking)                           # every sheet with nothing left to review: into the gradebook

A cell goes to review when the reader is unsure (confidence below REVIEW_BELOW), when what it read is
no answer the parser takes, or when it is judged wrong and one misread character (a dropped point or
minus, one digit for another) would make it right: a misread that would change a grade. A page that
cannot be identified or registered is listed, never guessed. What a photo holds reaches no parser but
the answer parser (exercises.grade): the QR code's text is matched whole against one pattern and its
signature.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import exercises
import storage
from exercises import AnswerError, Exercise, Feedback
from exercises.worksheets import paper

from . import assignments as service
from . import child_process, db, paper_reading, submissions
from .paper_reading import CellRead, GridRead, PageRead
from .submissions import Graded, secret

__all__ = ["MAX_FILES", "MAX_FILE_BYTES", "MAX_PAGES", "REVIEW_BELOW", "Marking", "ReadFailed", "TooBig", "confirm",
           "correct", "first_wrong", "grid_images", "mark", "paper_cells", "read_uploads", "record"]

MAX_FILES = 200  # files in one upload
MAX_FILE_BYTES = 25 * 2**20  # a photo or a scanned PDF
MAX_UPLOAD_BYTES = 400 * 2**20  # all files of one upload
MAX_PAGES = 400  # pages in one upload (a class of 60 × 6 pages, and some)
MAX_PIXELS = 50_000_000  # an image (or a PDF page as rendered) past this is refused unread
PDF_DPI = 200
CHILD_MEMORY = 1536 * 2**20  # a reading child's address space: the engine, OpenCV, onnxruntime and one page
CHILD_SECONDS = 3 * 60 + 30 * MAX_PAGES // 60  # a child past this is killed (its pages are reported unread)
REVIEW_BELOW = 0.9  # a cell read with less confidence goes to review
SURE_WRONG = 0.98  # a cell judged wrong is stored unreviewed only when read at least this sure
NEAR_MISS_UNITS = 2  # a one-character edit landing this many last-place units from the answer: review
FORMATS = {b"\xff\xd8\xff": "jpeg", b"\x89PNG\r\n\x1a\n": "png", b"%PDF-": "pdf"}


class TooBig(ValueError):
    """An upload past its bounds (files, bytes): nothing of it was read."""


class ReadFailed(RuntimeError):
    """A reading child ended before it answered (killed past its time or memory)."""


# ---------------------------------------------------------------- the child processes

_CHILD = """
from services import paper
paper.read_here(json.loads(sys.stdin.readline()), sys.stdout)
"""


def sniff(data: bytes) -> str | None:
    """"jpeg", "png" or "pdf" by the file's first bytes (never by its name), else None."""
    return next((kind for magic, kind in FORMATS.items() if data.startswith(magic)), None)


def check_upload(files: Sequence[tuple[str, bytes]]) -> None:
    """TooBig past MAX_FILES files, MAX_FILE_BYTES a file or MAX_UPLOAD_BYTES in all."""
    if len(files) > MAX_FILES:
        raise TooBig(f"{len(files)} files, at most {MAX_FILES}")
    for name, data in files:
        if len(data) > MAX_FILE_BYTES:
            raise TooBig(f"{name[:80]}: {len(data)} bytes, at most {MAX_FILE_BYTES}")
    if sum(len(d) for _n, d in files) > MAX_UPLOAD_BYTES:
        raise TooBig(f"the files hold more than {MAX_UPLOAD_BYTES} bytes")


def read_uploads(a: storage.Assignment, files: Sequence[tuple[str, bytes]], workers: int = 2,
                 progress: Callable[[int], None] | None = None) -> list[PageRead]:
    """Every page of the uploaded photos and PDFs, read by `workers` child processes (each file whole in
    one child). TooBig before anything is read; a file that is no JPEG, PNG or PDF, too many pixels or
    unreadable comes back as a page with its problem."""
    check_upload(files)
    with tempfile.TemporaryDirectory(prefix="attention-paper-") as folder:
        paths = []
        for number, (name, data) in enumerate(files):
            path = Path(folder) / f"{number:04d}"
            path.write_bytes(data)
            paths.append((name[:200], str(path)))
        shares = [paths[i::max(workers, 1)] for i in range(max(workers, 1))]
        children = [_start_child(a.code, share) for share in shares if share]
        lines: list[list[bytes]] = [[] for _ in children]

        def drain(index: int) -> None:  # each child's pipe read as it writes: a full pipe would stall it
            for line in children[index].stdout:
                lines[index].append(line)
                if progress is not None:
                    progress(sum(map(len, lines)))

        readers = [threading.Thread(target=drain, args=(i,), daemon=True) for i in range(len(children))]
        try:
            for reader in readers:
                reader.start()
            deadline = time.monotonic() + CHILD_SECONDS
            for child, reader in zip(children, readers):
                reader.join(max(deadline - time.monotonic(), 0))
                if reader.is_alive() or child.wait(timeout=max(deadline - time.monotonic(), 1)) != 0:
                    raise ReadFailed(f"a reading process ended with {child.returncode}")
            pages = [page_from_json(json.loads(line)) for chunk in lines for line in chunk]
        except (OSError, subprocess.TimeoutExpired, ValueError) as err:
            raise ReadFailed(str(err)) from None
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                    child.wait()
    return sorted(pages, key=lambda p: p.source)


def _start_child(code: str, files: list[tuple[str, str]]) -> subprocess.Popen:
    return child_process.start(_CHILD, CHILD_MEMORY, {"code": code, "files": files},
                               {"OPENCV_IO_MAX_IMAGE_PIXELS": str(MAX_PIXELS)})


def decode(kind: str, path: str) -> Iterable[np.ndarray]:
    """The gray pages of one file: an image, or each page of a PDF rendered at PDF_DPI. ValueError for
    an image past MAX_PIXELS or that does not decode."""
    cv2 = paper.opencv()

    if kind == "pdf":
        import pypdfium2

        pdf = pypdfium2.PdfDocument(path)
        try:
            if len(pdf) > MAX_PAGES:
                raise ValueError("too_many_pages")
            for index in range(len(pdf)):
                page = pdf[index]
                width, height = page.get_size()  # points
                scale = PDF_DPI / 72
                if width * height * scale * scale > MAX_PIXELS:
                    raise ValueError("too_many_pixels")
                bitmap = page.render(scale=scale, grayscale=True)
                yield np.array(bitmap.to_numpy()).reshape(bitmap.height, bitmap.width, -1)[..., 0].copy()
        finally:
            pdf.close()
        return
    from PIL import Image

    with Image.open(path) as header:  # the size from the header, before any pixel is decoded
        if header.width * header.height > MAX_PIXELS:
            raise ValueError("too_many_pixels")
    gray = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
    if gray is None:
        raise ValueError("unreadable")
    yield gray


def read_here(head: dict[str, Any], out) -> None:
    """In a reading child: every page of head["files"] ([(name, path)]) as one JSON line on `out`."""
    paper_reading.set_thread_limits()
    a = service.load(head["code"])
    key = secret()
    layouts: dict[str, list[paper.GridSpec] | str] = {}

    def layout_for(page: paper.PageId) -> list[paper.GridSpec] | str:
        if a is None or page.code != a.code:
            return "not_this_assignment"
        if page.student not in layouts:
            layouts[page.student] = _layout(a, page.student)
        return layouts[page.student]

    reader = paper_reading.CellReader()
    count = 0
    for name, path in head["files"]:
        data = Path(path).read_bytes()
        kind = sniff(data)
        del data
        if kind is None:
            _emit(out, PageRead(name, problem="not_an_image"))
            continue
        try:
            for number, gray in enumerate(decode(kind, path), start=1):
                count += 1
                if count > MAX_PAGES:
                    _emit(out, PageRead(f"{name} #{number}", problem="too_many_pages"))
                    return
                source = f"{name} #{number}" if kind == "pdf" else name
                try:
                    _emit(out, paper_reading.read_page(gray, layout_for, reader, key, source))
                except Exception:  # noqa: BLE001 - one page the reader cannot take is reported, not fatal
                    _emit(out, PageRead(source, problem="unreadable"))
        except Exception as err:  # noqa: BLE001 - a file that does not decode is reported as such
            problem = str(err) if str(err) in ("too_many_pixels", "too_many_pages") else "unreadable"
            _emit(out, PageRead(name, problem=problem))


def _layout(a: storage.Assignment, student: str) -> list[paper.GridSpec] | str:
    """The grids of `student`'s sheet, or a problem name (not on the class list, changed exercises)."""
    if a.has_roster and not service.on_roster(a, student):
        return "unknown_student"
    try:
        return paper.grids(service.exercises_for(a, student))
    except Exception:  # noqa: BLE001 - exercises changed or too many grids: the page is listed, not read
        return "unknown_student"


def _emit(out, page: PageRead) -> None:
    out.write(json.dumps(page_to_json(page), ensure_ascii=True) + "\n")
    out.flush()


def page_to_json(page: PageRead) -> dict[str, Any]:
    d = dataclasses.asdict(page)
    for grid in d["grids"]:
        for cell in grid["cells"]:
            cell["crop"] = base64.b64encode(cell["crop"]).decode("ascii")
    return d


def page_from_json(d: dict[str, Any]) -> PageRead:
    grids = [GridRead(**{**g, "cells": [CellRead(**{**c, "crop": base64.b64decode(c["crop"])}) for c in g["cells"]]})
             for g in d.get("grids", [])]
    page = d.get("page")
    return PageRead(source=str(d["source"]), payload=d.get("payload"), page=paper.PageId(**page) if page else None,
                    grids=grids, problem=d.get("problem"), missing=list(d.get("missing", [])))


# ---------------------------------------------------------------- marking

CellKey = tuple[str, int, int, int]  # (student, grid, row, col)


@dataclass
class Cell:
    key: CellKey
    item: int
    part: str
    read: str  # what the reader read (normalised)
    confidence: float
    blank: bool
    crop: bytes
    reason: str | None = None  # why it waits for review: "unsure", "unreadable", "near_miss"; None: sure
    value: str | None = None  # the teacher's value (None: the one read stands)
    right: bool | None = None  # as graded

    @property
    def text(self) -> str:
        return self.read if self.value is None else self.value

    @property
    def pending(self) -> bool:
        return self.reason is not None and self.value is None


@dataclass
class StudentSheet:
    student: str
    items: list[Exercise]
    layout: list[paper.GridSpec]
    cells: dict[CellKey, Cell] = field(default_factory=dict)
    pages: set[int] = field(default_factory=set)
    missing: list[int] = field(default_factory=list)  # grids not found on any page
    feedback: dict[int, Feedback | None] = field(default_factory=dict)

    @property
    def pending(self) -> list[Cell]:
        return [c for c in self.cells.values() if c.pending]

    @property
    def ready(self) -> bool:
        """Nothing to review and every grid found: it may go into the gradebook."""
        return not self.pending and not self.missing


@dataclass
class Marking:
    code: str
    sheets: dict[str, StudentSheet] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (source, problem) of pages not read

    @property
    def review(self) -> list[Cell]:
        return [c for s in self.sheets.values() for c in s.pending]

    def cell(self, key: CellKey) -> Cell:
        return self.sheets[key[0]].cells[key]


def mark(a: storage.Assignment, pages: Sequence[PageRead]) -> Marking:
    """The pages grouped into students' sheets, graded, each uncertain cell marked for review."""
    return mark_pages(a.code, pages, lambda student: service.exercises_for(a, student))


def mark_pages(code: str, pages: Sequence[PageRead], exercises_for: Callable[[str], list[Exercise]]) -> Marking:
    """mark() with the students' exercises from `exercises_for(student)`."""
    marking = Marking(code)
    for page in pages:
        if page.problem is not None or page.page is None:
            marking.problems.append((page.source, page.problem or "no_qr"))
            continue
        student = page.page.student
        sheet = marking.sheets.get(student)
        if sheet is None:
            items = list(exercises_for(student))
            sheet = marking.sheets[student] = StudentSheet(student, items, paper.grids(items))
        sheet.pages.add(page.page.page)
        for grid in page.grids:
            for c in grid.cells:
                key = (student, grid.index, c.row, c.col)
                sheet.cells[key] = Cell(key, grid.item, grid.part, c.text, c.confidence, c.blank, c.crop)
        marking.problems += [(page.source, f"grid_not_registered:{g}") for g in page.missing]
    for sheet in marking.sheets.values():
        found = {k[1] for k in sheet.cells}
        sheet.missing = [g.index for g in sheet.layout if g.index not in found]
        grade_sheet(sheet, decide=True)
    return marking


def _answer(sheet: StudentSheet, item: int) -> tuple[dict[str, Any], bool]:
    """The item's answer as the grader takes it ({part: grid of texts | option}) and whether every cell
    of it was left blank. A blank cell among written ones is graded wrong: it is given as −∞ (or 0 where
    −∞ is the answer), which the parser reads and no finite answer matches."""
    ex = sheet.items[item]
    answer: dict[str, Any] = {}
    written = False
    for g in (g for g in sheet.layout if g.item == item):
        part = next(p for p in ex.parts if p.name == g.part)
        ref = np.atleast_2d(np.asarray(part.reference, dtype=float))
        rows = []
        for r in range(g.rows):
            row = []
            for c in range(g.cols):
                cell = sheet.cells.get((sheet.student, g.index, r, c))
                text = "" if cell is None else cell.text.strip()
                written = written or bool(text)
                row.append(text if text else ("0" if np.isneginf(ref[r, c]) else "-inf"))
            rows.append(row)
        if g.choice:
            letter = rows[0][0]
            index = ord(letter) - ord("A") if len(letter) == 1 and "A" <= letter <= "Z" else -1
            answer[part.name] = index if 0 <= index < g.choice else -1
        else:
            answer[part.name] = rows
    return answer, not written


def grade_sheet(sheet: StudentSheet, decide: bool = False) -> None:
    """Grade every item of the sheet from its cells (the teacher's values where given); with `decide`,
    mark each uncertain cell for review."""
    for item, ex in enumerate(sheet.items):
        answer, blank = _answer(sheet, item)
        if blank:
            sheet.feedback[item] = None
            continue
        fb = exercises.grade(ex, answer)
        sheet.feedback[item] = fb
        for g in (g for g in sheet.layout if g.item == item):
            part_fb = fb.parts.get(g.part)
            part = next(p for p in ex.parts if p.name == g.part)
            for r in range(g.rows):
                for c in range(g.cols):
                    cell = sheet.cells.get((sheet.student, g.index, r, c))
                    if cell is None:
                        continue
                    status = None if part_fb is None else part_fb.status
                    # right, or consistent with the student's own earlier values (credited): not wrong
                    cell.right = None if status is None else bool(np.atleast_2d(status)[r, c] != "wrong")
                    if decide and cell.value is None:  # a cell the teacher has seen keeps its review
                        cell.reason = _reason(cell, part, g, r, c)
                        if cell.reason is None and cell.right is False and _carried(fb, part.name) and \
                                _misread_changes_grade(sheet, item, answer, fb, g, r, c):
                            cell.reason = "near_miss"


def _reason(cell: Cell, part, g: paper.GridSpec, r: int, c: int) -> str | None:
    """Why this cell must be reviewed, or None when the reading is sure enough to stand."""
    if cell.blank:
        return None
    if not cell.read or cell.confidence < REVIEW_BELOW:
        return "unsure"
    if g.choice:
        return None if len(cell.read) == 1 and "A" <= cell.read < paper.choice_letter(g.choice) else "unreadable"
    try:
        value = float(exercises.parse_answer(cell.read)[0, 0])
    except (AnswerError, IndexError, ValueError):
        return "unreadable"
    if cell.right is None:  # another cell of its item is unreadable: that one is reviewed
        return None
    if cell.right:
        return None
    if cell.confidence < SURE_WRONG:
        return "unsure"
    ref = float(np.atleast_2d(np.asarray(part.reference, dtype=float))[r, c])
    return "near_miss" if _near_miss(cell.read, ref, part.decimals) or not np.isfinite(value) else None


# what a recogniser may take one character for (digits alike in shape); a point, a minus or a fraction
# bar may also be dropped or added
_CONFUSED = {"0": "689", "1": "74", "2": "7", "3": "859", "4": "91", "5": "638", "6": "058", "7": "12",
             "8": "03695", "9": "4803"}


_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?|-?[0-9]+/[0-9]+")


def _near_miss(text: str, reference: float, decimals: int) -> bool:
    """Would one likely misread (a character dropped or added, a digit taken for one alike in shape)
    turn `text` into a number the grader could take as right (within NEAR_MISS_UNITS of the last place
    asked, exact values within half a unit)? Then the reader's mistake would change the grade."""
    if not np.isfinite(reference):
        return True
    reach = NEAR_MISS_UNITS * 10.0 ** -decimals if decimals else 0.5
    added = ".-0123456789" + ("/" if decimals == 0 else "")  # a fraction bar only where fractions are asked
    candidates = set()
    for i in range(len(text) + 1):
        for ch in added:
            candidates.add(text[:i] + ch + text[i:])  # one dropped by the reader (a thin one: a point, a 1)
        if i < len(text):
            candidates.add(text[:i] + text[i + 1:])  # one added by the reader (a speck read as a point)
            for ch in _CONFUSED.get(text[i], ""):
                candidates.add(text[:i] + ch + text[i + 1:])  # one taken for another
    for candidate in sorted(candidates):
        if not _NUMBER.fullmatch(candidate):
            continue
        try:  # read by the answer parser, as every text from a photo is
            value = float(exercises.parse_answer(candidate)[0, 0])
        except (AnswerError, IndexError, ValueError):
            continue
        if abs(value - reference) <= reach:
            return True
    return False


def _carried(fb: Feedback, name: str) -> bool:
    """Is some part before `name` not all right? Then a cell of `name` may be graded against the
    student's own earlier values, not only the reference."""
    for part_name, part_fb in fb.parts.items():
        if part_name == name:
            return False
        if not part_fb.correct:
            return True
    return False


def _likely_misreads(text: str) -> set[str]:
    """What the recogniser may have read `text` from: a point, minus or digit dropped, one added, a
    digit taken for one alike in shape."""
    out = set()
    for i in range(len(text) + 1):
        for ch in ".-1":
            out.add(text[:i] + ch + text[i:])
        if i < len(text):
            out.add(text[:i] + text[i + 1:])
            for ch in _CONFUSED.get(text[i], ""):
                out.add(text[:i] + ch + text[i + 1:])
    return {c for c in out if _NUMBER.fullmatch(c)}


def _misread_changes_grade(sheet: StudentSheet, item: int, answer: dict[str, Any], fb: Feedback,
                           g: paper.GridSpec, r: int, c: int) -> bool:
    """Would a likely misread of this cell, had the student written it, have been credited (against
    their own earlier values too)? The item graded again with each one in the cell."""
    cells = answer[g.part]
    text = cells[r][c]
    for candidate in sorted(_likely_misreads(text)):
        changed = dict(answer)
        changed[g.part] = [list(row) for row in cells]
        changed[g.part][r][c] = candidate
        other = exercises.grade(sheet.items[item], changed).parts.get(g.part)
        if other is not None and other.status is not None and np.atleast_2d(other.status)[r, c] != "wrong":
            return True
    return False


def correct(marking: Marking, key: CellKey, text: str) -> None:
    """The teacher's value for a cell (what is written there); the sheet is graded again."""
    cell = marking.cell(key)
    cell.value = str(text).strip()[:40]
    grade_sheet(marking.sheets[key[0]], decide=True)  # its item's other cells judged again from it


def confirm(marking: Marking, key: CellKey) -> None:
    """The teacher says the cell was read right."""
    correct(marking, key, marking.cell(key).read)


def graded(sheet: StudentSheet) -> Graded:
    """The sheet as a submission (submissions.Graded): each item's answer and feedback."""
    answers: dict[int, Any] = {}
    for item in range(len(sheet.items)):
        answer, blank = _answer(sheet, item)
        answers[item] = None if blank else answer
    unreadable = {i: fb for i, fb in sheet.feedback.items() if fb is not None and not fb.graded}
    return Graded(dict(sheet.feedback), answers, unreadable, [])


def record(a: storage.Assignment, marking: Marking) -> dict[str, list[int] | str]:
    """Every ready sheet stored as one submission marked as read from paper (with its cells), each in
    one transaction under the assignment's rules; student → the ids, or the reason it was not stored
    ("review", "unreadable", or the rule that refused it)."""
    out: dict[str, list[int] | str] = {}
    for student, sheet in marking.sheets.items():
        if not sheet.ready:
            out[student] = "review"
            continue
        result = graded(sheet)
        if not result.ready:
            out[student] = "unreadable"
            continue
        cells = [{"item_index": cell.item, "part": cell.part, "grid": key[1], "row": key[2], "col": key[3],
                  "text": cell.text, "confidence": cell.confidence, "reviewed": cell.value is not None,
                  "right": cell.right, "crop": cell.crop} for key, cell in sheet.cells.items()]
        try:
            out[student] = submissions.submit(a, student, sheet.items, result, source="paper", paper_cells=cells)
        except submissions.Refused as err:
            out[student] = str(err.args[0] if err.args else "refused")
        except submissions.NotSaved:
            out[student] = "not_saved"
    return out


def paper_cells(a: storage.Assignment, attempt_id: str) -> list[dict[str, Any]]:
    """The cells of a submission read from paper (crop, text, right), for the student's page view."""
    with db.guarded():
        return storage.paper_cells_of(db.engine(), a.code, attempt_id)


# ---------------------------------------------------------------- the student's page

RIGHT_BGR, WRONG_BGR = (60, 150, 40), (40, 40, 210)


def grid_images(cells: Sequence[dict[str, Any]]) -> list[tuple[int, str, bytes]]:
    """Each grid of a stored paper submission as the student wrote it: its cells' crops side by side,
    each framed green (right) or red (wrong); [(item index, part, PNG)] in the sheet's order."""
    cv2 = paper.opencv()

    grids: dict[int, list[dict[str, Any]]] = {}
    for c in cells:
        grids.setdefault(int(c["grid"]), []).append(c)
    out = []
    for index in sorted(grids):
        members = grids[index]
        rows, cols = 1 + max(int(c["row"]) for c in members), 1 + max(int(c["col"]) for c in members)
        crops = {(int(c["row"]), int(c["col"])): cv2.imdecode(np.frombuffer(c["crop"], np.uint8), cv2.IMREAD_COLOR)
                 for c in members}
        height = max((im.shape[0] for im in crops.values() if im is not None), default=40)
        width = max((im.shape[1] for im in crops.values() if im is not None), default=80)
        canvas = np.full((rows * height, cols * width, 3), 255, np.uint8)
        for c in members:
            r, col = int(c["row"]), int(c["col"])
            im = crops[(r, col)]
            if im is not None:
                canvas[r * height:r * height + im.shape[0], col * width:col * width + im.shape[1]] = im
            color = RIGHT_BGR if c["right"] else WRONG_BGR
            cv2.rectangle(canvas, (col * width + 2, r * height + 2), ((col + 1) * width - 3, (r + 1) * height - 3),
                          color, 4)
        out.append((int(members[0]["item_index"]), str(members[0]["part"]), cv2.imencode(".png", canvas)[1].tobytes()))
    return out


def first_wrong(cells: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The first cell marked wrong in the sheet's order (grids follow the steps), or None."""
    ordered = sorted(cells, key=lambda c: (int(c["grid"]), int(c["row"]), int(c["col"])))
    return next((c for c in ordered if c["right"] is False), None)
