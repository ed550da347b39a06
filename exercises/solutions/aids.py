"""What a learner needs beside the problem: the eˣ table, √d_k, the shapes and the given values in LaTeX."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import sympy

from ..core.model import Exercise
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
class Aids:
    """What a learner needs to compute by hand: e^x for exactly the exponents that appear, √d_k, shapes."""

    exp_table: tuple[ExpEntry, ...] = ()
    sqrt_dk: str | None = None  # \sqrt{d_k} = \sqrt{2} \approx 1.414
    shapes: tuple[tuple[str, tuple[int, int], str], ...] = ()  # (name, shape, X \in \mathbb{R}^{3 \times 2})

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


def _sqrt_aid(d_k: int) -> str:
    if math.isqrt(d_k) ** 2 == d_k:
        return L.sqrt_dk(d_k)
    inverse = L.sym(1 / sympy.sqrt(d_k))
    return (rf"\sqrt{{{d_k}}} {L.APPROX} {L.decimal(math.sqrt(d_k), L.EXP_PLACES)}, \quad "
            rf"\frac{{1}}{{\sqrt{{{d_k}}}}} = {inverse} {L.APPROX} {L.decimal(1 / math.sqrt(d_k), L.EXP_PLACES)}")


def shapes_of(ex: Exercise) -> tuple[tuple[str, tuple[int, int], str], ...]:
    return tuple((name, tuple(M.shape), L.in_space(L.symbol(name), M.shape)) for name, M in ex.matrices().items())


def generic_aids(ex: Exercise) -> Aids:
    """The eˣ table when a softmax is computed, √d_k when a scaling is, and the given shapes."""
    ctx = exercise_context(ex)
    table = _exp_entries(ctx) if ctx is not None and "A" in ctx.needed else ()
    root = None
    if ctx is not None and ctx.needed & set(SCALES) and "d_k" in ex.given:
        root = _sqrt_aid(int(ex.given["d_k"]))
    return Aids(exp_table=table, sqrt_dk=root, shapes=shapes_of(ex))


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


def given_latex(ex: Exercise) -> list[tuple[str, str]]:
    """[(name, LaTeX)] for the given matrices and numbers, shown exactly (\\frac{1}{3}, -\\infty)."""
    lines = []
    for name, value in ex.given.items():
        if isinstance(value, np.ndarray) and value.ndim == 2:
            lines.append((name, f"{L.symbol(name)} = {L.matrix_exact(value)}"))
        elif isinstance(value, np.ndarray) and value.ndim == 1:
            values, degrees = shown_vector(ex, name, value)
            text = (r"\left(" + ", ".join(rf"{int(v)}^{{\circ}}" for v in values) + r"\right)" if degrees
                    else _token_list(values))
            lines.append((name, f"{L.symbol(name)} = {text}"))
        elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            lines.append((name, f"{L.symbol(name)} = {L.number(float(value))}"))
    return lines
