"""The records of a worked solution: a Step (formula, numbers substituted, result, any cell derived)
and a CellDerivation (how one cell is computed), with the helpers that make them."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from ..core.numbers import decimal_half_up
from ..i18n import Msg
from ..rendering import latex as L

Matrix = tuple[tuple[str, ...], ...]
Line = L.Line


@dataclass(frozen=True)
class Number:
    """A number as a line shows it: its LaTeX, and the value that text stands for (a Fraction when
    rational: 0.21 is 21/100, \\frac{1}{3} is 1/3; a float for √2 and the like)."""

    text: str
    value: Fraction | float
    rounded: bool = False  # the text rounds the value it stands in for (0.21 for 0.2119…)


FORMS = ("sum", "quotient", "times_difference", "difference_quotient")


@dataclass(frozen=True)
class Substitution:
    """One substituted line as data (the LaTeX is rendered from it): the shown numbers, how they
    combine, and the result shown, which is what those numbers give (half up to `places`).

    form "sum": Σ_k Π terms[k]; "quotient": Π terms[0] / Σ terms[1]; "times_difference":
    terms[0][0] · (terms[1][0] − terms[1][1]); "difference_quotient": (terms[0][0] − terms[0][1]) / terms[1][0].
    result: the shown result (a decimal to `places`, or an exact form when `places` is None);
    rounded: some shown number is rounded, so the line reads ≈ and the exact value is shown beside."""

    form: str
    terms: tuple[tuple[Number, ...], ...]
    result: str
    places: int | None
    rounded: bool = False
    exact_beside: bool = False  # the exact value is shown beside (its rounding differs from `result`)

    def computed(self) -> Fraction | float:
        return evaluate(self.form, [[n.value for n in group] for group in self.terms])


def evaluate(form: str, groups: Sequence[Sequence[Fraction | float]]) -> Fraction | float:
    """What the shown numbers give (exactly when they are all rational)."""
    def prod(xs):
        out: Fraction | float = Fraction(1)
        for x in xs:
            out = out * x
        return out

    if form == "sum":
        return sum((prod(g) for g in groups), Fraction(0))
    if form == "quotient":
        return prod(groups[0]) / sum(groups[1], Fraction(0))
    if form == "times_difference":
        return groups[0][0] * (groups[1][0] - groups[1][1])
    if form == "difference_quotient":
        return (groups[0][0] - groups[0][1]) / groups[1][0]
    raise ValueError(form)


def number(text: str, value=None, rounded: bool = False) -> Number:
    """A shown number: its text, and the value it stands for (the text's own digits for a decimal;
    `value`, an exact sympy number or a float, otherwise); `rounded`: the text rounds a value."""
    try:
        return Number(text, Fraction(text), rounded)
    except ValueError:
        pass
    if value is not None and getattr(value, "is_Rational", False):
        return Number(text, Fraction(int(value.p), int(value.q)), rounded)
    return Number(text, float(value), rounded)


def long_decimal(x: Fraction | float, places: int) -> str:
    """x in full when its decimals end within places + 4 digits (0.1218), else to places + 2 with … ."""
    for p in range(places, places + 5):
        d = decimal_half_up(x, p)
        if Fraction(d) == (x if isinstance(x, Fraction) else Fraction(repr(float(x)))):
            return L.decimal(float(d), p)
    return L.decimal(float(decimal_half_up(x, places + 2)), places + 2) + r"\ldots"


def substitution(form: str, terms: Sequence[Sequence[Number]], places: int) -> Substitution:
    """The record of a line substituting rounded numbers: its result is what they give, half up."""
    value = evaluate(form, [[n.value for n in g] for g in terms])
    text = L.decimal(float(decimal_half_up(value, places)), places)
    return Substitution(form, tuple(tuple(g) for g in terms), text, places, True)


def worked_chain(lhs: str, exact: str | None, value: float, places: int, numbers: str,
                 form: str, terms: Sequence[Sequence[Number]], *middle: str | tuple[str, str]
                 ) -> tuple[str, Substitution]:
    """lhs = middle… = numbers = result, its Substitution record.

    Exact inputs: the result chain as ever (= exact ≈ decimal). Rounded inputs (the values a learner
    writes and carries): ≈ numbers = what they give (≈ it to `places`, half up); where that differs
    from the exact value's rounding, the exact value in brackets:
    ``O_{31} ≈ 0.21·0 + 0.58·(−2) + 0.21·2 = −0.74  (O_{31} = −0.7284… ≈ −0.73)``."""
    rounded = any(not _exact_number(n) for g in terms for n in g)
    decimal = L.decimal(value, places)
    if not rounded:
        text = result_chain(lhs, exact, decimal, value, False, *middle, ("=", numbers))
        if exact is not None and _plain_number(exact) and not L.is_exact_decimal(exact, value):
            exact = None  # a rounded decimal is no exact form: result_chain shows the decimal instead
        shown = exact if exact is not None and _plain_number(exact) else decimal
        shown_places = None if exact is not None and shown == exact else places
        return text, Substitution(form, tuple(tuple(g) for g in terms), shown, shown_places)
    sub = substitution(form, terms, places)
    computed = sub.computed()
    exactly = Fraction(sub.result) == computed if isinstance(computed, Fraction) else False
    if sub.result == decimal:  # the rounded numbers give the reference's own rounding
        return L.chain(lhs, *middle, (L.APPROX, numbers), ("=" if exactly else L.APPROX, sub.result)), sub
    full = long_decimal(computed, places)
    sides: list[str | tuple[str, str]] = [*middle, (L.APPROX, numbers), ("=", full)]
    if full != sub.result:
        sides.append((L.APPROX, sub.result))
    return (L.chain(lhs, *sides) + r" \quad " + exact_aside(lhs, exact, value, places),
            replace(sub, exact_beside=True))


def exact_aside(lhs: str, exact: str | None, value: float, places: int) -> str:
    """(lhs = exact = 0.7345… ≈ 0.73): the exact value beside a line computed from rounded numbers."""
    if math.isinf(value):
        return rf"\left({lhs} = {L.decimal(value, places)}\right)"
    long = long_decimal(Fraction(repr(float(value))), places)
    sides: list[str | tuple[str, str]] = []
    if exact is not None and not _plain_number(exact):
        sides.append(exact)
    sides.append((L.APPROX, long) if long.endswith(r"\ldots") and sides else long)
    decimal = L.decimal(value, places)
    if long != decimal:
        sides.append((L.APPROX, decimal))
    return r"\left(" + L.chain(lhs, *sides) + r"\right)"


def _exact_number(n: Number) -> bool:
    return not n.rounded


@dataclass(frozen=True)
class CellDerivation:
    """How one cell is computed: one LaTeX block, and a sentence on why when it helps.

    substitutions: every substituted line of the block as data (what a test recomputes)."""

    latex: str
    note: Msg | None = None
    substitutions: tuple[Substitution, ...] = ()


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
    # the work's result from its rounded operands (each cell half up), and those lines as data
    work_result: Matrix | None = None
    work_substitutions: tuple[Substitution, ...] = ()
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
            # what the rounded numbers give (where this mode shows them), then the exact value
            if self.work_result is not None and (not exact or self.work == self.work_decimal):
                same = all(float(c) == float(v) for row, vrow in zip(self.work_result, self._work_values())
                           for c, v in zip(row, vrow))
                lines.append(("", "=" if same else L.APPROX, L.bmatrix(self.work_result)
                              if self.shape != (1, 1) else self.work_result[0][0]))
                lhs = self.symbol
            rel = L.APPROX if self.approximate else "="
            if exact and self.exact is not None and self.exact != self.decimals:
                lines += [(lhs, "=", self.result(True)), ("", rel, self.result(False))]
            else:
                lines.append((lhs, rel, self.result(False)))
            self._memo[key] = L.aligned(lines)
        return self._memo[key]

    def _work_values(self) -> list[list[Fraction | float]]:
        cols = self.shape[1]
        values = [s.computed() for s in self.work_substitutions]
        return [values[r * cols:(r + 1) * cols] for r in range(self.shape[0])]

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


class DeferredStep:
    """A Step built on first use: its name and shape are known at once, everything else (the exact
    forms, the LaTeX, the substituted lines) is built, once, when first asked for. solve() returns these
    for the walk's steps, so a solution that is never shown costs only the walk."""

    __slots__ = ("name", "shape", "_build", "_step")

    def __init__(self, name: str, shape: tuple[int, int], build: Callable[[], Step]):
        self.name, self.shape, self._build, self._step = name, tuple(shape), build, None

    def built(self) -> Step:
        """The Step itself (built now if it was not yet)."""
        step = self._step
        if step is None:  # two threads may both build it: the same step, either one kept
            step = self._build()
            if step.shape != self.shape or step.name != self.name:
                raise AssertionError(f"deferred step {self.name} {self.shape} built as {step.name} {step.shape}")
            self._step = step
        return step

    def __getattr__(self, attr: str):  # only what is not found on the proxy itself
        if attr in DeferredStep.__slots__ or attr.startswith("__"):
            raise AttributeError(attr)  # an unset slot or a protocol probe (copy, pickle): no build, no recursion
        return getattr(self.built(), attr)

    def __repr__(self) -> str:
        return f"DeferredStep({self.name!r}, {self.shape})" if self._step is None else repr(self._step)


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
              derive: Callable[[int, int], CellDerivation] | None = None,
              work_substitutions: Sequence[Substitution] = ()) -> Step:
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
                note=note, derive=derive, work_result=_work_result(work_substitutions, value.shape),
                work_substitutions=tuple(work_substitutions))


