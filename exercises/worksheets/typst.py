"""The PDF: Typst source of a worksheet or its answer key, compiled with Typst's own fonts.

The answer key prints each step of exercises.solve — the same steps, titles, notes and derivations
as the screen — its LaTeX set in Typst math by typst_math. The same assignment gives byte-identical
documents: no dates, Typst's own fonts only, everything in a fixed order.
"""

from __future__ import annotations

import io
import math
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path

from ..core import steps as registry
from ..core.model import Exercise, Part
from ..i18n import t
from . import paper
from .model import (
    EXP_PLACES,
    Given,
    Problem,
    Sheet,
    SolutionStep,
    Token,
    Worksheet,
    _choice_answer,
    _token,
    _tokens,
    exp_rows,
    key_tokens,
    option_text,
    part_label,
    problem,
    solution_steps,
)
from .typst_math import UnsupportedLatex, latex_to_typst, typst_string

# the Typst symbol of every value: the given ones, then each step's own (exercises.core.steps)
_TYPST_SYMBOLS = {**registry.INPUT_TYPST_SYMBOLS, **{step.name: step.typst_symbol for step in registry.STEPS}}


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
    if kind == "decfrac":  # the decimal asked for, its exact fraction beside
        return f"{token[1]} thin ({token[2]}{token[3]}/{token[4]})"
    return token[1]


def typst_matrix(cells: Sequence[Sequence[Token]]) -> str:
    rows = "; ".join(", ".join(_typst_cell(c) for c in row) for row in cells)
    return f'mat(delim: "[", {rows})'


_TYPST_PREAMBLE = """\
#set document(title: {title}, author: (), date: none)
#let sheet-student = state("sheet-student", none)
#let sheet-qr = state("sheet-qr", none)
#set page(paper: "a4", margin: (x: 2cm, top: 1.8cm, bottom: {bottom}), footer: context {{
  // one QR for every page (a personal link), or one per page (a sheet read back from paper)
  let qrs = sheet-qr.get()
  let n = counter(page).get().first()
  let qr = if qrs == none {{ none }} else if qrs.len() == 1 {{ qrs.at(0) }} else if n <= qrs.len() {{ qrs.at(n - 1) }}
  set text(size: 8.5pt, fill: luma(60))
  line(length: 100%, stroke: 0.4pt + luma(160))
  grid(columns: (1fr, auto), align: (left + horizon, right + horizon), gutter: 0.6em,
    [{code}#if sheet-student.get() != none [ · #sheet-student.get()] · {page} #counter(page).display("1")],
    if qr != none {{ image(bytes(qr), format: "svg", height: if qrs.len() > 1 {{ 2cm }} else {{ 1.5cm }}) }})
}})
#set text(font: "Libertinus Serif", size: 11pt, lang: {lang})  // CJK glyphs: Typst falls back to the loaded CJK font
#set par(justify: false, leading: 0.6em)
#set math.mat(column-gap: 0.9em, row-gap: 0.45em)
#let sheet-head(title, left, right) = {{
  block(below: 0.4em, text(size: 16pt, weight: "bold", title))
  grid(columns: (1fr, auto), left, right)
  line(length: 100%, stroke: 0.6pt)
}}
#let write-in(label) = [#label #box(width: 6cm, stroke: (bottom: 0.5pt), height: 1em)]
#let problem-head(n, title, level) = block(above: 0pt, below: 0.5em,
  text(weight: "bold", n + ". " + title) + h(0.6em) + text(size: 9pt, fill: luma(90), level))
// an item never splits across pages: its statement and each part (with its boxes) are unbreakable
// blocks, each sticky to the next, so the chain moves to the next page whole; only a chain taller than
// a page breaks, and then between parts
#let item-head(body) = block(breakable: false, sticky: true, width: 100%, above: 1.4em, below: 0.6em, body)
#let item-part(sticky, body) = block(breakable: false, sticky: sticky, width: 100%, above: 0.6em, below: 0.6em, body)
#let answer-grid(rows, cols, width) = table(columns: range(cols).map(_ => width), rows: range(rows).map(_ => 1.1cm),
  stroke: 0.5pt + luma(150), ..range(rows * cols).map(_ => []))
// a grid read back from paper: four ArUco markers at its corners, a gap away (exercises.worksheets.paper)
#let paper-grid(rows, cols, w, h, fraction, marks) = {{
  let m = {mark}mm
  let g = {gap}mm
  let cell = if fraction {{ align(center + horizon, line(length: 45%, stroke: 0.6pt + luma(110))) }} else {{ [] }}
  grid(columns: (m, g, w * cols, g, m), rows: (m, g, h * rows, g, m),
    marks.at(0), [], [], [], marks.at(1),
    [], [], [], [], [],
    [], [], table(columns: (w,) * cols, rows: (h,) * rows, inset: 0pt, stroke: 0.5pt + luma(150),
      ..range(rows * cols).map(_ => cell)), [], [],
    [], [], [], [], [],
    marks.at(3), [], [], [], marks.at(2))
}}
// the working box is one piece too, kept on the page of its item's last part (that part sticks to it)
#let working(height, label) = block(breakable: false, width: 100%, height: height, above: 0.6em, inset: 5pt,
  stroke: (paint: luma(170), thickness: 0.5pt, dash: "dashed"), text(size: 8pt, fill: luma(120), label))
#let note(body) = text(size: 9.5pt, fill: luma(70), body)
// a worked step's heading (and note) stays with its first line
#let step-head(body) = block(above: 0.8em, below: 0.3em, sticky: true, text(style: "italic", body))
#let fit(body) = layout(size => {{
  let width = measure(body).width
  if width > size.width {{ scale(size.width / width * 100%, reflow: true, body) }} else {{ body }}
}})
"""

