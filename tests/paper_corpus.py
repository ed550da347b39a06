"""A corpus of filled-in paper sheets, made by the tests: sheets rendered by the app, answers written into
their cells in several fonts or in handwriting-like strokes, then "photographed" (rotation, perspective,
blur, uneven light, noise, JPEG).

    pages = sheet_pages(ws, dpi)                    # the rendered sheet, one gray image per page
    truth = fill(page, layout, answers, style, rng)  # written into the cells
    photo = photograph(page, rng)                    # JPEG bytes

Used by tests/test_paper.py (a sample), tests/e2e (a small class) and bench/bench_paper.py (a class).
"""

from __future__ import annotations

import functools
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from exercises.core.model import Exercise
from exercises.worksheets import paper, typst
from services import paper_reading

FONTS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
         "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf", "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
         None)  # None: Pillow's own font
STYLES = ("printed", "hand")
DPI = 180  # the sheets as a phone photographs them (the reader works at most MAX_SIDE pixels anyway)

# ---------------------------------------------------------------- handwriting-like strokes
# each glyph: strokes of points in a box 1 high (y down), its width; drawn with jitter, slant and a pen
# of varying thickness

_GLYPHS: dict[str, tuple[float, list[list[tuple[float, float]]]]] = {
    "0": (0.55, [[(0.28, 0), (0.08, 0.12), (0.02, 0.5), (0.1, 0.88), (0.28, 1), (0.46, 0.88), (0.54, 0.5),
                  (0.46, 0.12), (0.28, 0)]]),
    "1": (0.4, [[(0.08, 0.2), (0.3, 0), (0.3, 1)]]),
    "2": (0.55, [[(0.04, 0.22), (0.16, 0.04), (0.34, 0), (0.5, 0.1), (0.52, 0.3), (0.04, 1), (0.56, 1)]]),
    "3": (0.55, [[(0.04, 0.1), (0.28, 0), (0.5, 0.12), (0.48, 0.34), (0.24, 0.47), (0.5, 0.58), (0.55, 0.8),
                  (0.42, 0.97), (0.2, 1), (0.02, 0.9)]]),
    "4": (0.6, [[(0.44, 1), (0.44, 0), (0.02, 0.68), (0.6, 0.68)]]),
    "5": (0.55, [[(0.52, 0), (0.1, 0), (0.06, 0.44), (0.3, 0.38), (0.52, 0.5), (0.55, 0.8), (0.34, 1),
                  (0.04, 0.93)]]),
    "6": (0.55, [[(0.48, 0.04), (0.28, 0), (0.1, 0.24), (0.04, 0.68), (0.18, 1), (0.42, 0.98), (0.54, 0.76),
                  (0.44, 0.54), (0.2, 0.52), (0.05, 0.68)]]),
    "7": (0.55, [[(0.02, 0), (0.56, 0), (0.24, 1)]]),
    "8": (0.55, [[(0.28, 0.47), (0.07, 0.34), (0.09, 0.08), (0.28, 0), (0.48, 0.08), (0.5, 0.34), (0.28, 0.47),
                  (0.04, 0.64), (0.05, 0.9), (0.28, 1), (0.52, 0.9), (0.53, 0.64), (0.28, 0.47)]]),
    "9": (0.55, [[(0.52, 0.24), (0.42, 0.03), (0.24, 0), (0.06, 0.14), (0.06, 0.38), (0.26, 0.5), (0.5, 0.38),
                  (0.52, 0.24), (0.46, 1)]]),
    "-": (0.45, [[(0.04, 0.56), (0.42, 0.56)]]),
    ".": (0.36, [[(0.16, 0.95), (0.18, 0.97), (0.16, 0.99), (0.15, 0.96)]]),  # a point is given room
    "/": (0.45, [[(0.42, -0.05), (0.04, 1.05)]]),
    "i": (0.25, [[(0.12, 0.42), (0.12, 1)], [(0.12, 0.16), (0.13, 0.19)]]),
    "n": (0.5, [[(0.05, 0.4), (0.05, 1)], [(0.05, 0.56), (0.2, 0.4), (0.38, 0.42), (0.45, 0.6), (0.45, 1)]]),
    "f": (0.42, [[(0.4, 0.06), (0.28, 0), (0.18, 0.1), (0.18, 1)], [(0.02, 0.42), (0.38, 0.42)]]),
    "A": (0.62, [[(0.02, 1), (0.31, 0), (0.6, 1)], [(0.13, 0.62), (0.49, 0.62)]]),
    "B": (0.58, [[(0.06, 0), (0.06, 1)], [(0.06, 0), (0.4, 0.02), (0.52, 0.14), (0.48, 0.36), (0.06, 0.48)],
                 [(0.06, 0.48), (0.44, 0.5), (0.57, 0.72), (0.46, 0.94), (0.06, 1)]]),
    "C": (0.55, [[(0.54, 0.12), (0.36, 0), (0.14, 0.08), (0.03, 0.5), (0.14, 0.92), (0.36, 1), (0.55, 0.88)]]),
    "D": (0.58, [[(0.06, 0), (0.06, 1)], [(0.06, 0), (0.34, 0.04), (0.54, 0.28), (0.55, 0.7), (0.36, 0.96),
                                         (0.06, 1)]]),
}


