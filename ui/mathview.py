"""Display LaTeX on a page: every matrix that holds a fraction gets room between its rows.

KaTeX stacks a matrix's rows with no gap, so in a column of display-style fractions each row's
denominator runs into the next row's numerator, and the first numerator touches the bracket's hook
(softmax level 3 seed 103, weighted_sum level 3 seed 5). The strings stay as the kinds
write them (the worksheets typeset them in Typst, where rows never touch); only the page's copy gets
`\\arraystretch` and a gap after each row.

    show(r"A = \\begin{bmatrix} \\frac{1}{2} & 1 \\\\ 0 & \\frac{3}{2} \\end{bmatrix}")
"""

from __future__ import annotations

import re

import streamlit as st

ROW_GAP = "0.8em"  # after each row of a fraction matrix
STRETCH = "1.4"  # KaTeX's row strut, times this: room above the first row's numerators too
TABLE_GAP = "0.3em"  # after each row of an array (a table, the eˣ aid): its fractions are small
_MATRIX = re.compile(r"\\begin\{(bmatrix|pmatrix|vmatrix|Bmatrix|matrix|array)\}(.*?)\\end\{\1\}", re.S)
_ROW_BREAK = re.compile(r"\\\\(?!\s*\[)")  # a row break without a gap of its own


def spaced(latex: str) -> str:
    """`latex` with room between the rows of every matrix that holds a \\frac (others unchanged)."""
    def widen(match: re.Match[str]) -> str:
        env, body = match.group(1), match.group(2)
        if r"\frac" not in body:
            return match.group(0)
        gap = TABLE_GAP if env == "array" else ROW_GAP
        body = _ROW_BREAK.sub(lambda _: rf"\\[{gap}]", body)
        if env == "array":
            return rf"\begin{{array}}{body}\end{{array}}"
        return rf"{{\def\arraystretch{{{STRETCH}}}\begin{{{env}}}{body}\end{{{env}}}}}"
    return _MATRIX.sub(widen, latex)


def show(latex: str) -> None:
    """st.latex of `latex` with its fraction matrices spaced."""
    st.latex(spaced(latex))