SPACE_HEIGHTS = {"none": None, "some": "4cm", "lots": "9cm"}  # working space under each worksheet item
TEXT_WIDTH_CM = 17.0  # A4 less 2 cm margins
CELL_CM = 2.2  # an answer cell fits a value like −0.75 in handwriting


def cell_width(cols: int) -> str:
    """The width of an answer cell: CELL_CM, narrower only when the row would not fit the page."""
    return f"{min(CELL_CM, (TEXT_WIDTH_CM - 0.2) / max(cols, 1)):.2f}cm"


def _typst_given(g: Given) -> str:
    sym = typst_symbol(g.name)
    if g.kind == "matrix":
        factor = f"{g.unit.typst} dot " if g.unit is not None else ""
        return f"{sym} = {factor}{typst_matrix(_tokens(g.value))}"
    if g.kind == "vector":
        unit = " degree" if g.degrees else ""
        return f"{sym} = ({', '.join(_typst_cell(_token(x, None)) + unit for x in g.value)})"
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
    pages = ws.paper_pages(sheet.student) if not key else ()
    link = ws.link(sheet.student)
    if pages:  # read back from paper: each page its own QR (which sheet, which page)
        qr = "(" + ", ".join(typst_string(qr_svg(payload, border=2)) for payload in pages) + ",)"
    else:
        qr = f"({typst_string(qr_svg(link))},)" if link and not key else "none"
    student = typst_string(sheet.student) if sheet.student is not None else "none"
    return [f"#sheet-student.update({student})", f"#sheet-qr.update({qr})", "#counter(page).update(1)",
            f"#sheet-head({typst_string(title)}, {left}, {right})"]


def qr_svg(text: str, border: int = 1) -> str:
    """A QR code of a student's personal link (or a paper page's payload), as SVG (segno: a small,
    well-kept, pure-Python library); `border` in modules."""
    import segno  # imported here: only a sheet with personal links needs it

    out = io.BytesIO()
    segno.make(text, error="m", micro=False).save(out, kind="svg", border=border, xmldecl=False, svgns=True)
    return out.getvalue().decode("ascii")


