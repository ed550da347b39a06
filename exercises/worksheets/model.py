"""What a worksheet holds, whatever the format: the sheets (one per student, or one for the class),
each problem as every format shows it, and the worked solution with its texts in the sheet's language.

A worksheet holds the problems only — no seeds, no answers. For per-student variants it holds one
sheet per student (a page break between them); the answer key lists every student's answers and
worked solutions, the very steps exercises.solve gives the screen.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import engine, grading
from ..core.model import Exercise, Part
from ..core.numbers import as_fraction
from ..i18n import DEFAULT_LANG, catalog, msg, part_key, t
from ..i18n.escape import untrusted
from ..rendering import latex
from ..solutions import Aids, Step, Unit, aids, shown_matrix, shown_vector, solve
from ..teacher.assignments import AssignmentError, AssignmentSpec, ItemSpec, clean_student_name, student_key

FORMATS = ("pdf", "md", "tex", "json")
SPACES = ("none", "some", "lots")  # working space under each item on the worksheet: the teacher's choice
NAMES = ("worksheet", "answer-key")
MAX_STUDENTS = 200
MAX_CLASS_LIST_CHARS = 64_000  # a class list's text (200 names, or a CSV export's rows): refused unread past it
EXP_PLACES = latex.EXP_PLACES
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # control characters: never reach a document


@dataclass(frozen=True)
class Sheet:
    """The problems one student (or, with student None, the whole class) works on."""

    student: str | None
    exercises: tuple[Exercise, ...]


@dataclass(frozen=True)
class Worksheet:
    spec: AssignmentSpec
    sheets: tuple[Sheet, ...]
    code: str | None = None  # the assignment's share code, printed on the sheets
    lang: str = DEFAULT_LANG
    space: str = "some"  # working space under each item (SPACES)
    links: tuple[tuple[str, str], ...] = ()  # (student, personal link): a QR code in that student's footer
    # (student, QR payload of each page): a sheet to be read back from paper (exercises.worksheets.paper),
    # its answers in grids with registration marks and each page's own QR code
    paper: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def link(self, student: str | None) -> str | None:
        return dict(self.links).get(student) if student is not None else None

    def paper_pages(self, student: str | None) -> tuple[str, ...]:
        return dict(self.paper).get(student, ()) if student is not None else ()


def build(spec: AssignmentSpec, students: Iterable[str] = (), code: str | None = None,
          lang: str = DEFAULT_LANG) -> Worksheet:
    """The sheets of an assignment: one per student for per-student variants, else one for the class."""
    if not spec.per_student:
        return Worksheet(spec, (Sheet(None, tuple(spec.exercises())),), code, lang)
    names = clean_students(students)
    return Worksheet(spec, tuple(Sheet(n, tuple(spec.exercises(n))) for n in names), code, lang)


def single(ex: Exercise, lang: str = DEFAULT_LANG) -> Worksheet:
    """A worksheet of the one exercise `ex` (Practice's "print this problem"): no code, no answers."""
    spec = AssignmentSpec(t("app.title", lang), (ItemSpec(ex.kind, ex.level),), ex.seed)
    return Worksheet(spec, (Sheet(None, (ex,)),), None, lang)


def clean_students(students: Iterable[str]) -> list[str]:
    """A class list: every name cleaned, none twice (names ignore case and spacing), not empty."""
    names = [clean_student_name(s) for s in students]
    if not names:
        raise AssignmentError(msg("worksheet.error.no_students"))
    if len(names) > MAX_STUDENTS:
        raise AssignmentError(msg("worksheet.error.too_many_students", limit=MAX_STUDENTS))
    seen: dict[str, str] = {}
    for name in names:
        if student_key(name) in seen:
            raise AssignmentError(msg("worksheet.error.duplicate_student", name=untrusted(name),
                                      other=untrusted(seen[student_key(name)])))
        seen[student_key(name)] = name
    return names


def check_class_list(text: str) -> None:
    """AssignmentError for a class list's text too long to be one (before anything parses it)."""
    if len(text) > MAX_CLASS_LIST_CHARS:
        raise AssignmentError(msg("export.error.list_too_long", length=len(text), limit=MAX_CLASS_LIST_CHARS,
                                  students=MAX_STUDENTS))


def read_students(text: str) -> list[str]:
    """Names from a text file: one per line; blank lines and lines starting with # are skipped."""
    check_class_list(text)
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


# ---------------------------------------------------------------- what a problem shows (any format)

Token = tuple  # ("int", "2") | ("frac", sign, numerator, denominator) | ("dec", "0.33") | ("inf", sign)
#              | ("decfrac", "0.38", sign, numerator, denominator): a decimal with its fraction beside


def _token(x: float, places: int | None) -> Token:
    """A number as shown: whole, a simple fraction, −∞, else a decimal (`places`, or its own digits)."""
    x = float(x)
    if math.isinf(x):
        return ("inf", "-" if x < 0 else "")
    if math.isnan(x):
        return ("dec", "NaN")
    f = as_fraction(x)
    if f is not None:
        if f.denominator == 1:
            return ("int", str(f.numerator))
        return ("frac", "-" if f < 0 else "", str(abs(f.numerator)), str(f.denominator))
    text = f"{x:.{places}f}" if places is not None else f"{x:.6g}"
    return ("dec", text[1:] if text.startswith("-") and float(text) == 0 else text)


def _tokens(M: np.ndarray, places: int | None = None) -> list[list[Token]]:
    return [[_token(x, places) for x in row] for row in np.atleast_2d(np.asarray(M, dtype=float))]


def key_token(x: float, places: int) -> Token:
    """A value of the answer key in the form its part asks for: with decimals asked (places > 0), the
    decimal rounded half up, the simple fraction beside it ("decfrac": 0.38 (3/8)); whole numbers and
    −∞ as they are; with places 0, exact (a whole number, or a simple fraction)."""
    token = _token(x, places if places > 0 else None)
    if places == 0 or token[0] in ("int", "inf"):
        return token
    text = latex.decimal(x, places)
    if token[0] == "frac":
        return ("decfrac", text, token[1], token[2], token[3])
    return ("dec", text)


def key_tokens(M: np.ndarray, places: int) -> list[list[Token]]:
    """key_token of every cell."""
    return [[key_token(x, places) for x in row] for row in np.atleast_2d(np.asarray(M, dtype=float))]


def _text(key: str, lang: str, fallback: str | None = None, **params: Any) -> str:
    """A catalog message; `fallback` when neither the language nor English defines the key."""
    if fallback is not None and key not in catalog(lang) and key not in catalog(DEFAULT_LANG):
        return fallback
    return t(key, lang, **params)


def part_label(name: str, lang: str, kind: str | None = None) -> str:
    return _text(part_key(name, kind), lang, fallback=name)


@dataclass(frozen=True)
class Given:
    name: str
    kind: str  # "matrix", "vector", "number"
    value: Any
    degrees: bool = False  # a vector of angles: each entry shown with a degree sign
    unit: Unit | None = None  # a matrix shown as whole numbers times this factor (solutions.shown_matrix)


@dataclass(frozen=True)
class Problem:
    """One numbered problem as every format shows it (texts already in the sheet's language)."""

    number: int
    exercise: Exercise
    title: str
    prompt: str
    notes: tuple[str, ...]
    given: tuple[Given, ...]
    asks: tuple[tuple[Part, str], ...]  # (part, what to find, in words)
    aids: Aids  # the eˣ table and √d_k a hand calculation needs (exercises.solutions)


def problem(ex: Exercise, number: int, lang: str) -> Problem:
    notes = []
    policy = grading.rounding_policy(ex, lang)  # how to round, what to carry on (when decimals are asked)
    if policy:
        notes.append(policy)
    if ex.given.get("causal") is True:
        notes.append(t("worksheet.causal", lang))
    given = []
    for name, value in ex.given.items():
        if isinstance(value, np.ndarray) and value.ndim == 2:
            unit, entries = shown_matrix(ex, name, value)
            given.append(Given(name, "matrix", entries, unit=unit))
        elif isinstance(value, np.ndarray) and value.ndim == 1:
            values, degrees = shown_vector(ex, name, value)
            given.append(Given(name, "vector", values, degrees))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            given.append(Given(name, "number", value))
    asks = []
    for part in ex.parts:
        if part.prompt:
            words = t(part.prompt, lang, **part.params)
        elif part.is_choice:
            words = t("worksheet.choose", lang, part=part_label(part.name, lang, ex.kind))
        else:
            hidden = "_inf" if np.isneginf(np.asarray(part.reference, dtype=float)).any() else ""  # −∞ cells
            precision = (t(f"worksheet.exact{hidden}", lang) if part.decimals == 0
                         else t(f"worksheet.decimals{hidden}", lang, decimals=part.decimals))
            words = t("worksheet.find", lang, part=part_label(part.name, lang, ex.kind), rows=part.shape[0],
                      cols=part.shape[1], precision=precision)
        asks.append((part, words))
    return Problem(number=number, exercise=ex, title=t(f"kind.{ex.kind}.title", lang),
                   prompt=engine.prompt(ex, lang), notes=tuple(notes),
                   given=tuple(given), asks=tuple(asks), aids=aids(ex))


def exp_rows(p: Problem) -> list[tuple[Token, str]]:
    """(x, e^x to EXP_PLACES) for every exponent the softmax meets: x exact when a simple fraction."""
    return [(_token(e.x, EXP_PLACES), latex.decimal(e.value, EXP_PLACES)) for e in p.aids.exp_table]


def option_text(option: str, part: Part, lang: str) -> str:
    return _text(option, lang, fallback=option, **part.params)


def _choice_answer(part: Part, lang: str) -> str:
    letter = chr(ord("A") + int(part.reference[0, 0]))
    return t("worksheet.choice_answer", lang, part=part_label(part.name, lang), letter=letter)


def answer_places(part: Part) -> int:
    return max(part.decimals, 2)


@dataclass(frozen=True)
class SolutionStep:
    name: str  # the step's value name (pipeline name, or the kind's own)
    title: str
    latex: str  # the whole step (formula, numbers substituted, result) as one LaTeX block
    value: np.ndarray  # the reference values the grader uses
    places: int
    note: str | None
    cell: str | None = None  # one cell worked out, as the screen's cell explainer shows it
    which: str | None = None  # which of two results to write, when the rounded work ends a last digit off


EXAMPLE_ROWS = 2  # the worked cell is the fullest of the first rows' cells


def example_cell(step: Step) -> str | None:
    """The LaTeX of one cell's derivation (the screen shows any cell; the key shows one): the cell of
    the first rows with a non-zero result whose derivation has the most terms, the first such. None for a step without a
    derivation of its own."""
    if step.derive is None:
        return None
    rows, cols = step.shape
    best, best_score = None, (False, -1)
    for i in range(min(rows, EXAMPLE_ROWS)):
        for j in range(cols):
            text = step.cell(i, j).latex
            x = float(step.value[i, j])
            score = (math.isfinite(x) and x != 0, text.count("+") + text.count(r"\cdot"))  # a non-zero result first
            if score > best_score:
                best, best_score = text, score
    return best


def solution_steps(ex: Exercise, lang: str) -> list[SolutionStep]:
    """The worked solution (exercises.solve) with its texts in `lang`: the very steps of the screen."""
    return [SolutionStep(name=s.name, title=s.title.render(lang), latex=s.display(exact=True),
                         value=np.atleast_2d(np.asarray(s.value, dtype=float)), places=s.places,
                         note=s.note.render(lang) if s.note is not None else None, cell=example_cell(s),
                         which=which_to_write(s, lang))
            for s in solve(ex)]


def which_to_write(step: Step, lang: str) -> str | None:
    """When the work with the rounded numbers it shows ends a last digit away from the value (= 1.12,
    then O ≈ 1.11), a sentence saying which is the answer the key gives; None when they agree."""
    if step.work_result is None or tuple(map(tuple, step.work_result)) == tuple(map(tuple, step.decimals)):
        return None
    return t("worksheet.which_value", lang, part=part_label(step.name, lang), places=step.places)
