"""Printable worksheets and answer keys: PDF (through Typst), Markdown, LaTeX source and JSON.

A worksheet holds the problems only — no seeds, no answers. For per-student variants it holds one
sheet per student (a page break between them); the answer key lists every student's answers and
worked solutions. The same assignment gives byte-identical documents: no dates, Typst's own fonts
only, everything in a fixed order.

    python -m exercises worksheet --kinds softmax,scores --level 2 --count 4 --seed 3 --format pdf --out DIR
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import engine, latex, pipeline
from .assignments import AssignmentError, AssignmentSpec, ItemSpec, clean_student_name, make_spec, student_key
from .i18n import DEFAULT_LANG, catalog, msg, t
from .model import Exercise, Part, to_jsonable
from .numbers import as_fraction
from .solutions import Aids, aids, solve

FORMATS = ("pdf", "md", "tex", "json")
NAMES = ("worksheet", "answer-key")
MAX_STUDENTS = 200
EXP_PLACES = latex.EXP_PLACES


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


def build(spec: AssignmentSpec, students: Iterable[str] = (), code: str | None = None,
          lang: str = DEFAULT_LANG) -> Worksheet:
    """The sheets of an assignment: one per student for per-student variants, else one for the class."""
    if not spec.per_student:
        return Worksheet(spec, (Sheet(None, tuple(spec.exercises())),), code, lang)
    names = clean_students(students)
    return Worksheet(spec, tuple(Sheet(n, tuple(spec.exercises(n))) for n in names), code, lang)


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
            raise AssignmentError(msg("worksheet.error.duplicate_student", name=name, other=seen[student_key(name)]))
        seen[student_key(name)] = name
    return names


def read_students(text: str) -> list[str]:
    """Names from a text file: one per line; blank lines and lines starting with # are skipped."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


# ---------------------------------------------------------------- what a problem shows (any format)

Token = tuple  # ("int", "2") | ("frac", sign, numerator, denominator) | ("dec", "0.33") | ("inf", sign)


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


def _text(key: str, lang: str, fallback: str | None = None, **params: Any) -> str:
    """A catalog message; `fallback` when neither the language nor English defines the key."""
    if fallback is not None and key not in catalog(lang) and key not in catalog(DEFAULT_LANG):
        return fallback
    return t(key, lang, **params)


def part_label(name: str, lang: str) -> str:
    return _text(f"part.{name}", lang, fallback=name)


