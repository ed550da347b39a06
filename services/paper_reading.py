"""Reading a photographed or scanned sheet: find the page's QR code and the grids' markers, straighten
each grid, cut it into cells and read each cell alone, offline, on the CPU.

No Streamlit, no database: pixels in, `PageRead` out. It runs inside the marking child process
(services.paper), never in the server: image decoders and the OCR's memory stay there.

    reader = CellReader()                       # the OCR (rapidocr's recogniser, its ONNX weights from its wheel)
    page = read_page(gray, layout_for, reader)  # layout_for(PageId) -> [GridSpec] or None

A cell holds what the recogniser read, its confidence in [0, 1], whether it is blank (no ink: never
sent to the recogniser), and a small PNG of the straightened cell for the review screen.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from exercises.worksheets import paper

PX_PER_MM = 8.0  # a straightened grid: 8 px per mm (a cell 176 × 88 px)
INSET_MM = 1.6  # a cell is cut this far inside its lines
INK_LEVEL = 0.7  # a pixel darker than this share of its surroundings' brightness is ink
MIN_COMPONENT = 8  # pixels: a smaller blot of ink is noise (a decimal point is bigger)
MIN_INK = 0.004  # a cell with less ink than this share of its area is blank
MIN_INK_PIXELS = 18
MAX_SIDE = 2600  # a photo is read at most this many pixels on its long side (an A4 scan at 220 dpi)
REC_HEIGHT = 48  # the recogniser's input height

# what the recogniser may confuse in a cell that holds a number, and what it means there
_NUMERIC = str.maketrans({"O": "0", "o": "0", "D": "0", "Q": "0", "l": "1", "I": "1", "|": "1", "i": "1",
                          "—": "-", "–": "-", "−": "-", "_": "-", "~": "-", ",": ".", "。": ".", "·": ".",
                          "S": "5", "s": "5", "Z": "2", "z": "2", "B": "8", "g": "9", "q": "9", "T": "7",
                          "／": "/", "\\": "/", " ": ""})


@dataclass
class CellRead:
    row: int
    col: int
    text: str  # as read, normalised ("" for a blank cell)
    confidence: float  # the recogniser's, 1.0 for a blank cell, 0.0 when ink was found and nothing read
    blank: bool
    crop: bytes = b""  # PNG of the straightened cell


@dataclass
class GridRead:
    index: int
    item: int
    part: str
    cells: list[CellRead]
    error_mm: float  # the markers' mean distance from where the homography puts them


@dataclass
class PageRead:
    source: str  # the file (and page of a PDF) it came from
    payload: str | None = None  # the QR code's text, None when none was found
    page: paper.PageId | None = None  # None: not identified
    grids: list[GridRead] = field(default_factory=list)
    problem: str | None = None  # "no_qr", "bad_qr", "not_this_assignment", "no_marks", "unknown_student"
    missing: list[int] = field(default_factory=list)  # grids of this page whose markers were not all found


@functools.cache
def _model_paths() -> dict[str, str]:
    """The ONNX files inside the rapidocr wheel, named explicitly so nothing is ever downloaded."""
    import rapidocr

    models = Path(rapidocr.__file__).parent / "models"
    paths = {"Det.model_path": models / "PP-OCRv6_det_small.onnx", "Rec.model_path": models / "PP-OCRv6_rec_small.onnx",
             "Cls.model_path": models / "ch_ppocr_mobile_v2.0_cls_mobile.onnx"}
    for path in paths.values():
        if not path.is_file():
            raise FileNotFoundError(f"the OCR weights are not in the rapidocr wheel: {path}")
    return {key: str(path) for key, path in paths.items()}


class CellReader:
    """The recogniser alone (no text detection: a cell is one line), one thread, weights from the wheel."""

    def __init__(self, threads: int = 1):
        from rapidocr import RapidOCR
        from rapidocr.ch_ppocr_rec import TextRecInput

        self._input = TextRecInput
        self._ocr = RapidOCR(params={"Global.log_level": "error", "Global.use_det": False, "Global.use_cls": False,
                                     "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                                     "EngineConfig.onnxruntime.inter_op_num_threads": 1,
                                     "Rec.rec_img_shape": [3, REC_HEIGHT, 160],  # a cell's value is short: half
                                     **_model_paths()})                          # the default width, half the time
        self._ocr(np.full((REC_HEIGHT, 2 * REC_HEIGHT, 3), 255, np.uint8))  # loads the recogniser (text_rec)

    def read(self, images: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        """(text, confidence) of each image (BGR or gray), in one batch."""
        if not images:
            return []
        batch = [np.dstack([im] * 3) if im.ndim == 2 else im for im in images]
        out = self._ocr.text_rec(self._input(img=batch))
        return [(str(text), float(score)) for text, score in zip(out.txts, out.scores)]


def normalise(text: str, choice: bool) -> str:
    """What the recogniser read, as an answer: a letter for a choice, else a number's characters."""
    text = text.strip()
    if choice:
        letters = [c for c in text.upper() if c.isalpha()]
        return letters[0] if len(letters) == 1 else text
    text = text.translate(_NUMERIC)
    for spelled in ("-1nf", "-inf", "-1n", "-in", "-∞", "-oo", "-00", "-co"):  # −∞ as the sheet asks for it
        if text.lower() == spelled:
            return "-inf"
    return text


