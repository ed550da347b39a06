"""How an exercise's given values are shown: exact, small, in LaTeX (rendered by st.latex / KaTeX)."""

from __future__ import annotations

import numpy as np

from .model import Exercise
from .numbers import as_fraction

SYMBOLS = {
    "X": "X", "E": "E", "W_Q": "W_Q", "W_K": "W_K", "W_V": "W_V", "W_O": "W_O", "Q": "Q", "K": "K",
    "V": "V", "scores": "S = QK^{\\top}", "scaled": "\\tfrac{S}{\\sqrt{d_k}}", "masked": "\\text{masked}",
    "A": "A", "O": "O", "G_O": "G_O", "G_A": "G_A", "G_V": "G_V", "G_scaled": "G_{\\text{scaled}}",
    "G_scores": "G_S", "G_Q": "G_Q", "G_K": "G_K", "G_X": "G_X", "G_W_Q": "G_{W_Q}",
    "G_W_K": "G_{W_K}", "G_W_V": "G_{W_V}", "G_E": "G_E",
}


def symbol(name: str) -> str:
    """The LaTeX symbol of a value name (W_Q1 → W_{Q1}, d_k → d_k)."""
    if name in SYMBOLS:
        return SYMBOLS[name]
    head, _, tail = name.partition("_")
    return f"{head}_{{{tail}}}" if tail else name


def number_latex(x: float) -> str:
    """An exact short form: integers, simple fractions, −∞; else up to 4 decimals."""
    if np.isneginf(x):
        return "-\\infty"
    if np.isposinf(x):
        return "\\infty"
    f = as_fraction(x)
    if f is not None:
        if f.denominator == 1:
            return str(f.numerator)
        sign = "-" if f < 0 else ""
        return f"{sign}\\tfrac{{{abs(f.numerator)}}}{{{f.denominator}}}"
    return f"{x:.4f}".rstrip("0").rstrip(".")


def matrix_latex(M: np.ndarray) -> str:
    rows = [" & ".join(number_latex(x) for x in row) for row in np.atleast_2d(M)]
    return "\\begin{bmatrix} " + " \\\\ ".join(rows) + " \\end{bmatrix}"


def given_latex(ex: Exercise) -> list[tuple[str, str]]:
    """[(name, LaTeX line)] for each given matrix, vector and number worth showing."""
    lines = []
    for name, value in ex.given.items():
        if isinstance(value, np.ndarray) and value.ndim == 2:
            lines.append((name, f"{symbol(name)} = {matrix_latex(value)}"))
        elif isinstance(value, np.ndarray) and value.ndim == 1:
            lines.append((name, f"\\text{{{name.replace('_', ' ')}}} = ({', '.join(number_latex(x) for x in value)})"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            lines.append((name, f"{symbol(name)} = {number_latex(float(value))}"))
    return lines
