"""ui.mathview: the page's copy of a fraction matrix gets room between its rows, and still renders.

The browser measures the room (tests/e2e/test_a11y_layout.py); here, every string the kinds show, once
spaced, renders in KaTeX as st.latex does, and a matrix without a fraction is left as it was.
"""

from __future__ import annotations

import exercises
from tests.test_katex import katex_errors, strings_for
from ui.mathview import ROW_GAP, spaced


def test_only_fraction_matrices_change():
    plain = r"A = \begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}"
    assert spaced(plain) == plain
    shown = spaced(r"A = \begin{bmatrix} \frac{1}{2} & 1 \\ 0 & \frac{3}{2} \\ 1 & 1 \end{bmatrix} + \frac{1}{2}")
    assert shown.count(rf"\\[{ROW_GAP}]") == 2 and r"\arraystretch" in shown


def test_every_spaced_string_renders_in_katex():
    items = [(ident, spaced(latex)) for kind in exercises.KINDS for ident, latex in strings_for(kind)
             if spaced(latex) != latex]
    assert items, "some strings hold fraction matrices"
    failures, summary = katex_errors(items)
    assert not failures, failures[:5]
    assert summary["checked"] == len(items)