def draw_hand(canvas: np.ndarray, text: str, box: tuple[int, int, int, int], rng: np.random.Generator) -> None:
    """`text` in handwriting-like strokes inside `box` (x0, y0, x1, y1) of a white uint8 canvas."""
    cv2 = paper.opencv()

    x0, y0, x1, y1 = box
    height = (y1 - y0) * rng.uniform(0.55, 0.75)
    slant = rng.uniform(-0.3, 0.3)
    thickness = int(rng.integers(2, 5))
    widths = [(_GLYPHS[c][0] if c in _GLYPHS else 0.5) * height * 1.08 for c in text]
    total = sum(widths)
    if total > (x1 - x0) * 0.9:  # a long value is written smaller
        height *= (x1 - x0) * 0.9 / total
        widths = [w * (x1 - x0) * 0.9 / total for w in widths]
        total = sum(widths)
    x = x0 + ((x1 - x0) - total) / 2 + rng.uniform(-0.05, 0.05) * (x1 - x0)
    base = y0 + ((y1 - y0) + height) / 2 + rng.uniform(-0.08, 0.08) * (y1 - y0)
    for c, w in zip(text, widths):
        if c in _GLYPHS:
            scale = height * rng.uniform(0.92, 1.08)
            for stroke in _GLYPHS[c][1]:
                pts = []
                for px, py in stroke:
                    py_ = py + rng.normal(0, 0.025)
                    px_ = px + rng.normal(0, 0.025) + slant * (1 - py_)
                    pts.append((x + px_ * scale, base - scale + py_ * scale))
                points = np.array(pts, dtype=np.float64)
                if len(points) > 2:  # smooth the polyline a little
                    points = _smooth(points)
                pen = thickness + 1 if c == "." else max(int(thickness + rng.integers(-1, 2)), 1)  # a point pressed
                cv2.polylines(canvas, [np.round(points * 4).astype(np.int32)], False, 0, thickness=pen,
                              lineType=cv2.LINE_AA, shift=2)
        x += w + rng.uniform(-0.03, 0.05) * height


def _smooth(points: np.ndarray, steps: int = 4) -> np.ndarray:
    """A Catmull-Rom curve through the points."""
    padded = np.vstack([points[0], points, points[-1]])
    out = []
    for i in range(1, len(padded) - 2):
        p0, p1, p2, p3 = padded[i - 1:i + 3]
        for t in np.linspace(0, 1, steps, endpoint=False):
            out.append(0.5 * ((2 * p1) + (-p0 + p2) * t + (2 * p0 - 5 * p1 + 4 * p2 - p3) * t ** 2
                              + (-p0 + 3 * p1 - 3 * p2 + p3) * t ** 3))
    out.append(points[-1])
    return np.array(out)


@functools.cache
def _font(path: str | None, size: int):
    from PIL import ImageFont

    if path is None:
        return ImageFont.load_default(size)
    return ImageFont.truetype(path, size)


