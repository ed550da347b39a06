"""The records of a worked solution: a Step (formula, numbers substituted, result, any cell derived)
and a CellDerivation (how one cell is computed), with the helpers that make them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import latex as L
from ..i18n import Msg

Matrix = tuple[tuple[str, ...], ...]
Line = L.Line


@dataclass(frozen=True)
class CellDerivation:
    """How one cell is computed: one LaTeX block, and a sentence on why when it helps."""

    latex: str
    note: Msg | None = None


@dataclass(frozen=True, eq=False)
class Step:
    """One step of a worked solution; `value` is the reference matrix the grader uses.

    decimals: each cell to `places` decimals, in LaTeX; exact: each cell exactly (\\frac{1}{3},
    \\frac{\\sqrt{2}}{2}, e^{a}/(e^{a}+e^{b})), or None when some cell has no short exact form.
    """

    name: str  # the value's name (pipeline name, or the kind's own)
    title: Msg
    symbol: str  # LaTeX of the matrix: S, (G_A), \tilde{Z}
    lhs: str  # left side of the formula: S, or A_{ij} for a cell-wise formula
    formula: str  # right side: Q K^{\top}
    value: np.ndarray
    places: int
    decimals: Matrix
    exact: Matrix | None
    exact_cells: tuple[tuple[str | None, ...], ...]  # per cell, None where not short
    work: tuple[Line, ...] = ()  # the numbers substituted, exact where short
    work_decimal: tuple[Line, ...] = ()  # the same in decimals
    note: Msg | None = None
    derive: Callable[[int, int], CellDerivation] | None = field(default=None, repr=False)
    _memo: dict = field(default_factory=dict, repr=False)

    @property
    def latex(self) -> str:
        """The formula line: S = Q K^{\\top}."""
        return f"{self.lhs} = {self.formula}" if self.formula else self.lhs

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.value.shape)

    @property
    def approximate(self) -> bool:
        """Is some decimal shown rounded (so the result line reads ≈)?"""
        return not all(L.is_exact_decimal(d, x) for row_d, row_x in zip(self.decimals, np.atleast_2d(self.value))
                       for d, x in zip(row_d, row_x))

    def result(self, exact: bool = True) -> str:
        """The result matrix alone (a number when it is 1×1)."""
        cells = self.exact if exact and self.exact is not None else self.decimals
        return cells[0][0] if self.shape == (1, 1) else L.bmatrix(cells)

    def display(self, exact: bool = True) -> str:
        """The whole step as one aligned LaTeX block, exact forms or decimals."""
        key = ("display", exact)
        if key not in self._memo:
            lines: list[Line] = []
            if self.formula:
                lines.append((self.lhs, "=", self.formula))
            lines += self.work if exact else self.work_decimal
            last = next((lhs for lhs, _, _ in reversed(lines) if lhs), None)
            lhs = "" if last == self.symbol else self.symbol
            rel = L.APPROX if self.approximate else "="
            if exact and self.exact is not None and self.exact != self.decimals:
                lines += [(lhs, "=", self.result(True)), ("", rel, self.result(False))]
            else:
                lines.append((lhs, rel, self.result(False)))
            self._memo[key] = L.aligned(lines)
        return self._memo[key]

    def cell(self, i: int, j: int) -> CellDerivation:
        """The derivation of cell (i, j), 0-based."""
        rows, cols = self.shape
        if not (0 <= i < rows and 0 <= j < cols):
            raise IndexError(f"{self.name} is {rows}×{cols}; there is no cell ({i + 1}, {j + 1})")
        key = ("cell", i, j)
        if key not in self._memo:
            self._memo[key] = self.derive(i, j) if self.derive else self._plain_cell(i, j)
        return self._memo[key]

    def _plain_cell(self, i: int, j: int) -> CellDerivation:
        return CellDerivation(result_chain(L.cell(self.symbol, i, j), self.exact_cells[i][j],
                                           self.decimals[i][j], self.value[i, j]))

    def latex_strings(self) -> list[str]:
        """Every LaTeX string this step can show (both modes, every cell)."""
        out = [self.latex, self.display(True), self.display(False)]
        out += [self.cell(i, j).latex for i in range(self.shape[0]) for j in range(self.shape[1])]
        return out


def result_chain(lhs: str, exact: str | None, decimal: str, value: float, rounded: bool = False,
                 *middle: str | tuple[str, str]) -> str:
    """lhs = middle… = exact ≈ decimal, dropping what repeats; `rounded`: the middle used rounded numbers."""
    sides: list[str | tuple[str, str]] = list(middle)
    if exact is not None and _plain_number(exact) and not L.is_exact_decimal(exact, value):
        exact = None  # a rounded decimal is not an exact form
    if exact is not None and not rounded:
        if L.is_exact_decimal(exact, value):  # a whole or short number: nothing more to add
            return L.chain(lhs, *(sides if sides and sides[-1] == exact else [*sides, exact]))
        sides.append(exact)
    last = sides[-1] if sides else None
    last_text = last[1] if isinstance(last, tuple) else last
    if last_text != decimal:
        exact_decimal = L.is_exact_decimal(decimal, value) and not rounded
        sides.append(decimal if exact_decimal else (L.APPROX, decimal))
    return L.chain(lhs, *sides)


def make_step(name: str, title: Msg, value: np.ndarray, places: int, *, symbol: str | None = None,
              lhs: str | None = None, formula: str = "", exact_cells: Sequence[Sequence[str | None]] | None = None,
              work: Sequence[Line] = (), work_decimal: Sequence[Line] | None = None, note: Msg | None = None,
              derive: Callable[[int, int], CellDerivation] | None = None) -> Step:
    """A step for any matrix: decimals from `value`, the exact matrix kept only when every cell has one."""
    value = np.atleast_2d(np.asarray(value, dtype=float))
    if value.flags.writeable:
        value = value.copy()
        value.setflags(write=False)
    symbol = symbol or L.symbol(name)
    decimals = tuple(tuple(L.decimal(x, places) for x in row) for row in value)
    if exact_cells is None:
        exact_cells = [[None] * value.shape[1] for _ in range(value.shape[0])]
    # an "exact" cell that is a plain decimal must equal the value: a rounded number is not exact
    cells = tuple(tuple(None if c is not None and _plain_number(c) and not L.is_exact_decimal(c, x) else c
                        for c, x in zip(row, row_x)) for row, row_x in zip(exact_cells, value))
    complete = all(c is not None for row in cells for c in row)
    return Step(name=name, title=title, symbol=symbol, lhs=lhs or symbol, formula=formula, value=value,
                places=places, decimals=decimals, exact=cells if complete else None, exact_cells=cells,
                work=tuple(work), work_decimal=tuple(work if work_decimal is None else work_decimal),
                note=note, derive=derive)


def _plain_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def all_latex(steps: Iterable[Step]) -> list[str]:
    """Every LaTeX string of a solution."""
    return [s for step in steps for s in step.latex_strings()]
