"""Sheets made to be read back: where each answer cell sits, the registration marks around each grid,
and what the QR code on every page says.

Every answer part of a sheet is one grid, numbered in the order the sheet prints them (`grids`). Four
ArUco markers (OpenCV's 4×4 dictionary, ids 4·g … 4·g + 3 for grid g) sit at its corners, a gap
away, so a photo of the grid is straightened by the homography from the 16 marker corners to the
millimetres of `GridSpec.marker_corners`, and each cell is cut at `GridSpec.cell_box`. A part asking
for exact values that are fractions gets a short line across each cell: numerator above, denominator
below. The page's QR says which assignment, student and page (`qr_payload`), signed with the
server's secret so a page cannot be passed off as another student's.

The bits of each marker are computed once from OpenCV's dictionary and printed as squares by Typst.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from threadpoolctl import threadpool_limits

from ..core.model import Exercise, Part
from ..core.numbers import as_fraction

MARK_MM = 7.0  # an ArUco marker's side: 6 squares of 7/6 mm (4×4 bits and the black border)
GAP_MM = 2.0  # between a marker and its grid: the grid's lines never touch a marker's outline
CELL_MM = 22.0  # an answer cell's width (narrower when a row would not fit the page)
ROW_MM = 11.0  # an answer cell's height
FRACTION_ROW_MM = 16.0  # a cell with a fraction line: room above and below it
TEXT_WIDTH_MM = 170.0  # A4 less the margins
MAX_GRIDS = 250  # markers 4·g … 4·g + 3 of a 1000-marker dictionary
MAX_PAGES = 12  # pages of one student's sheet with a QR code of their own
DICTIONARY = "DICT_4X4_1000"
QR_TAG = "ABH1"  # the first word of a sheet's QR payload
MAC_CHARS = 12  # hex digits of the payload's signature


@functools.cache
def opencv():
    """OpenCV (cv2), imported on first use: only paper sheets and their reading need it. It brings a BLAS
    of its own, held to one thread like numpy's (exercises/__init__.py says why)."""
    import cv2  # imported here: the app's other pages never load OpenCV

    threadpool_limits(1, user_api="blas")
    return cv2


@dataclass(frozen=True)
class GridSpec:
    """One answer part as printed: its place on the sheet (grid number g) and its geometry in mm."""

    index: int  # g: the grid's number on the sheet (0-based), its markers are 4g … 4g + 3
    item: int  # the exercise's index on the sheet
    part: str  # the part's name
    rows: int
    cols: int
    cell_mm: float
    row_mm: float
    fraction: bool  # each cell has a fraction line: numerator above, denominator below
    choice: int = 0  # for a multiple-choice part: how many options (its one cell holds a letter)

    @property
    def width_mm(self) -> float:
        return self.cols * self.cell_mm

    @property
    def height_mm(self) -> float:
        return self.rows * self.row_mm

    @property
    def frame_mm(self) -> tuple[float, float]:
        """The whole grid with its markers: (width, height)."""
        return self.width_mm + 2 * (MARK_MM + GAP_MM), self.height_mm + 2 * (MARK_MM + GAP_MM)

    def marker_corners(self) -> dict[int, np.ndarray]:
        """Marker id → its four corners (x, y in mm from the top-left marker's top-left), in ArUco's
        order: top-left, top-right, bottom-right, bottom-left."""
        width, height = self.frame_mm
        origins = [(0.0, 0.0), (width - MARK_MM, 0.0), (width - MARK_MM, height - MARK_MM), (0.0, height - MARK_MM)]
        square = np.array([[0, 0], [MARK_MM, 0], [MARK_MM, MARK_MM], [0, MARK_MM]], dtype=np.float32)
        return {4 * self.index + k: square + np.array(origin, dtype=np.float32) for k, origin in enumerate(origins)}

    def cell_box(self, row: int, col: int) -> tuple[float, float, float, float]:
        """The cell's (left, top, right, bottom) in mm of the frame."""
        left = MARK_MM + GAP_MM + col * self.cell_mm
        top = MARK_MM + GAP_MM + row * self.row_mm
        return left, top, left + self.cell_mm, top + self.row_mm


def needs_fraction_line(part: Part) -> bool:
    """Exact values (no decimals asked) of which some are fractions: numerator over denominator."""
    if part.is_choice or part.decimals != 0:
        return False
    cells = np.asarray(part.reference, dtype=float).ravel()
    fractions = [as_fraction(x) for x in cells if np.isfinite(x)]
    return any(f is not None and f.denominator != 1 for f in fractions) or any(
        f is None for f in fractions)


