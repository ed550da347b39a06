"""The one place LaTeX is made: fixed sympy printer settings, numbers, matrices, notation, step lines.

Every string here must render in KaTeX (what ``st.latex`` uses); tests/test_katex.py checks that.
sympy evaluates eagerly (``latex(2 + 3)`` is ``5``), so lines that must show the work unevaluated
(``0 \\cdot 1 + 1 \\cdot 1``) are assembled here from already-printed pieces.

Notation (the formula sheet uses the same): scores ``S = Q K^\\top``, scaled ``Z = S / \\sqrt{d_k}``,
masked ``\\tilde{Z}``, weights ``A``, output ``O``; gradients ``G_<name>`` (``G_Z`` for the scaled
scores, ``G_S`` for the scores). Cells are 1-based: ``S_{23}`` is row 2, column 3.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence

import numpy as np
import sympy

from ..core.numbers import EXP_PLACES as EXP_PLACES  # the eˣ table's places, shown here
from ..core.numbers import as_fraction, decimal_half_up
from ..core.steps import INPUT_SYMBOLS, STEPS

# ---------------------------------------------------------------- the printer

PRINTER_SETTINGS: dict = {
    "fold_short_frac": False,  # 1/3 as \frac{1}{3}, never 1 / 3
    "root_notation": True,  # x^{1/2} as \sqrt{x}
    "mul_symbol": None,  # 3 \sqrt{2}, no dot inside a number
    "ln_notation": False,
    "inv_trig_style": "abbreviated",
    "mat_delim": "[",
}
MAX_SHORT = 32  # an exact form longer than this is not "short": the decimal is shown alone


# Printing, exact forms and decimals are pure functions of a value: cached by it (sympy numbers hash by
# value), so the same numbers across steps, exercises and redraws are printed once
CACHE_SIZE = 8192


def sym(expr: sympy.Basic) -> str:
    """A sympy expression in LaTeX with the fixed settings (−∞ as -\\infty)."""
    try:
        return _sym(expr)
    except TypeError:  # unhashable (a mutable matrix): printed without the cache
        return _sym.__wrapped__(expr)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _sym(expr: sympy.Basic) -> str:
    if expr == -sympy.oo:
        return r"-\infty"
    if expr == sympy.oo:
        return r"\infty"
    return sympy.latex(expr, **PRINTER_SETTINGS)


# ---------------------------------------------------------------- numbers


def decimal(x: float, places: int) -> str:
    """x to `places` decimals, half up (0: a whole number); −∞ as -\\infty; never "-0.00"."""
    return _decimal(float(x), int(places))


@functools.lru_cache(maxsize=CACHE_SIZE)
def _decimal(x: float, places: int) -> str:
    if math.isnan(x):
        return r"\mathrm{NaN}"
    if math.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    text = f"{decimal_half_up(x, places):f}"  # half up, as a learner rounds (DESIGN §4)
    if text.startswith("-") and float(text) == 0:
        text = text[1:]
    return text


def is_exact_decimal(text: str, x: float) -> bool:
    """Does the decimal text equal x exactly (so "=" and not "≈")?"""
    if math.isinf(x) or math.isnan(x):
        return True
    try:
        return float(text) == float(x)
    except ValueError:
        return False


def to_exact(x: float) -> sympy.Expr | None:
    """A given number as an exact sympy number: ±∞, a simple fraction, or its short decimal; else None."""
    return _to_exact(float(x))


@functools.lru_cache(maxsize=CACHE_SIZE)
def _to_exact(x: float) -> sympy.Expr | None:
    if math.isinf(x):
        return -sympy.oo if x < 0 else sympy.oo
    if math.isnan(x):
        return None
    f = as_fraction(x)  # denominators up to 12: the hand-friendly numbers of every level
    if f is not None:
        return sympy.Rational(f.numerator, f.denominator)
    short = repr(x)
    if "e" not in short and len(short) <= 8:
        return sympy.Rational(short)  # a typed decimal such as 0.707 is exactly that number
    return None


def short(expr: sympy.Expr | None) -> str | None:
    """The exact form of `expr` when it is short and free of e^x; else None."""
    try:
        return _short(expr)
    except TypeError:  # unhashable: worked out without the cache
        return _short.__wrapped__(expr)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _short(expr: sympy.Expr | None) -> str | None:
    if expr is None or expr.has(sympy.exp) or expr.has(sympy.E):
        return None
    if expr.is_Rational:
        return rational(expr)
    text = sym(expr)
    return text if len(text) <= MAX_SHORT else None


def rational(q: sympy.Rational) -> str:
    """3, \\frac{1}{3}, - \\frac{1}{3}; a fraction with a large power-of-ten denominator as a decimal."""
    p, d = int(q.p), int(q.q)
    if d == 1:
        return str(p)
    if d > 12 and 10**6 % d == 0:  # every digit (:g would keep 6 significant ones: 2.583895 → 2.5839)
        return f"{p / d:.6f}".rstrip("0").rstrip(".")
    return sym(q)


def number(x: float) -> str:
    """A given number shown exactly: 2, \\frac{1}{3}, -\\infty, 0.707 (its own digits)."""
    e = to_exact(x)
    if e is not None:
        return sym(e) if not e.is_Rational else rational(e)
    return f"{float(x):.6g}"


def sqrt_dk(d_k: int) -> str:
    """\\sqrt{4} = 2, or \\sqrt{2} when the root is not whole."""
    root = math.isqrt(int(d_k))
    return rf"\sqrt{{{int(d_k)}}} = {root}" if root * root == int(d_k) else rf"\sqrt{{{int(d_k)}}}"


def exp_of(exponent: str) -> str:
    """e^{...}."""
    return f"e^{{{exponent}}}"


def frac(numerator: str, denominator: str) -> str:
    return rf"\frac{{{numerator}}}{{{denominator}}}"


# ---------------------------------------------------------------- matrices


def bmatrix(cells: Iterable[Iterable[str]]) -> str:
    """Cells already in LaTeX → \\begin{bmatrix} a & b \\\\ c & d \\end{bmatrix}.

    A cell with a fraction is set in display style: a matrix would shrink it to script size."""
    rows = [" & ".join(rf"\displaystyle {c}" if r"\frac" in c else c for c in row) for row in cells]
    return r"\begin{bmatrix} " + r" \\ ".join(rows) + r" \end{bmatrix}"


def matrix(M: np.ndarray, places: int) -> str:
    """A matrix of decimals."""
    return bmatrix([[decimal(x, places) for x in row] for row in np.atleast_2d(M)])


def matrix_exact(M: np.ndarray) -> str:
    """A given matrix shown exactly (simple fractions as \\frac, −∞ as -\\infty)."""
    return bmatrix([[number(x) for x in row] for row in np.atleast_2d(M)])


def in_space(symbol: str, shape: Sequence[int]) -> str:
    """X \\in \\mathbb{R}^{3 \\times 2}."""
    rows, cols = (tuple(shape) + (1, 1))[:2]
    return rf"{symbol} \in \mathbb{{R}}^{{{rows} \times {cols}}}"


# ---------------------------------------------------------------- notation

# the symbol of every value: the given ones, then each step's own (exercises.core.steps)
SYMBOLS: dict[str, str] = {**INPUT_SYMBOLS, **{step.name: step.symbol for step in STEPS}}


SHARED = frozenset({"X", "E", "d_k", "token_ids", "G_X", "G_E"})  # the same for every head: never tagged


def symbol(name: str, tag: str | None = None) -> str:
    """The LaTeX symbol of a value name (W_Q1 → W_{Q1}); `tag` marks a head's own value: Q^{(1)}."""
    if name in SYMBOLS:
        base = SYMBOLS[name]
    else:
        head, _, tail = name.partition("_")
        base = f"{head}_{{{tail}}}" if tail else name
    return f"{base}^{{({tag})}}" if tag and name not in SHARED else base