def _item(lines: list[str]) -> str:
    """Lines kept together on one page (an item, a worked step)."""
    return "[\n" + "\n\n".join(line for line in lines if line) + "\n]"


# A sheet's worksheet and its answer key are written one after the other from the same exercises:
# each problem (its texts, aids and given matrices, the costliest part after the worked solution) is
# made once for both. Keyed by the exercise object itself (an Exercise holds arrays: it has no hash).
_PROBLEMS: dict[tuple[int, int, str], tuple[Exercise, Problem, list[str]]] = {}
_PROBLEMS_KEPT = 64  # a sheet's exercises, and then some
_PROBLEMS_LOCK = threading.Lock()


def _problem(ex: Exercise, number: int, lang: str) -> tuple[Problem, list[str]]:
    """problem(ex, number, lang) and its given values as Typst math rows, made once for both documents."""
    index = (id(ex), number, lang)
    with _PROBLEMS_LOCK:
        kept = _PROBLEMS.get(index)
    if kept is not None and kept[0] is ex:
        return kept[1], kept[2]
    p = problem(ex, number, lang)
    rows = _typst_math_rows([_typst_given(g) for g in p.given])
    with _PROBLEMS_LOCK:
        if len(_PROBLEMS) >= _PROBLEMS_KEPT:
            _PROBLEMS.pop(next(iter(_PROBLEMS)))  # the oldest
        _PROBLEMS[index] = (ex, p, rows)
    return p, rows


def typst_mark(marker_id: int) -> str:
    """An ArUco marker as Typst: a black square with its white squares placed on it (no seams in the
    black border, whatever the rasteriser)."""
    bits = paper.marker_bits(marker_id)
    side = paper.MARK_MM / 6
    places = []
    for row in range(6):
        col = 0
        while col < 6:
            if bits[6 * row + col] == "0":
                end = col
                while end < 6 and bits[6 * row + end] == "0":
                    end += 1
                square = f"rect(width: {(end - col) * side:.4f}mm, height: {side:.4f}mm, fill: white, stroke: none)"
                places.append(f"place(dx: {col * side:.4f}mm, dy: {row * side:.4f}mm, {square})")
                col = end
            else:
                col += 1
    return f"box(width: {paper.MARK_MM}mm, height: {paper.MARK_MM}mm, fill: black, {{ {'; '.join(places)} }})"


def _typst_paper_grid(g: paper.GridSpec) -> str:
    marks = ", ".join(typst_mark(4 * g.index + k) for k in range(4))
    return (f"#paper-grid({g.rows}, {g.cols}, {g.cell_mm}mm, {g.row_mm}mm, {'true' if g.fraction else 'false'}, "
            f"({marks}))")


def _typst_problem(p: Problem, lang: str, key: bool, space: str = "some", given: list[str] | None = None,
                   grids: dict[str, paper.GridSpec] | None = None) -> list[str]:
    level = t("worksheet.level", lang, level=p.exercise.level)
    out = [f"#problem-head({typst_string(str(p.number))}, {typst_string(p.title)}, {typst_string(level)})",
           f"#{typst_string(p.prompt)}", ""]
    out += [f"#note({typst_string(n)})" for n in p.notes]
    out += given if given is not None else _typst_math_rows([_typst_given(g) for g in p.given])
    if not key:
        out += _typst_aids(p, lang)
    chain = [f"#item-head{_item(out)}"]
    height = SPACE_HEIGHTS.get(space) if not key else None
    for index, (part, words) in enumerate(p.asks):
        ask = [f"#{typst_string(words)}", ""]
        if part.is_choice:
            for i, option in enumerate(part.options):
                ask.append(f"- {chr(ord('A') + i)}. #{typst_string(option_text(option, part, lang))}")
            ask.append("")
            if key:
                ask.append(f"#strong({typst_string(_choice_answer(part, lang))})")
            elif grids:
                ask.append(f"#note({typst_string(t('paper.write_letter', lang))})")
                ask.append(_typst_paper_grid(grids[part.name]))
            else:
                ask.append(f"#write-in({typst_string(t('worksheet.answer_line', lang))})")
        elif key:
            ask += _typst_answer(part, lang, p.exercise.kind)
        elif grids:
            ask.append(_typst_paper_grid(grids[part.name]))
        else:
            ask.append(f"#answer-grid({part.shape[0]}, {part.shape[1]}, {cell_width(part.shape[1])})")
        sticky = "true" if index + 1 < len(p.asks) or height else "false"
        chain.append(f"#item-part({sticky}, {_item(ask)})")  # a part and its boxes stay together
    if height:
        chain.append(f"#working({height}, {typst_string(t('worksheet.working', lang))})")
    if key:
        chain += _typst_steps(p.exercise, lang)
    return chain