def grids(items: Sequence[Exercise]) -> list[GridSpec]:
    """Every answer part of a sheet, in printed order, with its geometry (the one list the Typst sheet
    and the reader both follow). ValueError past MAX_GRIDS."""
    out = []
    for item, ex in enumerate(items):
        for part in ex.parts:
            if part.is_choice:
                spec = GridSpec(len(out), item, part.name, 1, 1, CELL_MM * 0.6, ROW_MM, False, len(part.options))
            else:
                rows, cols = part.shape
                fraction = needs_fraction_line(part)
                spec = GridSpec(len(out), item, part.name, rows, cols, cell_mm(cols), FRACTION_ROW_MM if fraction
                                else ROW_MM, fraction)
            out.append(spec)
    if len(out) > MAX_GRIDS:
        raise ValueError(f"a sheet read from paper holds at most {MAX_GRIDS} answer parts, this one {len(out)}")
    return out


def cell_mm(cols: int) -> float:
    """CELL_MM, narrower only when a row of `cols` cells and its markers would not fit the page."""
    room = TEXT_WIDTH_MM - 2 * (MARK_MM + GAP_MM) - 2.0
    return round(min(CELL_MM, room / max(cols, 1)), 2)


@functools.cache
def _dictionary():
    cv2 = opencv()  # imported here: only paper sheets and their reading need OpenCV

    return cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, DICTIONARY))


def marker_bits(marker_id: int) -> str:
    """The marker's 6×6 squares row by row ("1" black), its black border included."""
    cv2 = opencv()

    image = cv2.aruco.generateImageMarker(_dictionary(), marker_id, 6)  # one pixel per square
    return "".join("1" if v < 128 else "0" for v in image.ravel())


def detector():
    """An ArUco detector for the sheets' markers."""
    cv2 = opencv()

    params = cv2.aruco.DetectorParameters()
    params.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
    return cv2.aruco.ArucoDetector(_dictionary(), params)


# ---------------------------------------------------------------- what a page's QR says

_PAYLOAD = re.compile(rf"{QR_TAG} ([A-Z0-9]{{4,16}}) ([0-9]{{1,2}}) ([0-9a-f]{{{MAC_CHARS}}}) (.{{1,100}})", re.S)


@dataclass(frozen=True)
class PageId:
    code: str
    student: str
    page: int  # 1-based


def _mac(secret: bytes, code: str, student: str, page: int) -> str:
    message = "\x1f".join([QR_TAG, code, str(page), student]).encode("utf-8")
    return hmac.new(secret, message, hashlib.sha256).hexdigest()[:MAC_CHARS]


def qr_payload(secret: bytes, code: str, student: str, page: int) -> str:
    """What the QR code of a student's page says: tag, code, page, signature, then the name."""
    return f"{QR_TAG} {code} {page} {_mac(secret, code, student, page)} {student}"


def qr_payloads(secret: bytes, code: str, student: str) -> tuple[str, ...]:
    """The QR payloads of pages 1 … MAX_PAGES of a student's sheet."""
    return tuple(qr_payload(secret, code, student, page) for page in range(1, MAX_PAGES + 1))


def read_payload(secret: bytes, text: str) -> PageId | None:
    """The page a QR payload names, or None when it is not one of ours or its signature is wrong."""
    match = _PAYLOAD.fullmatch(text or "")
    if match is None:
        return None
    code, page, mac, student = match.group(1), int(match.group(2)), match.group(3), match.group(4)
    if not hmac.compare_digest(mac, _mac(secret, code, student, page)):
        return None
    return PageId(code, student, page)


def fraction_text(numerator: str, denominator: str) -> str:
    """A fraction cell's two halves as one answer: "3" over "8" is "3/8", "2" over nothing is "2"."""
    numerator, denominator = numerator.strip(), denominator.strip()
    if not denominator:
        return numerator
    if not numerator:
        return ""  # a denominator alone is no answer: the reader sends it to review
    return f"{numerator}/{denominator}"


def choice_letter(index: int) -> str:
    return chr(ord("A") + index)


def as_written(x: float, places: int) -> str:
    """A value as a student writes it in a cell: whole, n/d for an exact fraction, -inf, else rounded."""
    if np.isneginf(x):
        return "-inf"
    if places == 0:
        f = Fraction(x).limit_denominator(1000)
        return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"
    text = f"{x:.{places}f}"
    return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text