def fonts() -> list[str | None]:
    return [f for f in FONTS if f is None or Path(f).is_file()]


def draw_printed(canvas: np.ndarray, text: str, box: tuple[int, int, int, int], font: str | None,
                 rng: np.random.Generator) -> np.ndarray:
    """`text` set in `font` centred in `box`; returns the canvas."""
    from PIL import Image, ImageDraw

    x0, y0, x1, y1 = box
    size = int((y1 - y0) * rng.uniform(0.5, 0.62))
    face = _font(font, size)
    image = Image.fromarray(canvas)
    draw = ImageDraw.Draw(image)
    left, top, right, bottom = draw.textbbox((0, 0), text, font=face)
    while right - left > (x1 - x0) * 0.9 and size > 8:
        size -= 2
        face = _font(font, size)
        left, top, right, bottom = draw.textbbox((0, 0), text, font=face)
    x = x0 + ((x1 - x0) - (right - left)) / 2 - left
    y = y0 + ((y1 - y0) - (bottom - top)) / 2 - top
    draw.text((x, y), text, font=face, fill=0)
    return np.asarray(image).copy()


# ---------------------------------------------------------------- sheets, answers, pages

def sheet_pages(ws, dpi: int = DPI) -> list[list[np.ndarray]]:
    """Each student's sheet rendered by the app (Typst, then pdftoppm), as gray pages."""
    cv2 = paper.opencv()

    out = []
    for sheet in ws.sheets:
        one = type(ws)(ws.spec, (sheet,), ws.code, ws.lang, ws.space, ws.links, ws.paper)
        pdf = typst.to_pdf(one)
        with tempfile.TemporaryDirectory(prefix="paper-corpus-") as folder:
            (Path(folder) / "s.pdf").write_bytes(pdf)
            subprocess.run(["pdftoppm", "-r", str(dpi), "-gray", "-png", "s.pdf", "p"], cwd=folder, check=True)
            out.append([cv2.imread(str(p), cv2.IMREAD_GRAYSCALE) for p in sorted(Path(folder).glob("p-*.png"),
                                                                              key=lambda p: int(p.stem.split("-")[1]))])
    return out


@dataclass
class Written:
    grid: int
    item: int
    part: str
    row: int
    col: int
    text: str  # what was written ("" blank)
    style: str


def answers_for(items: list[Exercise], layout: list[paper.GridSpec], rng: np.random.Generator,
                wrong: float = 0.25, blank: float = 0.03) -> dict[tuple[int, int, int], str]:
    """What a student writes in each cell: mostly the right value as the sheet asks for it, some wrong
    ones (a nearby value), a few left blank."""
    out = {}
    for g in layout:
        part = next(p for p in items[g.item].parts if p.name == g.part)
        ref = np.atleast_2d(np.asarray(part.reference, dtype=float))
        for r in range(g.rows):
            for c in range(g.cols):
                x = float(ref[r, c])
                roll = rng.random()
                if roll < blank:
                    out[(g.index, r, c)] = ""
                    continue
                if g.choice:
                    pick = int(x) if roll > wrong else int(rng.integers(0, g.choice))
                    out[(g.index, r, c)] = paper.choice_letter(pick)
                    continue
                if roll < wrong and np.isfinite(x):  # a slip in the last places, or another value
                    step = 10.0 ** -part.decimals if part.decimals else 1.0
                    units = int(rng.integers(2, 10)) if roll < wrong / 2 else int(rng.integers(10, 200))
                    x = x + step * int(rng.choice([-1, 1])) * units
                out[(g.index, r, c)] = paper.as_written(x, part.decimals)
    return out