def _work_result(subs: Sequence[Substitution], shape: tuple[int, int]) -> Matrix | None:
    """The matrix the rounded work gives (None when the work's numbers are exact: the result is the value)."""
    if not subs or not any(s.rounded for s in subs):
        return None
    cols = shape[1]
    return tuple(tuple(s.result for s in subs[r * cols:(r + 1) * cols]) for r in range(shape[0]))


def work_substitutions(numbers_left: Sequence[Sequence[Number]], numbers_right: Sequence[Sequence[Number]],
                       places: int) -> list[Substitution]:
    """Each cell of L R from the shown operands (left (n, m), right (m, p), as shown), row by row."""
    inner = len(numbers_right)
    return [line_record("sum", [(row[k], numbers_right[k][j]) for k in range(inner)], places)
            for row in numbers_left for j in range(len(numbers_right[0]))]


def line_record(form: str, terms: Sequence[Sequence[Number]], places: int) -> Substitution:
    """A line's record, its result half up to `places`; `rounded` when some shown number is."""
    sub = substitution(form, terms, places)
    return sub if any(n.rounded for g in terms for n in g) else replace(sub, rounded=False)


def _plain_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def all_latex(steps: Iterable[Step]) -> list[str]:
    """Every LaTeX string of a solution."""
    return [s for step in steps for s in step.latex_strings()]