# ---------------------------------------------------------------- a page

def shrink(gray: np.ndarray) -> np.ndarray:
    cv2 = paper.opencv()

    side = max(gray.shape)
    if side <= MAX_SIDE:
        return gray
    scale = MAX_SIDE / side
    return cv2.resize(gray, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)


def find_payload(gray: np.ndarray) -> str | None:
    """The text of the page's QR code, or None: looked for first where the sheet prints it (the footer's
    right end: the bottom third of the photo, right half), as it is, enlarged, sharpened, in black and
    white, then on the whole page. A far, blurred photo leaves the code's modules 3 px wide and soft:
    which of the decoder's samplings lands on them is chance, so it is given several."""
    cv2 = paper.opencv()

    height, width = gray.shape
    corner = gray[int(height * 0.62):, int(width * 0.45):]

    def binary(image: np.ndarray) -> np.ndarray:  # dark modules on white whatever the light
        return cv2.adaptiveThreshold(image, 255, cv2.ADAPTIVE_THRESH_GAUSSIAN_C, cv2.THRESH_BINARY, 51, 10)

    def larger(image: np.ndarray, factor: float = 2) -> np.ndarray:  # a small code: its modules wider
        return cv2.resize(image, None, fx=factor, fy=factor, interpolation=cv2.INTER_CUBIC)

    def sharper(image: np.ndarray, amount: float = 1.0, sigma: float = 2.0) -> np.ndarray:  # a blurred code:
        blurred = cv2.GaussianBlur(image, (0, 0), sigma)                                # its modules' edges
        return cv2.addWeighted(image, 1.0 + amount, blurred, -amount, 0)                # steep again

    def tries():  # made one at a time: a clear photo is read at the first
        yield corner
        yield larger(corner)
        yield binary(larger(corner))
        yield sharper(larger(corner))
        yield sharper(larger(corner, 3))
        yield larger(corner, 2.5)
        yield sharper(larger(corner), 3.0, 3.0)  # a code blurred further still
        yield gray
        yield binary(gray)

    for image in tries():
        for detector in (cv2.QRCodeDetectorAruco(), cv2.QRCodeDetector()):  # the first copes with blur and angle
            try:
                text, _points, _ = detector.detectAndDecode(image)
            except cv2.error:
                continue
            if text:
                return text
    return None


def find_markers(gray: np.ndarray) -> dict[int, np.ndarray]:
    """Marker id → its four corners in the image (x, y), for every marker found."""
    corners, ids, _ = paper.detector().detectMarkers(gray)
    if ids is None:
        return {}
    return {int(i): c.reshape(4, 2) for i, c in zip(ids.ravel(), corners)}