def fill(page: np.ndarray, layout: list[paper.GridSpec], answers: dict[tuple[int, int, int], str], style: str,
         rng: np.random.Generator, font: str | None = None) -> tuple[np.ndarray, list[Written]]:
    """The page with the answers of its grids written in (found by their markers, as the reader does)."""
    cv2 = paper.opencv()

    markers = paper_reading.find_markers(page)
    written = []
    page = page.copy()
    px = paper_reading.PX_PER_MM
    for g in layout:
        if not any(k in markers for k in range(4 * g.index, 4 * g.index + 4)):
            continue
        expected = g.marker_corners()
        found = [k for k in expected if k in markers]
        H, _ = cv2.findHomography(np.concatenate([expected[k] for k in found]) * px,
                                  np.concatenate([markers[k] for k in found]))
        width, height = g.frame_mm
        overlay = np.full((int(round(height * px)), int(round(width * px))), 255, np.uint8)
        for r in range(g.rows):
            for c in range(g.cols):
                text = answers[(g.index, r, c)]
                written.append(Written(g.index, g.item, g.part, r, c, text, style))
                if not text:
                    continue
                left, top, right, bottom = (int(v * px) for v in g.cell_box(r, c))
                pad = int(1.8 * px)
                boxes = [(text, (left + pad, top + pad, right - pad, bottom - pad))]
                if g.fraction:
                    middle = (top + bottom) // 2
                    top_text, _, bottom_text = text.partition("/")
                    boxes = [(top_text, (left + pad, top + pad, right - pad, middle - int(1.3 * px)))]
                    if bottom_text:
                        boxes.append((bottom_text, (left + pad, middle + int(1.3 * px), right - pad, bottom - pad)))
                for piece, box in boxes:
                    if style == "hand":
                        draw_hand(overlay, piece, box, rng)
                    else:
                        overlay = draw_printed(overlay, piece, box, font, rng)
        ink = cv2.warpPerspective(overlay, H, (page.shape[1], page.shape[0]), flags=cv2.INTER_AREA, borderValue=255)
        pen = int(rng.integers(20, 70))  # pencil grey to black ink
        page = np.minimum(page, np.where(ink < 250, np.maximum(ink, pen), 255).astype(np.uint8))
    return page, written