def index(i: int, j: int | None = None) -> str:
    """1-based subscript from 0-based indices: 23, or 2,11 when an index has two digits."""
    if j is None:
        return str(i + 1)
    sep = "," if max(i, j) >= 9 else ""
    return f"{i + 1}{sep}{j + 1}"


def entry(symbol_: str, subscript: str) -> str:
    """A_{ik}, A^{(1)}_{ik}, (G_A)_{ik}: a symbol that already carries a subscript gets parentheses."""
    base = f"({symbol_})" if "_" in symbol_ else symbol_
    return f"{base}_{{{subscript}}}"


def cell(symbol_: str, i: int, j: int | None = None) -> str:
    """S_{23}: cell (i, j) given 0-based, shown 1-based."""
    return entry(symbol_, index(i, j))


def row_vector(symbol_: str, i: int) -> str:
    """q_{2}: row i of Q as a lowercase vector."""
    head, sup = symbol_, ""
    if "^" in symbol_:
        head, _, rest = symbol_.partition("^")
        sup = "^" + rest
    return f"{head.lower()}{sup}_{{{index(i)}}}"


def transposed(symbol_: str) -> str:
    r"""K^{\top}; W_Q^{\top} for subscripted symbols; (K^{(1)})^{\top} when a superscript is there."""
    if "^" in symbol_:
        return rf"({symbol_})^{{\top}}"
    return rf"{symbol_}^{{\top}}"


# ---------------------------------------------------------------- step lines


def paren(term: str) -> str:
    """Parenthesise a negative term: (-1), \\left(- \\frac{1}{3}\\right)."""
    if not term.startswith("-") or term == r"-\infty":
        return term
    return rf"\left({term}\right)" if "\\" in term else f"({term})"


def product(*factors: str) -> str:
    """a \\cdot b \\cdot c, negatives in parentheses."""
    return r" \cdot ".join(paren(f) for f in factors)


def total(terms: Sequence[str]) -> str:
    """a + b + c (0 when there are no terms)."""
    return " + ".join(terms) if terms else "0"


def chain(first: str, *rest: str | tuple[str, str]) -> str:
    """first = b = c ≈ d: each later side is text (joined with =) or (relation, text)."""
    out = first
    for side in rest:
        rel, text = side if isinstance(side, tuple) else ("=", side)
        out += f" {rel} {text}"
    return out


Line = tuple[str, str, str]  # (left side, relation, right side) of one aligned line; "" continues


def aligned(lines: Sequence[Line]) -> str:
    """Lines aligned on their relation signs, in one KaTeX-safe block."""
    body = r" \\ ".join(f"{lhs} &{rel} {rhs}" for lhs, rel, rhs in lines)
    return r"\begin{aligned} " + body + r" \end{aligned}"


APPROX = r"\approx"
