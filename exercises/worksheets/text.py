"""Markdown and LaTeX source of a worksheet or its answer key: the same content, two syntaxes, the
maths in LaTeX as the screen shows it."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.model import Exercise, Part
from ..i18n import escape, t
from ..rendering import latex
from .model import (
    Given,
    Problem,
    Token,
    Worksheet,
    _choice_answer,
    _token,
    _tokens,
    key_tokens,
    option_text,
    problem,
    solution_steps,
)


def tex_escape(text: str) -> str:
    """User or catalog text in a .tex worksheet's body: exercises.i18n.escape.latex_text (the one rule)."""
    return escape.latex_text(text)


def md_escape(text: str) -> str:
    """User or catalog text in a Markdown worksheet: exercises.i18n.escape.markdown_file (the one rule)."""
    return escape.markdown_file(text)


def _latex_cell(token: Token) -> str:
    kind = token[0]
    if kind == "inf":
        return rf"{token[1]}\infty"
    if kind == "frac":
        return f"{token[1]}{latex.frac(token[2], token[3])}"
    if kind == "decfrac":  # the decimal asked for, its exact fraction beside
        return rf"{token[1]}\ \left({token[2]}\tfrac{{{token[3]}}}{{{token[4]}}}\right)"
    return token[1]


def _latex_matrix(cells: Sequence[Sequence[Token]]) -> str:
    return latex.bmatrix([[_latex_cell(c) for c in row] for row in cells])


def latex_given(g: Given) -> str:
    sym = latex.symbol(g.name)
    if g.kind == "matrix":
        factor = f"{g.unit.latex} \\cdot " if g.unit is not None else ""
        return f"{sym} = {factor}{_latex_matrix(_tokens(g.value))}"
    if g.kind == "vector":
        unit = r"^{\circ}" if g.degrees else ""
        return f"{sym} = ({', '.join(_latex_cell(_token(x, None)) + unit for x in g.value)})"
    return f"{sym} = {_latex_cell(_token(g.value, None))}"


def _latex_answer(part: Part) -> str:
    return f"{latex.symbol(part.name)} = {_latex_matrix(key_tokens(part.reference, part.decimals))}"


def _aids_latex(p: Problem) -> list[str]:
    return [s for s in (p.aids.table_latex(), p.aids.sqrt_dk) if s]


def _display(math_: str, fmt: str) -> list[str]:
    return [r"\[ " + math_ + r" \]"] if fmt == "tex" else ["$$", math_, "$$"]


def _heading(text: str, level: int, fmt: str) -> str:
    if fmt == "tex":
        return (r"\section*{" if level == 1 else r"\subsection*{") + tex_escape(text) + "}"
    return "#" * level + " " + md_escape(text)


def _doc_lines(ws: Worksheet, key: bool, fmt: str) -> list[str]:
    """The Markdown or LaTeX body: the same content, two syntaxes."""
    lang = ws.lang
    tex = fmt == "tex"
    esc = tex_escape if tex else md_escape
    out: list[str] = []
    for index, sheet in enumerate(ws.sheets):
        if index:
            out.append(r"\newpage" if tex else "\n---\n")
        title = ws.spec.title + (" — " + t("worksheet.key_title", lang) if key else "")
        out += [_heading(title, 1, fmt), ""]
        if sheet.student is not None:
            out += [esc(t("worksheet.student", lang, name=sheet.student)), ""]
        elif not key:
            out += [esc(t("worksheet.name_line", lang)) + (r" \rule{6cm}{0.4pt}" if tex else " ______________"), ""]
        if ws.code:
            out += [esc(t("worksheet.code", lang, code=ws.code)), ""]
        for number, ex in enumerate(sheet.exercises, start=1):
            out += _problem_lines(ex, number, lang, key, fmt)
    return out


def _problem_lines(ex: Exercise, number: int, lang: str, key: bool, fmt: str) -> list[str]:
    """One problem in Markdown or LaTeX: its heading, statement, given values, aids and what to find
    (with the answer key: the answers and the worked solution)."""
    tex = fmt == "tex"
    esc = tex_escape if tex else md_escape

    def display(math_: str) -> list[str]:
        return _display(math_, fmt)

    out: list[str] = []
    p = problem(ex, number, lang)
    level = t("worksheet.level", lang, level=ex.level)
    out += [_heading(f"{number}. {p.title} ({level})", 2, fmt), "", esc(p.prompt), ""]
    for n in p.notes:
        out += [(r"\emph{" + esc(n) + "}") if tex else f"*{esc(n)}*", ""]
    if p.given:
        out += display(r",\qquad ".join(latex_given(g) for g in p.given)) + [""]
    if not key:
        for aid in _aids_latex(p):
            out += display(aid) + [""]
    for part, words in p.asks:
        out += [esc(words), ""]
        if part.is_choice:
            for i, option in enumerate(part.options):
                out.append(("\\quad " if tex else "- ") + f"{chr(ord('A') + i)}. "
                           + esc(option_text(option, part, lang)) + (r"\\" if tex else ""))
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
            if s.which:
                out += [esc(s.which), ""]
            if s.cell:
                out += display(s.cell) + [""]
    return out


def problem_latex(ex: Exercise, lang: str) -> str:
    """One problem as LaTeX source to copy: its statement, given values, aids and what to find (no
    answers), as a .tex worksheet prints it."""
    return "\n".join(_problem_lines(ex, 1, lang, key=False, fmt="tex")).rstrip() + "\n"


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