EXP_COLUMNS = 9  # eˣ values side by side in one table of a printed sheet


def _typst_aids(p: Problem, lang: str) -> list[str]:
    out = []
    rows = exp_rows(p)
    if rows:
        caption = t("worksheet.exp_table", lang)
        if p.aids.exp_caption is not None:  # which grid: the same for every problem of the level
            caption += " " + p.aids.exp_caption.render(lang)
        out.append(f"#note({typst_string(caption)})")
        for start in range(0, len(rows), EXP_COLUMNS):  # a long grid in several rows of the page's width
            chunk = rows[start:start + EXP_COLUMNS]
            header = ", ".join(f"${_typst_cell(x)}$" for x, _ in chunk)
            values = ", ".join(f"[{v}]" for _, v in chunk)
            out.append(f"#table(columns: {len(chunk) + 1}, stroke: 0.4pt + luma(160), inset: 4pt, "
                       f"$x$, {header}, $e^x$, {values})")
    if p.aids.sqrt_dk is not None and "d_k" in p.exercise.given:
        d_k = int(p.exercise.given["d_k"])
        root = math.isqrt(d_k)
        value = str(root) if root * root == d_k else f"approx {math.sqrt(d_k):.{EXP_PLACES}f}"
        out.append(f"#note($sqrt({d_k}) = {value}$)" if root * root == d_k else f"#note($sqrt({d_k}) {value}$)")
    return out


def _typst_value(name: str, value, places: int, label: str) -> str:
    """A value of the key, labelled: its symbol (or, for a name with none, its words) = the matrix, or
    the number alone for a 1×1 value."""
    cells = key_tokens(value, places)
    shown = _typst_cell(cells[0][0]) if len(cells) == 1 and len(cells[0]) == 1 else typst_matrix(cells)
    symbol = typst_symbol(name)
    if symbol.startswith('"'):  # no mathematical symbol: say what it is in words
        return f"#{typst_string(label)} $ {shown} $"
    return f"$ {symbol} = {shown} $"


def _typst_answer(part: Part, lang: str = "en", kind: str | None = None) -> list[str]:
    if part.is_choice:
        return []
    label = t("worksheet.value_answer", lang, part=part_label(part.name, lang, kind)) if not part.prompt else \
        t("worksheet.number_answer", lang)
    return [_typst_value(part.name, part.reference, part.decimals, label)]


# Typst math this wide (typst_math's rough width) may overflow an A4 line and is measured and shrunk
# to fit: measured on every kind's steps, a line narrower than this never overflows (≤ 9.1 pt per unit
# against 482 pt of text width); measuring every line would double the compile time.
FIT_WIDTH = 50


def _typst_math(latex: str) -> str | None:
    """A display line of the screen's LaTeX in Typst math, shrunk to the page width when wider; None
    when it uses LaTeX the converter does not know."""
    try:
        math_ = latex_to_typst(latex)
    except UnsupportedLatex:
        return None
    return f"#fit($ {math_} $)" if math_.width > FIT_WIDTH else f"$ {math_} $"