def straighten(gray: np.ndarray, spec: paper.GridSpec,
               markers: dict[int, np.ndarray]) -> tuple[np.ndarray, float] | None:
    """The grid's frame straightened to PX_PER_MM and the markers' mean error (mm), or None when fewer
    than three of its four markers were found."""
    cv2 = paper.opencv()

    expected = spec.marker_corners()
    found = [k for k in expected if k in markers]
    if len(found) < 3:
        return None
    source = np.concatenate([markers[k] for k in found]).astype(np.float32)  # image
    target = np.concatenate([expected[k] for k in found]).astype(np.float32) * PX_PER_MM  # straightened
    H, _ = cv2.findHomography(source, target, 0)
    if H is None:
        return None
    moved = cv2.perspectiveTransform(source.reshape(-1, 1, 2), H).reshape(-1, 2)
    error = float(np.mean(np.linalg.norm(moved - target, axis=1))) / PX_PER_MM
    width, height = spec.frame_mm
    size = (int(round(width * PX_PER_MM)), int(round(height * PX_PER_MM)))
    return cv2.warpPerspective(gray, H, size, flags=cv2.INTER_LINEAR, borderValue=255), error


def _even_light(image: np.ndarray) -> np.ndarray:
    """The image divided by its local background: shadows and uneven light become white paper."""
    cv2 = paper.opencv()

    background = cv2.dilate(image, np.ones((15, 15), np.uint8))
    background = cv2.GaussianBlur(background, (0, 0), 9)
    return np.clip(image.astype(np.float32) / np.maximum(background.astype(np.float32), 1.0), 0, 1)


Blot = tuple[int, int, int, int, int]  # a connected piece of ink: left, top, width, height, area


def _ink_box(level: np.ndarray) -> tuple[list[Blot], tuple[int, int, int, int] | None]:
    """The blots of ink of an evened cell, and the bounding box of them all (None: blank)."""
    cv2 = paper.opencv()

    ink = (level < INK_LEVEL).astype(np.uint8)
    count, _labels, stats, _ = cv2.connectedComponentsWithStats(ink, connectivity=8)
    blots = [tuple(int(v) for v in stats[i]) for i in range(1, count)
             if stats[i, cv2.CC_STAT_AREA] >= MIN_COMPONENT]  # not specks of noise
    total = sum(b[4] for b in blots)
    if not blots or total < max(MIN_INK_PIXELS, MIN_INK * ink.size):
        return blots, None
    x0 = min(b[0] for b in blots)
    y0 = min(b[1] for b in blots)
    x1 = max(b[0] + b[2] for b in blots)
    y1 = max(b[1] + b[3] for b in blots)
    return blots, (x0, y0, x1, y1)


def restore_point(text: str, blots: list[Blot]) -> str:
    """`text` with the decimal point the recogniser dropped put back: a small blot on the baseline
    between the digits (a handwritten point is often a touch of the pen), placed after the digits left
    of it. Unchanged unless every digit read is one blot of ink, so the place is sure."""
    if "." in text or "/" in text:
        return text
    sign, digits = ("-", text[1:]) if text.startswith("-") else ("", text)
    if not digits.isdigit() or len(digits) < 2:
        return text
    tall = max(b[3] for b in blots)
    glyphs = [b for b in blots if b[3] >= 0.5 * tall]
    top = min(b[1] for b in glyphs)
    bottom = max(b[1] + b[3] for b in glyphs)
    if len(glyphs) != len(digits):
        return text
    points = [b for b in blots if b[3] <= 0.35 * tall and b[2] <= 0.5 * tall
              and b[1] + b[3] / 2 >= top + 0.65 * (bottom - top)]  # small, low: a point, not a minus
    if len(points) != 1:
        return text
    x = points[0][0] + points[0][2] / 2
    before = sum(1 for b in glyphs if b[0] + b[2] / 2 < x)
    if not 0 < before < len(digits):
        return text
    return sign + digits[:before] + "." + digits[before:]