@dataclass(frozen=True)
class Given:
    name: str
    kind: str  # "matrix", "vector", "number"
    value: Any


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
    if ex.given.get("causal") is True:
        notes.append(t("worksheet.causal", lang))
    given = []
    for name, value in ex.given.items():
        if isinstance(value, np.ndarray) and value.ndim == 2:
            given.append(Given(name, "matrix", value))
        elif isinstance(value, np.ndarray) and value.ndim == 1:
            given.append(Given(name, "vector", value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            given.append(Given(name, "number", value))
    asks = []
    for part in ex.parts:
        if part.prompt:
            words = t(part.prompt, lang, **part.params)
        elif part.is_choice:
            words = t("worksheet.choose", lang, part=part_label(part.name, lang))
        else:
            precision = (t("worksheet.exact", lang) if part.decimals == 0
                         else t("worksheet.decimals", lang, decimals=part.decimals))
            words = t("worksheet.find", lang, part=part_label(part.name, lang), rows=part.shape[0],
                      cols=part.shape[1], precision=precision)
        asks.append((part, words))
    return Problem(number=number, exercise=ex, title=t(f"kind.{ex.kind}.title", lang),
                   prompt=engine.prompt(ex, lang), notes=tuple(notes),
                   given=tuple(given), asks=tuple(asks), aids=aids(ex))


def exp_rows(p: Problem) -> list[tuple[Token, str]]:
    """(x, e^x to EXP_PLACES) for every exponent the softmax meets: x exact when a simple fraction."""
    return [(_token(e.x, EXP_PLACES), latex.decimal(e.value, EXP_PLACES)) for e in p.aids.exp_table]


def _option_text(option: str, part: Part, lang: str) -> str:
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


def solution_steps(ex: Exercise, lang: str) -> list[SolutionStep]:
    """The worked solution (exercises.solve) with its texts in `lang`."""
    return [SolutionStep(name=s.name, title=s.title.render(lang), latex=s.display(exact=True),
                         value=np.atleast_2d(np.asarray(s.value, dtype=float)), places=s.places,
                         note=s.note.render(lang) if s.note is not None else None)
            for s in solve(ex)]


# ---------------------------------------------------------------- Typst (PDF)

_TYPST_SYMBOLS = {
    "scores": "S", "scaled": "Z", "masked": "tilde(Z)", "G_scaled": "G_Z", "G_scores": "G_S",
    "G_X_V": "G_X^((V))", "token_ids": "t", "d_k": "d_k",
}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def typst_string(text: str) -> str:
    """A Typst string literal: user text reaches the document as text, never as markup or code."""
    text = _CONTROL.sub(" ", str(text))
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "") + '"'


def typst_symbol(name: str) -> str:
    """The math symbol of a value name: W_Q → W_Q, G_W_Q → G_(W_Q), W_Q1 → W_("Q1"), concat → "concat"."""
    if name in _TYPST_SYMBOLS:
        return _TYPST_SYMBOLS[name]
    if re.fullmatch(r"[A-Za-z]", name):
        return name
    head, _, tail = name.partition("_")
    if re.fullmatch(r"[A-Za-z]", head) and tail:
        if re.fullmatch(r"[A-Za-z]", tail):
            return f"{head}_{tail}"
        if re.fullmatch(r"[A-Za-z]_[A-Za-z]", tail):
            return f"{head}_({typst_symbol(tail)})"
        if re.fullmatch(r"[A-Za-z0-9]+", tail):
            return f'{head}_("{tail}")'
    return typst_string(name)


def _typst_cell(token: Token) -> str:
    kind = token[0]
    if kind == "inf":
        return f"{token[1]}infinity"
    if kind == "frac":
        return f"{token[1]}display(frac({token[2]}, {token[3]}))"  # full size, also inside a matrix
    return token[1]


def typst_matrix(cells: Sequence[Sequence[Token]]) -> str:
    rows = "; ".join(", ".join(_typst_cell(c) for c in row) for row in cells)
    return f'mat(delim: "[", {rows})'


_TYPST_PREAMBLE = """\
#set document(title: {title}, author: (), date: none)
#set page(paper: "a4", margin: (x: 2cm, y: 1.8cm), numbering: "1")
#set text(font: "Libertinus Serif", size: 11pt, lang: {lang})  // CJK glyphs: Typst falls back to the loaded CJK font
#set par(justify: false, leading: 0.6em)
#set math.mat(column-gap: 0.9em, row-gap: 0.45em)
#let sheet-head(title, left, right) = {{
  block(below: 0.4em, text(size: 16pt, weight: "bold", title))
  grid(columns: (1fr, auto), left, right)
  line(length: 100%, stroke: 0.6pt)
}}
#let write-in(label) = [#label #box(width: 6cm, stroke: (bottom: 0.5pt), height: 1em)]
#let problem-head(n, title, level) = block(above: 1.3em, below: 0.5em, sticky: true,
  text(weight: "bold", n + ". " + title) + h(0.6em) + text(size: 9pt, fill: luma(90), level))
#let answer-grid(rows, cols) = table(columns: range(cols).map(_ => 1.7cm), rows: range(rows).map(_ => 0.85cm),
  stroke: 0.5pt + luma(150), ..range(rows * cols).map(_ => []))
#let note(body) = text(size: 9.5pt, fill: luma(70), body)
#let step-head(body) = block(above: 0.7em, below: 0.3em, sticky: true, text(style: "italic", body))
"""


def _typst_given(g: Given) -> str:
    sym = typst_symbol(g.name)
    if g.kind == "matrix":
        return f"{sym} = {typst_matrix(_tokens(g.value))}"
    if g.kind == "vector":
        return f"{sym} = ({', '.join(_typst_cell(_token(x, None)) for x in g.value)})"
    return f"{sym} = {_typst_cell(_token(g.value, None))}"


def _typst_math_rows(lines: list[str], per_row: int = 3) -> list[str]:
    """Math lines side by side, a few per row."""
    out = []
    for start in range(0, len(lines), per_row):
        out.append("$ " + " wide ".join(lines[start:start + per_row]) + " $")
    return out


def _typst_sheet_head(ws: Worksheet, sheet: Sheet, key: bool) -> list[str]:
    lang = ws.lang
    title = ws.spec.title + (" — " + t("worksheet.key_title", lang) if key else "")
    if sheet.student is None:
        left = f"#write-in({typst_string(t('worksheet.name_line', lang))})" if not key else "[]"
    else:
        left = f"text(weight: \"bold\", {typst_string(t('worksheet.student', lang, name=sheet.student))})"
        left = f"[#{left}]"
    right = f"[#{typst_string(t('worksheet.code', lang, code=ws.code))}]" if ws.code else "[]"
    left = left if left.startswith("[") else f"[{left}]"
    return ["#counter(page).update(1)", f"#sheet-head({typst_string(title)}, {left}, {right})"]


def _typst_problem(p: Problem, lang: str, key: bool) -> list[str]:
    level = t("worksheet.level", lang, level=p.exercise.level)
    out = [f"#problem-head({typst_string(str(p.number))}, {typst_string(p.title)}, {typst_string(level)})",
           f"#{typst_string(p.prompt)}", ""]
    out += [f"#note({typst_string(n)})" for n in p.notes]
    out += _typst_math_rows([_typst_given(g) for g in p.given])
    if not key:
        out += _typst_aids(p, lang)
    for part, words in p.asks:
        out.append(f"#{typst_string(words)}")
        out.append("")
        if part.is_choice:
            for i, option in enumerate(part.options):
                out.append(f"- {chr(ord('A') + i)}. #{typst_string(_option_text(option, part, lang))}")
            out.append("")
            if key:
                out.append(f"#strong({typst_string(_choice_answer(part, lang))})")
        elif key:
            out += _typst_answer(part)
        else:
            out.append(f"#answer-grid({part.shape[0]}, {part.shape[1]})")
    if key:
        out += _typst_steps(p.exercise, lang)
    return out


def _typst_aids(p: Problem, lang: str) -> list[str]:
    out = []
    rows = exp_rows(p)
    if rows:
        header = ", ".join(f"${_typst_cell(x)}$" for x, _ in rows)
        values = ", ".join(f"[{v}]" for _, v in rows)
        out.append(f"#note({typst_string(t('worksheet.exp_table', lang))})")
        out.append(f"#table(columns: {len(rows) + 1}, stroke: 0.4pt + luma(160), inset: 4pt, "
                   f"$x$, {header}, $e^x$, {values})")
    if p.aids.sqrt_dk is not None and "d_k" in p.exercise.given:
        d_k = int(p.exercise.given["d_k"])
        root = math.isqrt(d_k)
        value = str(root) if root * root == d_k else f"approx {math.sqrt(d_k):.{EXP_PLACES}f}"
        out.append(f"#note($sqrt({d_k}) = {value}$)" if root * root == d_k else f"#note($sqrt({d_k}) {value}$)")
    return out


def _typst_answer(part: Part) -> list[str]:
    if part.is_choice:
        return []
    return [f"$ {typst_symbol(part.name)} = {typst_matrix(_tokens(part.reference, answer_places(part)))} $"]


# The formula of each pipeline step in Typst math (the notation of exercises.latex), and for a
# matrix product its two factors (name, transposed), so that one cell can be worked out in numbers.
_TYPST_FORMULAS: dict[str, tuple[str, tuple[tuple[str, bool], tuple[str, bool]] | None]] = {
    "Q": ("Q = X W_Q", (("X", False), ("W_Q", False))),
    "K": ("K = X W_K", (("X", False), ("W_K", False))),
    "V": ("V = X W_V", (("X", False), ("W_V", False))),
    "scores": ("S = Q K^top", (("Q", False), ("K", True))),
    "scaled": ("Z = S / sqrt(d_k)", None),
    "masked": ("tilde(Z)_(i j) = cases(Z_(i j) & j <= i, -infinity & j > i)", None),
    "A": ("A_(i j) = e^(tilde(Z)_(i j)) / (sum_k e^(tilde(Z)_(i k)))", None),
    "O": ("O = A V", (("A", False), ("V", False))),
    "G_A": ("G_A = G_O V^top", (("G_O", False), ("V", True))),
    "G_V": ("G_V = A^top G_O", (("A", True), ("G_O", False))),
    "G_scaled": ('G_Z = A dot.o (G_A - r bold(1)^top), quad r_i = sum_k A_(i k) (G_A)_(i k)', None),
    "G_scores": ("G_S = G_Z / sqrt(d_k)", None),
    "G_Q": ("G_Q = G_S K", (("G_scores", False), ("K", False))),
    "G_K": ("G_K = G_S^top Q", (("G_scores", True), ("Q", False))),
    "G_W_Q": ("G_(W_Q) = X^top G_Q", (("X", True), ("G_Q", False))),
    "G_W_K": ("G_(W_K) = X^top G_K", (("X", True), ("G_K", False))),
    "G_W_V": ("G_(W_V) = X^top G_V", (("X", True), ("G_V", False))),
    "G_X": ("G_X = G_Q W_Q^top + G_K W_K^top + G_V W_V^top", None),
    "G_X_V": ("G_X^((V)) = G_V W_V^top", (("G_V", False), ("W_V", True))),
    "G_E": ("G_E [v] = sum_(p: t_p = v) (G_X)_p", None),
}


def _typst_factor(x: float) -> str:
    cell = _typst_cell(_token(x, None))
    return f"({cell})" if cell.startswith("-") else cell


def _typst_product_cell(name: str, value: np.ndarray, places: int, factors, values: dict) -> str | None:
    """One cell of a matrix product worked out in numbers: S_12 = 0 dot 1 + 1 dot 1 = 1."""
    (left, lt), (right, rt) = factors
    if left not in values or right not in values:
        return None
    L = np.atleast_2d(values[left]).T if lt else np.atleast_2d(values[left])  # (n, m)
    R = np.atleast_2d(values[right]).T if rt else np.atleast_2d(values[right])  # (m, p)
    if L.shape[1] != R.shape[0] or (L.shape[0], R.shape[1]) != value.shape:
        return None
    # the first cell with at least two non-zero terms shows the most; else cell (1, 1)
    i, j = next(((i, j) for (i, j), _ in np.ndenumerate(value) if np.count_nonzero(L[i] * R[:, j]) >= 2), (0, 0))
    terms = " + ".join(f"{_typst_factor(a)} dot {_typst_factor(b)}" for a, b in zip(L[i], R[:, j]))
    sym = typst_symbol(name)
    cell = f"({sym})_({i + 1}{j + 1})" if "_" in sym or "(" in sym else f"{sym}_({i + 1}{j + 1})"
    return f"{cell} = {terms} = {_typst_cell(_token(value[i, j], places))}"


def _typst_work(s: SolutionStep, values: dict) -> list[str]:
    """The numbers between a step's formula and its result, for the steps where they help most."""
    if s.name == "A" and "masked" in values:
        z = np.asarray(values["masked"], dtype=float)  # (n, n)
        with np.errstate(over="ignore"):
            ez = np.exp(z)  # e^(−∞) = 0
        sums = ez.sum(axis=1, keepdims=True)  # (n, 1)
        return [f"$ e^(tilde(Z)) approx {typst_matrix(_tokens(ez, EXP_PLACES))}, quad "
                f"sum_k e^(tilde(Z)_(i k)) approx {typst_matrix(_tokens(sums, EXP_PLACES))} $"]
    if s.name in ("scaled", "G_scores") and "d_k" in values:
        d_k = int(values["d_k"])
        root = math.isqrt(d_k)
        div = str(root) if root * root == d_k else f"sqrt({d_k}) approx {math.sqrt(d_k):.{EXP_PLACES}f}"
        return [f"$ sqrt(d_k) = sqrt({d_k}) = {div} $" if root * root == d_k else f"$ sqrt(d_k) = {div} $"]
    formula = _TYPST_FORMULAS.get(s.name)
    if formula is not None and formula[1] is not None:
        line = _typst_product_cell(s.name, s.value, s.places, formula[1], values)
        return [f"$ {line} $"] if line else []
    return []


def _typst_steps(ex: Exercise, lang: str) -> list[str]:
    steps = solution_steps(ex, lang)
    if not steps:
        return []
    values: dict[str, Any] = dict(pipeline.run(ex.given))  # the reference values of every step
    values.update({s.name: s.value for s in steps})
    choices = {p.name: p for p in ex.parts if p.is_choice}
    out = [f"#step-head({typst_string(t('worksheet.solution', lang))})"]
    for number, s in enumerate(steps, start=1):
        out.append(f"#step-head({typst_string(f'{number}. {s.title}')})")
        if s.note:
            out.append(f"#note({typst_string(s.note)})")
        if s.name in choices:  # the value is an option's index: the option is what to show
            out.append(f"#{typst_string(_choice_answer(choices[s.name], lang))}")
            continue
        formula = _TYPST_FORMULAS.get(s.name)
        if formula is not None:
            out.append(f"$ {formula[0]} $")
        out += _typst_work(s, values)
        out.append(f"$ {typst_symbol(s.name) + ' = ' if formula is not None else ''}"
                   f"{typst_matrix(_tokens(s.value, s.places))} $")
    return out


def to_typst(ws: Worksheet, key: bool = False) -> str:
    """The Typst source of the worksheet (key=False) or of the answer key."""
    lang = ws.lang
    doc_title = ws.spec.title + (" — " + t("worksheet.key_title", lang) if key else "")
    out = [_TYPST_PREAMBLE.format(title=typst_string(doc_title), lang=typst_string(lang))]
    for index, sheet in enumerate(ws.sheets):
        if index:
            out.append("#pagebreak()")
        out += _typst_sheet_head(ws, sheet, key)
        for number, ex in enumerate(sheet.exercises, start=1):
            p = problem(ex, number, lang)
            out += _typst_problem(p, lang, key)
    return out[0] + "\n\n".join(line for line in out[1:] if line) + "\n"  # one paragraph per line


# Fonts: Typst's bundled ones (Libertinus Serif, New Computer Modern Math) cover Latin text and the
# maths; Chinese text needs a CJK font, taken from one known folder. System fonts are never searched,
# so a document is the same bytes wherever the same font packages are installed.
CJK_FONT_ENV = "ATTENTION_CJK_FONT_DIR"  # a folder with a CJK font, to use instead of the ones below
CJK_FONT_DIRS = (
    "/usr/share/fonts/truetype/wqy",  # Debian fonts-wqy-microhei (WenQuanYi Micro Hei)
    "/usr/share/fonts/opentype/noto",  # Debian fonts-noto-cjk (Noto Sans CJK SC)
)
_CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")


class MissingFont(RuntimeError):
    """The document has Chinese text and no CJK font folder is installed."""


def needs_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def cjk_font_dir() -> Path | None:
    """$ATTENTION_CJK_FONT_DIR, else the first installed folder of CJK_FONT_DIRS, else None."""
    override = os.environ.get(CJK_FONT_ENV, "").strip()
    for folder in [override] if override else CJK_FONT_DIRS:
        path = Path(folder)
        if path.is_dir() and any(f.suffix.lower() in (".ttf", ".ttc", ".otf", ".otc") for f in path.iterdir()):
            return path
    return None


def to_pdf(ws: Worksheet, key: bool = False) -> bytes:
    """The PDF, compiled with Typst's bundled fonts (and a CJK font folder for Chinese text) only."""
    import typst  # imported here: the rest of the package works without it

    source = to_typst(ws, key)
    fonts: list[str] = []
    if needs_cjk(source):
        folder = cjk_font_dir()
        if folder is None:
            raise MissingFont("Chinese text needs a CJK font: install Debian's fonts-wqy-microhei "
                              f"(or fonts-noto-cjk), or set {CJK_FONT_ENV} to a folder with one")
        fonts = [str(folder)]
    return typst.compile(source.encode("utf-8"), format="pdf", ignore_system_fonts=True, font_paths=fonts)


# ---------------------------------------------------------------- LaTeX and Markdown (math in LaTeX)

_TEX_ESCAPES = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
                "^": r"\textasciicircum{}", "_": r"\_", "%": r"\%", "~": r"\textasciitilde{}"}
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|$~])")


