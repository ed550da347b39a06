"""What a learner needs beside the problem: the eˣ table, √d_k, the shapes and the given values in LaTeX.

The eˣ table is a fixed grid for the kind and level (its EXP_GRID), the same for every problem of that
level: it never lists exactly the exponents a problem needs (in an exam it is the one aid kept, and that
list would give part of the answer away). Its steps are those of the level's exponents (¼, ½ or 1; √2/2
where d_k = 2 makes them multiples of √2/2), so each exponent a problem needs is read off, not
interpolated."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import sympy

from ..core.model import Exercise
from ..i18n import Msg, msg
from ..rendering import latex as L
from .builders import _token_list
from .context import Context
from .exact import SCALES
from .walk import CACHE_SIZE, exercise_context


@dataclass(frozen=True)
class ExpEntry:
    """One row of the eˣ table."""

    x: float
    exponent: str  # LaTeX of x, exact where short
    x_decimal: str
    value: float  # e^x
    latex: str  # e^{\frac{\sqrt{2}}{2}} \approx 2.028


@dataclass(frozen=True)
class ExpSeries:
    """Part of a fixed eˣ grid: x = k · (num/den) · √root for every whole k from lo to hi."""

    num: int
    den: int
    lo: int
    hi: int
    root: int = 1

    @property
    def step(self) -> sympy.Expr:
        return sympy.Rational(self.num, self.den) * sympy.sqrt(self.root)

    def xs(self) -> list[sympy.Expr]:
        return [k * self.step for k in range(self.lo, self.hi + 1)]

    def caption(self) -> Msg:
        """In words: x from … to … in steps of … (plain text, as a student writes it)."""
        return msg("aids.exp_series", lo=_plain(self.lo * self.step), hi=_plain(self.hi * self.step),
                   step=_plain(self.step))


def _plain(x: sympy.Expr) -> str:
    """A grid value as plain text: −3/2, 3√2/4."""
    text = str(x).replace("sqrt(", "√").replace(")", "").replace("*", "")
    return text.replace("-", "−")


@dataclass(frozen=True)
class Aids:
    """What a learner needs to compute by hand: e^x on the level's fixed grid, √d_k, shapes."""

    exp_table: tuple[ExpEntry, ...] = ()
    sqrt_dk: str | None = None  # \sqrt{d_k} = \sqrt{2} \approx 1.414
    shapes: tuple[tuple[str, tuple[int, int], str], ...] = ()  # (name, shape, X \in \mathbb{R}^{3 \times 2})
    exp_caption: Msg | None = None  # what the eˣ table lists, in words

    def table_latex(self) -> str | None:
        """The eˣ table as a KaTeX array, or None when no exponential is needed."""
        if not self.exp_table:
            return None
        rows = [rf"{e.exponent} & {L.decimal(e.value, L.EXP_PLACES)}" if L.is_exact_decimal(e.exponent, e.x) else
                rf"{e.exponent} {L.APPROX} {e.x_decimal} & {L.decimal(e.value, L.EXP_PLACES)}" for e in self.exp_table]
        return r"\begin{array}{c|c} x & e^{x} \\ \hline " + r" \\ ".join(rows) + r" \end{array}"

    def latex_strings(self) -> list[str]:
        out = [e.latex for e in self.exp_table] + [s for _, _, s in self.shapes]
        out += [s for s in (self.table_latex(), self.sqrt_dk) if s]
        return out


def _exp_entries(ctx: Context) -> tuple[ExpEntry, ...]:
    z = ctx.val("masked") if "masked" in ctx.values else ctx.val("scaled")
    seen: dict[float, ExpEntry] = {}
    for (i, j), x in np.ndenumerate(z):
        if not np.isfinite(x) or round(float(x), 9) in seen:
            continue
        exact = ctx.xcell("masked", i, j) if "masked" in ctx.exact else ctx.xcell("scaled", i, j)
        x_dec = L.decimal(x, L.EXP_PLACES)
        exponent = exact if exact is not None else x_dec
        value = math.exp(float(x))
        seen[round(float(x), 9)] = ExpEntry(float(x), exponent, x_dec, value,
                                            rf"{L.exp_of(exponent)} {L.APPROX} {L.decimal(value, L.EXP_PLACES)}")
    return tuple(e for _, e in sorted(seen.items()))


def _entry(x: sympy.Expr) -> ExpEntry:
    exponent, value = L.sym(x), math.exp(float(x))
    x_dec = L.decimal(float(x), L.EXP_PLACES)
    shown = rf"{L.exp_of(exponent)} {L.APPROX} {L.decimal(value, L.EXP_PLACES)}"
    return ExpEntry(float(x), exponent, x_dec, value, shown)


@functools.cache
def grid_table(series: tuple[ExpSeries, ...]) -> tuple[tuple[ExpEntry, ...], Msg]:
    """The fixed eˣ table of a grid (each x once, in order) and its caption."""
    xs = {round(float(x), 9): x for s in series for x in s.xs()}
    entries = tuple(_entry(x) for _, x in sorted(xs.items()))
    parts = [s.caption() for s in series]
    listed = parts[0]
    for more in parts[1:]:
        listed = msg("aids.exp_series_and", first=listed, rest=more)
    return entries, msg("aids.exp_grid", series=listed)


def exp_grid(kind: str, level: int) -> tuple[tuple[ExpEntry, ...], Msg] | None:
    """The kind's fixed eˣ table for `level` (its EXP_GRID), or None when it declares none."""
    from ..core import engine  # imported here: the kinds import this package

    grids = getattr(engine.KINDS.get(kind), "EXP_GRID", None) or {}
    return grid_table(tuple(grids[level])) if level in grids else None