def _for_recogniser(level: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """The ink of a cell, cropped with a margin and scaled to the recogniser's height, dark on white."""
    cv2 = paper.opencv()

    x0, y0, x1, y1 = box
    pad = max(4, (y1 - y0) // 4)
    crop = (level[max(y0 - pad, 0):y1 + pad, max(x0 - pad, 0):x1 + pad] * 255).astype(np.uint8)
    scale = REC_HEIGHT / max(crop.shape[0], 1)
    crop = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)
    return cv2.copyMakeBorder(crop, 6, 6, 8, 8, cv2.BORDER_CONSTANT, value=255)


def _png(image: np.ndarray) -> bytes:
    cv2 = paper.opencv()

    ok, data = cv2.imencode(".png", image, [cv2.IMWRITE_PNG_COMPRESSION, 6])
    return data.tobytes() if ok else b""


def _regions(spec: paper.GridSpec, row: int, col: int) -> list[tuple[int, int, int, int]]:
    """The pixel boxes of a cell to read: the cell, or for a fraction cell its top and bottom halves."""
    left, top, right, bottom = (v * PX_PER_MM for v in spec.cell_box(row, col))
    inset = INSET_MM * PX_PER_MM
    if not spec.fraction:
        return [(int(left + inset), int(top + inset), int(right - inset), int(bottom - inset))]
    middle = (top + bottom) / 2
    gap = 1.2 * PX_PER_MM  # clear of the fraction line
    return [(int(left + inset), int(top + inset), int(right - inset), int(middle - gap)),
            (int(left + inset), int(middle + gap), int(right - inset), int(bottom - inset))]


def read_grid(frame: np.ndarray, spec: paper.GridSpec, reader: CellReader) -> list[CellRead]:
    """Every cell of a straightened grid: blank ones told apart by their ink, the others read alone."""
    level = _even_light(frame)
    cells: list[CellRead] = []
    pending: list[tuple[int, int]] = []  # (cell index, region index) sent to the recogniser
    images: list[np.ndarray] = []
    regions_of: list[list[str | None]] = []
    blots_of: dict[tuple[int, int], list[Blot]] = {}
    for row in range(spec.rows):
        for col in range(spec.cols):
            left, top, right, bottom = (int(v * PX_PER_MM) for v in spec.cell_box(row, col))
            crop = _png(frame[top:bottom, left:right])
            texts: list[str | None] = []
            for r, (x0, y0, x1, y1) in enumerate(_regions(spec, row, col)):
                region = level[y0:y1, x0:x1]
                blots, box = _ink_box(region)
                if box is None:
                    texts.append("")
                    continue
                texts.append(None)
                blots_of[(len(cells), r)] = blots
                pending.append((len(cells), r))
                images.append(_for_recogniser(region, box))
            regions_of.append(texts)
            cells.append(CellRead(row, col, "", 1.0, all(t == "" for t in texts), crop))
    confidence = [1.0] * len(cells)
    for (index, r), (text, score) in zip(pending, reader.read(images)):
        if not spec.choice:
            text = restore_point(normalise(text, False), blots_of[(index, r)])
        regions_of[index][r] = text
        confidence[index] = min(confidence[index], score if text.strip() else 0.0)
    for cell, texts, score in zip(cells, regions_of, confidence):
        if cell.blank:
            continue
        choice = spec.choice > 0
        if spec.fraction:
            top, bottom = (normalise(t or "", False) for t in texts)
            cell.text = paper.fraction_text(top, bottom)
            if not top and bottom:
                score = 0.0
        else:
            cell.text = normalise(texts[0] or "", choice)
        cell.confidence = round(float(score), 4)
    return cells


def read_page(gray: np.ndarray, layout_for: Callable[[paper.PageId], list[paper.GridSpec] | str | None],
              reader: CellReader, secret: bytes, source: str = "") -> PageRead:
    """One page: identified by its QR code (checked with `secret`), then every grid of its student's
    sheet whose markers are on it. `layout_for(page id)` gives the sheet's grids, or a problem name."""
    gray = shrink(gray)
    out = PageRead(source)
    out.payload = find_payload(gray)
    if out.payload is None:
        out.problem = "no_qr"
        return out
    out.page = paper.read_payload(secret, out.payload)
    if out.page is None:
        out.problem = "bad_qr"
        return out
    layout = layout_for(out.page)
    if isinstance(layout, str) or layout is None:
        out.problem = layout or "unknown_student"
        return out
    markers = find_markers(gray)
    for spec in layout:
        ids = range(4 * spec.index, 4 * spec.index + 4)
        seen = sum(k in markers for k in ids)
        if seen == 0:
            continue  # on another page
        straight = straighten(gray, spec, markers)
        if straight is None:
            out.missing.append(spec.index)
            continue
        frame, error = straight
        out.grids.append(GridRead(spec.index, spec.item, spec.part, read_grid(frame, spec, reader), round(error, 3)))
    if not out.grids:
        out.problem = "no_marks"
    return out


def set_thread_limits() -> None:
    """One thread for every numeric library of the process (the marking child runs one per core)."""
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")