def _typst_step(s: SolutionStep) -> list[str]:
    """One step as the screen shows it: its whole derivation, then one cell worked out."""
    shown = _typst_math(s.latex)
    if shown is None:  # the registry's formula and the result, as plain Typst
        step = registry.STEP_BY_NAME.get(s.name)
        formula = [f"$ {step.typst_formula} $"] if step is not None else []
        return formula + [_typst_value(s.name, s.value, s.places, s.title)]
    out = [shown]
    cell = _typst_math(s.cell) if s.cell else None
    if s.which:  # the rounded work and the value differ in a last place: which one is the answer
        out.append(f"#note({typst_string(s.which)})")
    if cell is not None:
        out.append(cell)
    return out


def _typst_steps(ex: Exercise, lang: str) -> list[str]:
    """The worked solution: every step of exercises.solve, in order, with its title and note; each step
    one block that stays with its heading (the first with the solution's own heading)."""
    steps = solution_steps(ex, lang)
    if not steps:
        return []
    choices = {p.name for p in ex.parts if p.is_choice}
    out = []
    for number, s in enumerate(steps, start=1):
        head = [f"#step-head({typst_string(t('worksheet.solution', lang))})"] if number == 1 else []
        head.append(f"#step-head({typst_string(f'{number}. {s.title}')})")
        if s.note:
            head.append(f"#block(sticky: true, note({typst_string(s.note)}))")
        out += head
        if s.name not in choices:  # a choice's answer is printed under its options, once
            out += _typst_step(s)
    return out


def to_typst(ws: Worksheet, key: bool = False) -> str:
    """The Typst source of the worksheet (key=False) or of the answer key."""
    return "".join(typst_chunks(ws, key))


def typst_chunks(ws: Worksheet, key: bool = False, sheets: Sequence[Sheet] | None = None):
    """The Typst source in pieces: the preamble, then one piece per sheet (so a big class is never one
    string in memory)."""
    lang = ws.lang
    doc_title = ws.spec.title + (" — " + t("worksheet.key_title", lang) if key else "")
    code = f"#{typst_string(t('worksheet.code', lang, code=ws.code))}" if ws.code else ""
    yield _TYPST_PREAMBLE.format(mark=paper.MARK_MM, gap=paper.GAP_MM, bottom="3.4cm" if ws.paper else "2.8cm",
                                 title=typst_string(doc_title), lang=typst_string(lang), code=code,
                                 page=f"#{typst_string(t('worksheet.page', lang))}")
    for index, sheet in enumerate(ws.sheets if sheets is None else sheets):
        out = ["#pagebreak()"] if index else []
        out += _typst_sheet_head(ws, sheet, key)
        on_paper = bool(ws.paper_pages(sheet.student)) and not key
        layout = paper.grids(sheet.exercises) if on_paper else []
        if on_paper:
            out.append(f"#note({typst_string(t('paper.how_to_write', lang))})")
        for number, ex in enumerate(sheet.exercises, start=1):
            p, given = _problem(ex, number, lang)
            grids = {g.part: g for g in layout if g.item == number - 1} if on_paper else None
            out += _typst_problem(p, lang, key, ws.space, given, grids)
        yield "\n\n".join(line for line in out if line) + "\n\n"  # one paragraph per line


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
    source = to_typst(ws, key)
    return compile_typst(source)


def compile_typst(source: str) -> bytes:
    import typst  # imported here: the compiler (a large native module) loads only to make a PDF

    data, options = compile_args(source)
    return typst.compile(data, **options)


def compile_args(source: str) -> tuple[bytes, dict]:
    """What typst.compile takes for `source`: its bytes and options (MissingFont without a CJK font)."""
    fonts: list[str] = []
    if needs_cjk(source):
        folder = cjk_font_dir()
        if folder is None:
            raise MissingFont("Chinese text needs a CJK font: install Debian's fonts-wqy-microhei "
                              f"(or fonts-noto-cjk), or set {CJK_FONT_ENV} to a folder with one")
        fonts = [str(folder)]
    return source.encode("utf-8"), {"format": "pdf", "ignore_system_fonts": True, "font_paths": fonts}