def fixed_table(ex: Exercise, needed: tuple[ExpEntry, ...]) -> Aids:
    """The level's fixed eˣ grid in place of the exponents the problem needs (when it needs any)."""
    grid = exp_grid(ex.kind, ex.level) if needed else None
    if grid is None:
        return Aids(exp_table=needed)
    return Aids(exp_table=grid[0], exp_caption=grid[1])


def _sqrt_aid(d_k: int) -> str:
    if math.isqrt(d_k) ** 2 == d_k:
        return L.sqrt_dk(d_k)
    inverse = L.sym(1 / sympy.sqrt(d_k))
    return (rf"\sqrt{{{d_k}}} {L.APPROX} {L.decimal(math.sqrt(d_k), L.EXP_PLACES)}, \quad "
            rf"\frac{{1}}{{\sqrt{{{d_k}}}}} = {inverse} {L.APPROX} {L.decimal(1 / math.sqrt(d_k), L.EXP_PLACES)}")


def shapes_of(ex: Exercise) -> tuple[tuple[str, tuple[int, int], str], ...]:
    return tuple((name, tuple(M.shape), L.in_space(L.symbol(name), M.shape)) for name, M in ex.matrices().items())


def generic_aids(ex: Exercise) -> Aids:
    """The eˣ table when a softmax is computed (the level's fixed grid, else the exponents it needs), √d_k
    when a scaling is, and the given shapes."""
    ctx = exercise_context(ex)
    softmax = ctx is not None and "A" in ctx.needed
    grid = exp_grid(ex.kind, ex.level) if softmax else None
    # with a grid, the exponents the problem needs are never listed: their exact forms are not worked out
    table, caption = grid if grid is not None else (_exp_entries(ctx) if softmax else (), None)
    root = None
    if ctx is not None and ctx.needed & set(SCALES) and "d_k" in ex.given:
        root = _sqrt_aid(int(ex.given["d_k"]))
    return Aids(exp_table=table, sqrt_dk=root, shapes=shapes_of(ex), exp_caption=caption)


@functools.lru_cache(maxsize=4 * CACHE_SIZE)
def aids(ex: Exercise) -> Aids:
    """The hand-calculation aids of `ex` (the kind's own aids(ex) when it has one)."""
    from ..core import engine  # imported here: the kinds import this package

    own = getattr(engine.KINDS.get(ex.kind), "aids", None)
    return own(ex) if own is not None else generic_aids(ex)


def shown_vector(ex: Exercise, name: str, value: np.ndarray) -> tuple[np.ndarray, bool]:
    """A given list as a learner reads it, by its kind's GIVEN_SHOWN: "from_one" counts a stored 0-based
    list (an order of tokens) from 1 like the prose, "degrees" marks angles. (values, in degrees)."""
    from ..core import engine  # imported here: the kinds import this package

    how = getattr(engine.KINDS.get(ex.kind), "given_shown", {}).get(name)
    values = np.asarray(value, dtype=float) + (1 if how == "from_one" else 0)
    return values, how == "degrees"


@dataclass(frozen=True)
class Unit:
    """The factor a given matrix is shown in units of, so that its entries are small whole numbers:
    Q = √2 ln 2 · [[1, 0], [−1, 1]] rather than [[0.980258, 0], [−0.980258, 0.980258]]."""

    latex: str
    typst: str
    value: float


def shown_matrix(ex: Exercise, name: str, value: np.ndarray) -> tuple[Unit | None, np.ndarray]:
    """A given matrix as a learner reads it, by its kind's GIVEN_SHOWN: "root_dk_ln2" shows it as whole
    numbers times √d_k · ln 2 (the unit that makes every scaled score a multiple of ln 2). (unit, entries);
    no unit when the matrix is not such a multiple."""
    from ..core import engine  # imported here: the kinds import this package

    if getattr(engine.KINDS.get(ex.kind), "given_shown", {}).get(name) != "root_dk_ln2":
        return None, value
    d_k = int(ex.given["d_k"])
    root = math.isqrt(d_k)
    unit = math.sqrt(d_k) * math.log(2)
    whole = np.round(np.asarray(value, dtype=float) / unit)
    if not np.allclose(whole * unit, value, rtol=0, atol=1e-9):
        return None, value
    if root * root == d_k:
        coefficient = "" if root == 1 else f"{root} "
        latex, typst = rf"{coefficient}\ln 2", f"{coefficient}ln 2"
    else:
        latex, typst = rf"\sqrt{{{d_k}}}\,\ln 2", f"sqrt({d_k}) ln 2"
    return Unit(latex, typst, unit), whole + 0.0  # (+ 0.0: no −0)


def given_latex(ex: Exercise) -> list[tuple[str, str]]:
    """[(name, LaTeX)] for the given matrices and numbers, shown exactly (\\frac{1}{3}, -\\infty), a matrix
    in its unit where its kind shows it so (shown_matrix)."""
    lines = []
    for name, value in ex.given.items():
        if isinstance(value, np.ndarray) and value.ndim == 2:
            unit, entries = shown_matrix(ex, name, value)
            factor = f"{unit.latex} \\cdot " if unit is not None else ""
            lines.append((name, f"{L.symbol(name)} = {factor}{L.matrix_exact(entries)}"))
        elif isinstance(value, np.ndarray) and value.ndim == 1:
            values, degrees = shown_vector(ex, name, value)
            text = (r"\left(" + ", ".join(rf"{int(v)}^{{\circ}}" for v in values) + r"\right)" if degrees
                    else _token_list(values))
            lines.append((name, f"{L.symbol(name)} = {text}"))
        elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            lines.append((name, f"{L.symbol(name)} = {L.number(float(value))}"))
    return lines