def tex_escape(text: str) -> str:
    return "".join(_TEX_ESCAPES.get(c, c) for c in _CONTROL.sub(" ", str(text)))


def md_escape(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", _CONTROL.sub(" ", str(text)).replace("\n", " "))


def _latex_cell(token: Token) -> str:
    kind = token[0]
    if kind == "inf":
        return rf"{token[1]}\infty"
    if kind == "frac":
        return f"{token[1]}{latex.frac(token[2], token[3])}"
    return token[1]


def _latex_matrix(cells: Sequence[Sequence[Token]]) -> str:
    return latex.bmatrix([[_latex_cell(c) for c in row] for row in cells])


def _latex_given(g: Given) -> str:
    sym = latex.symbol(g.name)
    if g.kind == "matrix":
        return f"{sym} = {_latex_matrix(_tokens(g.value))}"
    if g.kind == "vector":
        return f"{sym} = ({', '.join(_latex_cell(_token(x, None)) for x in g.value)})"
    return f"{sym} = {_latex_cell(_token(g.value, None))}"


def _latex_answer(part: Part) -> str:
    return f"{latex.symbol(part.name)} = {_latex_matrix(_tokens(part.reference, answer_places(part)))}"


def _aids_latex(p: Problem) -> list[str]:
    return [s for s in (p.aids.table_latex(), p.aids.sqrt_dk) if s]


def _doc_lines(ws: Worksheet, key: bool, fmt: str) -> list[str]:
    """The Markdown or LaTeX body: the same content, two syntaxes."""
    lang = ws.lang
    tex = fmt == "tex"
    esc = tex_escape if tex else md_escape

    def display(math_: str) -> list[str]:
        return [r"\[ " + math_ + r" \]"] if tex else ["$$", math_, "$$"]

    def heading(text: str, level: int) -> str:
        if tex:
            return (r"\section*{" if level == 1 else r"\subsection*{") + esc(text) + "}"
        return "#" * level + " " + esc(text)

    out: list[str] = []
    for index, sheet in enumerate(ws.sheets):
        if index:
            out.append(r"\newpage" if tex else "\n---\n")
        title = ws.spec.title + (" — " + t("worksheet.key_title", lang) if key else "")
        out += [heading(title, 1), ""]
        if sheet.student is not None:
            out += [esc(t("worksheet.student", lang, name=sheet.student)), ""]
        elif not key:
            out += [esc(t("worksheet.name_line", lang)) + (r" \rule{6cm}{0.4pt}" if tex else " ______________"), ""]
        if ws.code:
            out += [esc(t("worksheet.code", lang, code=ws.code)), ""]
        for number, ex in enumerate(sheet.exercises, start=1):
            p = problem(ex, number, lang)
            level = t("worksheet.level", lang, level=ex.level)
            out += [heading(f"{number}. {p.title} ({level})", 2), "", esc(p.prompt), ""]
            for n in p.notes:
                out += [(r"\emph{" + esc(n) + "}") if tex else f"*{esc(n)}*", ""]
            if p.given:
                out += display(r",\qquad ".join(_latex_given(g) for g in p.given)) + [""]
            if not key:
                for aid in _aids_latex(p):
                    out += display(aid) + [""]
            for part, words in p.asks:
                out += [esc(words), ""]
                if part.is_choice:
                    for i, option in enumerate(part.options):
                        out.append(("\\quad " if tex else "- ") + f"{chr(ord('A') + i)}. "
                                   + esc(_option_text(option, part, lang)) + (r"\\" if tex else ""))
                    out.append("")
                    if key:
                        out += [esc(_choice_answer(part, lang)), ""]
                elif key:
                    out += display(_latex_answer(part)) + [""]
            if key:
                steps = solution_steps(ex, lang)
                if steps:
                    out += [(r"\paragraph{" + esc(t("worksheet.solution", lang)) + "}") if tex
                            else f"**{esc(t('worksheet.solution', lang))}**", ""]
                for number, s in enumerate(steps, start=1):
                    title = f"{number}. {s.title}"
                    out += [(r"\emph{" + esc(title) + "}") if tex else f"*{esc(title)}*", ""]
                    if s.note:
                        out += [esc(s.note), ""]
                    out += display(s.latex) + [""]
    return out


def to_markdown(ws: Worksheet, key: bool = False) -> str:
    return "\n".join(_doc_lines(ws, key, "md")).rstrip() + "\n"


_TEX_PREAMBLE = r"""% compile with lualatex or xelatex (the text is UTF-8)
\documentclass[11pt,a4paper]{article}
\usepackage[margin=2cm]{geometry}
\usepackage{amsmath,amssymb}
\usepackage{fontspec}
\setlength{\parindent}{0pt}
\setlength{\parskip}{0.5em}
\begin{document}
"""


def to_latex(ws: Worksheet, key: bool = False) -> str:
    return _TEX_PREAMBLE + "\n".join(_doc_lines(ws, key, "tex")).rstrip() + "\n\\end{document}\n"


# ---------------------------------------------------------------- JSON


def to_json(ws: Worksheet, key: bool = False) -> str:
    """The problems as data; the worksheet leaves out seeds and answers, the key has both."""
    lang = ws.lang
    sheets = []
    for sheet in ws.sheets:
        problems = []
        for number, ex in enumerate(sheet.exercises, start=1):
            p = problem(ex, number, lang)
            parts = []
            for part, words in p.asks:
                d = {"name": part.name, "shape": list(part.shape), "decimals": part.decimals, "ask": words}
                if part.is_choice:
                    d["options"] = [_option_text(o, part, lang) for o in part.options]
                if key:
                    d["reference"] = to_jsonable(part.reference)
                parts.append(d)
            entry: dict[str, Any] = {"number": number, "kind": ex.kind, "level": ex.level, "title": p.title,
                                     "prompt": p.prompt, "notes": list(p.notes), "given": to_jsonable(ex.given),
                                     "parts": parts}
            if p.aids.exp_table and not key:
                entry["exp_table"] = [{"x": e.x, "exp": round(e.value, EXP_PLACES)} for e in p.aids.exp_table]
            if key:
                entry.update(seed=ex.seed, version=ex.version,
                             solution=[{"title": s.title, "latex": s.latex, "note": s.note,
                                        "value": to_jsonable(s.value)} for s in solution_steps(ex, lang)])
            problems.append(entry)
        sheets.append({"student": sheet.student, "problems": problems})
    doc: dict[str, Any] = {"document": "answer-key" if key else "worksheet", "title": ws.spec.title,
                           "code": ws.code, "lang": lang, "per_student": ws.spec.per_student, "sheets": sheets}
    if key:
        doc["assignment"] = ws.spec.to_dict()
    return json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


# ---------------------------------------------------------------- files

_RENDER = {"pdf": to_pdf, "md": to_markdown, "tex": to_latex, "json": to_json}


def render(ws: Worksheet, fmt: str) -> dict[str, bytes]:
    """{"worksheet.<fmt>": …, "answer-key.<fmt>": …}."""
    if fmt not in _RENDER:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    out = {}
    for name, key in zip(NAMES, (False, True)):
        data = _RENDER[fmt](ws, key)
        out[f"{name}.{fmt}"] = data if isinstance(data, bytes) else data.encode("utf-8")
    return out


def write(ws: Worksheet, fmt: str, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in render(ws, fmt).items():
        path = folder / name
        path.write_bytes(data)
        paths.append(path)
    return paths


# ---------------------------------------------------------------- command line (python -m exercises worksheet)

NAME = "worksheet"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="write a worksheet and its answer key (PDF, Markdown, LaTeX or JSON)",
                       description="Write DIR/worksheet.FMT and DIR/answer-key.FMT.")
    p.add_argument("--kinds", required=True, help="comma-separated kinds, e.g. softmax,scores")
    p.add_argument("--level", default="1", help="level of every item (default 1)")
    p.add_argument("--count", default="1", help="exercises per kind (default 1)")
    p.add_argument("--seed", default="0", help="the assignment's seed (default 0)")
    p.add_argument("--format", default="pdf", help="pdf, md, tex, json or all (default pdf)")
    p.add_argument("--out", required=True, help="the folder to write into (created if missing)")
    p.add_argument("--students", help="a text file of names, one per line: one variant per student")
    p.add_argument("--title", default=None, help="the title printed on the sheets")
    p.add_argument("--code", default=None, help="an assignment code to print on the sheets")
    p.add_argument("--lang", default=DEFAULT_LANG, help="language of the texts (default en)")


def run(args: argparse.Namespace) -> int:
    import sys

    def fail(text: str) -> int:
        print(f"error: {text}", file=sys.stderr)
        return 2

    formats = list(FORMATS) if args.format == "all" else [args.format]
    if any(f not in FORMATS for f in formats):
        return fail(f"unknown format {args.format!r}; choose one of {', '.join(FORMATS)} or all")
    kinds = [k.strip() for k in str(args.kinds).split(",") if k.strip()]
    students: list[str] = []
    if args.students:
        try:
            students = read_students(Path(args.students).read_text(encoding="utf-8"))
        except OSError as err:
            return fail(f"cannot read the students file {args.students!r}: {err.strerror}")
        except UnicodeDecodeError:
            return fail(f"{args.students!r} is not a UTF-8 text file")
    try:
        items = [ItemSpec(k, int(args.level), int(args.count)) for k in kinds]
    except ValueError:
        return fail("--level and --count must be whole numbers")
    title = args.title or t("worksheet.default_title", args.lang)
    try:
        spec = make_spec(title, items, args.seed, per_student=bool(args.students))
        ws = build(spec, students, args.code, args.lang)
    except AssignmentError as err:
        return fail(err.message.render(args.lang))
    for fmt in formats:
        for path in write(ws, fmt, Path(args.out)):
            print(path)
    return 0
