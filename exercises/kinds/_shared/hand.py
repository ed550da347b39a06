"""Worked steps for the kinds outside the step pipeline: a matrix product written out cell
by cell from the numbers as shown, and those numbers (given exactly, or carried as a learner writes
them: to the part's decimals). Imported lazily by the kinds (it pulls in sympy through exercises.rendering.latex).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import sympy

from ... import solutions
from ...core import misconceptions
from ...core.model import Part
from ...i18n import Msg
from ...rendering import latex as L

Grid = Sequence[Sequence[solutions.Number]]


def exact_number(x) -> solutions.Number:
    """An exact sympy number (a fraction, √3/2 …) as shown, with the value it stands for."""
    x = sympy.nsimplify(x) if not isinstance(x, sympy.Basic) else x
    text = L.rational(x) if x.is_Rational else L.sym(x)
    return solutions.number(text, x if x.is_Rational else float(x))


def carried(x: float, places: int) -> solutions.Number:
    """A value of an earlier part as a learner writes it: whole numbers whole, short exact decimals as
    they are, anything else to `places` decimals (rounded)."""
    x = float(x)
    if x.is_integer():
        return solutions.number(str(int(x)))
    text = L.decimal(x, places)
    return solutions.number(text, None, not L.is_exact_decimal(text, x))


def carried_grid(M: np.ndarray, places: int) -> list[list[solutions.Number]]:
    return [[carried(x, places) for x in row] for row in np.atleast_2d(M)]


def given_grid(M: np.ndarray) -> list[list[solutions.Number]]:
    """A given matrix as L.number shows it (exactly: small whole numbers and fractions)."""
    return [[solutions.number(L.number(float(x)), L.to_exact(float(x))) for x in row] for row in np.atleast_2d(M)]


def exact_cells(E: sympy.Matrix | None, shape: tuple[int, int]) -> list[list[str | None]]:
    """Short exact forms of a sympy matrix's cells (None where long, or without E)."""
    if E is None:
        return [[None] * shape[1] for _ in range(shape[0])]
    return [[L.short(sympy.nsimplify(E[i, j])) for j in range(shape[1])] for i in range(shape[0])]


def product_step(name: str, title: Msg, value: np.ndarray, places: int, *, symbol: str, formula: str,
                 left: Grid, right: Grid, left_symbol: str, right_symbol: str, note: Msg | None = None,
                 exact: sympy.Matrix | None = None, cell_note: Msg | None = None) -> solutions.Step:
    """value = left · right, written from the shown numbers: the matrices side by side, and any cell
    as Σ_k left_ik right_kj with the numbers put in (what rounded numbers give, the exact value beside).
    `left_symbol`/`right_symbol`: the LaTeX of the operands' entries (K^{\\top} for a transpose)."""
    value = np.atleast_2d(np.asarray(value, dtype=float))
    inner = len(right)
    rounded = any(n.rounded for row in (*left, *right) for n in row)
    texts = [[n.text for n in row] for row in left], [[n.text for n in row] for row in right]
    work = [("", L.APPROX if rounded else "=", f"{L.bmatrix(texts[0])} {L.bmatrix(texts[1])}")]
    subs = solutions.records.work_substitutions(left, right, places)
    cells = exact_cells(exact, value.shape)

    def derive(i: int, j: int) -> solutions.CellDerivation:
        pairs = [(left[i][k], right[k][j]) for k in range(inner)]
        symbolic = rf"\sum_{{k}} {L.entry(left_symbol, f'{L.index(i)}k')} {L.entry(right_symbol, f'k{L.index(j)}')}"
        latex, sub = solutions.worked_chain(L.cell(symbol, i, j), cells[i][j], value[i, j], places,
                                            L.total([L.product(a.text, b.text) for a, b in pairs]), "sum", pairs,
                                            symbolic)
        return solutions.CellDerivation(latex, cell_note, (sub,))

    return solutions.make_step(name, title, value, places, symbol=symbol, formula=formula, work=work,
                               exact_cells=cells, note=note, derive=derive, work_substitutions=subs)


def own_diagnosis(part: Part, value: np.ndarray, mistakes: dict[str, np.ndarray]) -> str | None:
    """The first of a kind's own `mistakes` ({id: what it gives for `part`}) that `value` matches and
    the answer does not."""
    tolerance = max(part.tolerance, misconceptions.DIAGNOSIS_TOLERANCE)
    for mid, alt in mistakes.items():
        if np.shape(alt) == part.shape and not misconceptions.matches(alt, part.reference, tolerance) \
                and misconceptions.matches(value, alt, tolerance):
            return mid
    return None


def all_apart(parts: Sequence[Part], mistakes_of) -> bool:
    """Every part's own mistakes differ from its answer and from each other (rounded to 2 decimals too);
    `mistakes_of(part)` gives {id: value}."""
    return not any(misconceptions.clashes(p.reference, mistakes_of(p), misconceptions.separation(p)) for p in parts)