def photograph(page: np.ndarray, rng: np.random.Generator, strength: float = 1.0, quality: int | None = None) -> bytes:
    """The page as a phone would take it: on a table, turned up to ±10°, in perspective, blurred,
    unevenly lit, noisy, saved as JPEG."""
    cv2 = paper.opencv()

    h, w = page.shape
    margin = int(0.07 * max(h, w))
    canvas = np.full((h + 2 * margin, w + 2 * margin), int(rng.integers(70, 150)), np.uint8)
    canvas[margin:margin + h, margin:margin + w] = page
    H_, W_ = canvas.shape
    angle = rng.uniform(-10, 10) * strength
    rotation = cv2.getRotationMatrix2D((W_ / 2, H_ / 2), angle, rng.uniform(0.92, 1.0))
    src = np.float32([[0, 0], [W_, 0], [W_, H_], [0, H_]])
    dst = cv2.transform(src.reshape(-1, 1, 2), rotation).reshape(-1, 2)
    dst += rng.uniform(-0.035, 0.035, size=(4, 2)).astype(np.float32) * np.float32([W_, H_]) * strength
    M = cv2.getPerspectiveTransform(src, dst.astype(np.float32))
    shot = cv2.warpPerspective(canvas, M, (W_, H_), flags=cv2.INTER_LINEAR, borderValue=int(rng.integers(40, 90)))
    small = (max(W_ // 16, 2), max(H_ // 16, 2))  # the light varies slowly: computed small, then scaled up
    yy, xx = np.mgrid[0:small[1], 0:small[0]].astype(np.float32)
    xx, yy = xx / small[0], yy / small[1]
    direction = rng.uniform(0, 2 * np.pi)
    ramp = np.cos(direction) * xx + np.sin(direction) * yy
    light = 1.0 - strength * rng.uniform(0.2, 0.45) * (ramp - ramp.min()) / max(float(np.ptp(ramp)), 1e-6)
    cx, cy = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8)
    light *= 1.0 - strength * 0.3 * ((xx - cx) ** 2 + (yy - cy) ** 2)
    light = cv2.resize(light.astype(np.float32), (W_, H_), interpolation=cv2.INTER_LINEAR)
    shot = cv2.multiply(shot.astype(np.float32), light)
    shot = cv2.GaussianBlur(shot, (0, 0), rng.uniform(0.5, 1.4) * max(strength, 0.3))
    shot += rng.standard_normal(shot.shape, dtype=np.float32) * np.float32(5 * strength)
    shot = np.clip(shot, 0, 255).astype(np.uint8)
    ok, data = cv2.imencode(".jpg", shot, [cv2.IMWRITE_JPEG_QUALITY, quality or int(rng.integers(55, 85))])
    assert ok
    return data.tobytes()


# ---------------------------------------------------------------- the figures

@dataclass
class Figures:
    cells: dict[str, int]  # style → cells written (blank ones included)
    read_right: dict[str, int]  # style → cells read exactly as written
    review: int  # cells sent to review
    wrong_unreviewed: list[str]  # cells whose grade differs from the truth's, with no review: must be none
    pages: int
    problems: list[tuple[str, str]]
    misreads: list[str]  # what was read wrong (for the message)

    def share(self, style: str) -> float:
        return self.read_right[style] / max(self.cells[style], 1)


def figures(marking, truth: dict[str, dict[tuple, Written]], pages: int) -> Figures:
    """Compare a marking (services.paper) with what was written: cells read right per style, cells sent
    to review, and cells graded otherwise than the truth without review (each must be reviewed)."""
    from services import paper as marking_service

    cells = {s: 0 for s in STYLES}
    right = {s: 0 for s in STYLES}
    wrong_unreviewed, misreads = [], []
    review = 0
    for student, written in truth.items():
        sheet = marking.sheets.get(student)
        for key, w in written.items():
            cells[w.style] += 1
            cell = sheet.cells.get(key) if sheet is not None else None
            if cell is None:
                misreads.append(f"{student} grid {key[1]} cell {key[2:]}: {w.text!r} on a page not read")
                continue
            if cell.read == w.text:
                right[w.style] += 1
            else:
                misreads.append(f"{student} grid {key[1]} cell {key[2:]}: wrote {w.text!r}, read {cell.read!r} "
                                f"({cell.confidence:.3f}, {cell.reason})")
            review += cell.reason is not None
        if sheet is None:
            continue
        # the same sheet with every cell as written: how it should be graded
        truth_sheet = marking_service.StudentSheet(student, sheet.items, sheet.layout)
        for key, w in written.items():
            truth_sheet.cells[key] = marking_service.Cell(key, w.item, w.part, w.text, 1.0, not w.text, b"")
        marking_service.grade_sheet(truth_sheet)
        for item, fb in sheet.feedback.items():
            if any(c.reason for c in sheet.cells.values() if c.item == item):
                continue  # waits for review
            expected = truth_sheet.feedback.get(item)
            got = None if fb is None else fb.score
            want = None if expected is None else expected.score
            if got != want:
                wrong_unreviewed.append(f"{student} item {item + 1}: graded {got} instead of {want} without review")
    return Figures(cells, right, review, wrong_unreviewed, pages, list(marking.problems), misreads)


def class_corpus(ws, rng: np.random.Generator, styles=STYLES, dpi: int = DPI, strength: float = 1.0):
    """Every page of every student's sheet filled (the styles in turn, a font per page) and photographed:
    ([(file name, JPEG bytes)], {student: {cell key: Written}})."""
    files, truth = [], {}
    for number, (sheet, pages) in enumerate(zip(ws.sheets, sheet_pages(ws, dpi))):
        items = list(sheet.exercises)
        layout = paper.grids(items)
        answers = answers_for(items, layout, rng)
        style = styles[number % len(styles)]
        written = {}
        for index, page in enumerate(pages):
            font = fonts()[(number + index) % len(fonts())]
            filled, cells = fill(page, layout, answers, style, rng, font)
            for w in cells:
                written[(sheet.student, w.grid, w.row, w.col)] = w
            files.append((f"{number:03d}-{index + 1}.jpg", photograph(filled, rng, strength)))
        truth[sheet.student] = written
    return files, truth
