"""Worked solutions (DESIGN §7): every step from the given values to the parts, any cell explained.

    steps = solve(ex)              # [Step] in order, from what is given to what is asked
    step.display(exact=True)       # the step in LaTeX: formula, numbers substituted, result
    step.cell(i, j)                # CellDerivation: how that one cell is computed
    aids(ex)                       # eˣ table, √d_k, shapes of the given matrices

The numbers shown are the reference values the grader uses: a part's own reference, and for the
steps on the way ``pipeline.run(ex.given)``. Exact forms (``\\frac{1}{3}``, ``\\frac{\\sqrt{2}}{2}``,
``\\frac{e^{0}}{e^{0} + e^{1}}``) are worked out symbolically alongside and kept only where they agree
with those values.

A kind module may define its own ``solve(ex) -> list[Step]`` (and ``aids(ex) -> Aids``); ``solve``
then uses it. Such a kind builds its steps with ``pipeline_steps`` (this module's walk over
exercises.pipeline, for any given values and target names) and ``make_step`` (a step for any matrix
with its formula and a cell derivation), and its LaTeX with exercises.latex.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from . import engine, pipeline
from . import latex as L
from .i18n import Msg, msg, plural
from .model import Exercise
from .numbers import decimals_for

Matrix = tuple[tuple[str, ...], ...]
Line = L.Line


# ---------------------------------------------------------------- the records


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


# ---------------------------------------------------------------- exact values
# object arrays: a sympy number per cell, or None where no exact form is kept


def _exact_given(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.ndim == 2:
        out = np.empty(value.shape, dtype=object)  # same shape as the given matrix
        for idx, x in np.ndenumerate(value):
            out[idx] = L.to_exact(x)
        return out
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return L.to_exact(float(value))
    return None


def _xmul(a, b):
    """An exact product; 0 when either factor is exactly 0, None when a factor is unknown."""
    if (a is not None and a.is_zero) or (b is not None and b.is_zero):
        return sympy.Integer(0)
    if a is None or b is None:
        return None
    return a * b


def _xsum(terms):
    return None if any(t is None for t in terms) else sympy.Add(*terms)


def _xmatmul(Lx: np.ndarray, Rx: np.ndarray) -> np.ndarray:
    out = np.empty((Lx.shape[0], Rx.shape[1]), dtype=object)  # (n, m)
    for i in range(Lx.shape[0]):
        for j in range(Rx.shape[1]):
            out[i, j] = _xsum([_xmul(Lx[i, k], Rx[k, j]) for k in range(Lx.shape[1])])
    return out


def _x_scale(M: np.ndarray, d_k) -> np.ndarray:
    root = sympy.sqrt(d_k) if d_k is not None else None
    return np.vectorize(lambda x: None if x is None or root is None else x / root, otypes=[object])(M)


def _x_softmax(Z: np.ndarray) -> np.ndarray:
    """Only rational weights are carried on (1, ½, 0 …); e^{a}/(…) forms are made by the A step itself."""
    out = np.empty(Z.shape, dtype=object)
    for i, row in enumerate(Z):
        if any(z is None for z in row):
            out[i] = [sympy.Integer(0) if z == -sympy.oo else None for z in row]
            continue
        exps = [sympy.exp(z) for z in row]  # e^{-oo} is 0
        denominator = sympy.Add(*exps)
        for j, e in enumerate(exps):
            w = e / denominator if denominator != 0 else None
            out[i, j] = w if w is not None and w.is_Rational else None
    return out


def _x_row_dot(Ax: np.ndarray, GAx: np.ndarray, i: int):
    """r_i = Σ_k A_ik (G_A)_ik exactly, or None."""
    return _xsum([_xmul(Ax[i, k], GAx[i, k]) for k in range(Ax.shape[1])])


def _x_softmax_backward(Ax: np.ndarray, GAx: np.ndarray) -> np.ndarray:
    out = np.empty(Ax.shape, dtype=object)
    for i in range(Ax.shape[0]):
        r = _x_row_dot(Ax, GAx, i)
        for j in range(Ax.shape[1]):
            inner = None if r is None or GAx[i, j] is None else GAx[i, j] - r
            out[i, j] = _xmul(Ax[i, j], inner)
    return out


@dataclass(frozen=True)
class Product:
    """out = L' R' with L' = Lᵀ when left_t and R' = Rᵀ when right_t."""

    left: str
    right: str
    left_t: bool = False
    right_t: bool = False


PRODUCTS: dict[str, Product] = {
    "Q": Product("X", "W_Q"), "K": Product("X", "W_K"), "V": Product("X", "W_V"),
    "scores": Product("Q", "K", right_t=True),
    "O": Product("A", "V"),
    "G_A": Product("G_O", "V", right_t=True),
    "G_V": Product("A", "G_O", left_t=True),
    "G_Q": Product("G_scores", "K"),
    "G_K": Product("G_scores", "Q", left_t=True),
    "G_W_Q": Product("X", "G_Q", left_t=True),
    "G_W_K": Product("X", "G_K", left_t=True),
    "G_W_V": Product("X", "G_V", left_t=True),
    "G_X_V": Product("G_V", "W_V", right_t=True),
}
SCALES = {"scaled": "scores", "G_scores": "G_scaled"}  # value divided by √d_k ← its input
G_X_PATHS = (("G_Q", "W_Q"), ("G_K", "W_K"), ("G_V", "W_V"))


def _oriented(M: np.ndarray, transpose: bool) -> np.ndarray:
    return M.T if transpose else M


def _exact_step(name: str, xs: dict, values: Mapping[str, Any]) -> Any:
    """The exact value of pipeline step `name` from the exact values so far (None cells unknown)."""
    causal = bool(values.get("causal", False))
    if name in PRODUCTS:
        p = PRODUCTS[name]
        return _xmatmul(_oriented(xs[p.left], p.left_t), _oriented(xs[p.right], p.right_t))
    if name in SCALES:
        return _x_scale(xs[SCALES[name]], xs.get("d_k"))
    if name == "masked":
        out = xs["scaled"].copy()
        if causal:
            out[np.triu(np.ones(out.shape, dtype=bool), k=1)] = -sympy.oo
        return out
    if name == "A":
        return _x_softmax(xs["masked"])
    if name == "G_scaled":
        out = _x_softmax_backward(xs["A"], xs["G_A"])
        if causal:
            out[np.triu(np.ones(out.shape, dtype=bool), k=1)] = sympy.Integer(0)
        return out
    if name == "G_X":
        parts = [_xmatmul(xs[g], xs[w].T) for g, w in G_X_PATHS]
        return np.vectorize(lambda a, b, c: _xsum([a, b, c]), otypes=[object])(*parts)
    if name == "X":
        return xs["E"][np.asarray(values["token_ids"], dtype=int)]
    if name == "G_E":
        E = values["E"]
        out = np.full(np.shape(E), sympy.Integer(0), dtype=object)  # (m, d)
        for p, tok in enumerate(np.asarray(values["token_ids"], dtype=int)):
            for j in range(out.shape[1]):
                out[tok, j] = _xsum([out[tok, j], xs["G_X"][p, j]])
        return out
    return None  # a step this module has no exact rule for: decimals only


def _agreeing(xm: Any, ref: Any) -> Any:
    """Keep an exact cell only where it equals the reference value (to 1e-9)."""
    if not isinstance(xm, np.ndarray) or not isinstance(ref, np.ndarray) or xm.shape != np.shape(ref):
        return np.full(np.shape(ref), None, dtype=object) if isinstance(ref, np.ndarray) else None
    out = xm.copy()
    for idx, e in np.ndenumerate(xm):
        if e is None:
            continue
        try:
            f = float(e)
        except (TypeError, ValueError):
            out[idx] = None
            continue
        r = float(ref[idx])
        same = (f == r) if (math.isinf(f) or math.isinf(r)) else abs(f - r) <= 1e-9 * max(1.0, abs(r))
        if not same:
            out[idx] = None
    return out


# ---------------------------------------------------------------- the context of one solution


@dataclass
class Context:
    """What the step builders read: reference values, exact values, places and symbols by name."""

    values: dict[str, Any]
    exact: dict[str, Any]
    places: dict[str, int]
    symbols: dict[str, str]
    shown: list[str]  # the steps shown, in pipeline order
    needed: set[str]  # every computed value on the way to the targets
    causal: bool
    tag: str | None = None
    _printed: dict = field(default_factory=dict, repr=False)  # (name, i, j) → short exact form, printed once

    def sym(self, name: str) -> str:
        return self.symbols.get(name) or L.symbol(name, self.tag)

    def val(self, name: str) -> np.ndarray:
        return np.atleast_2d(np.asarray(self.values[name], dtype=float))

    def xcell(self, name: str, i: int, j: int) -> str | None:
        """The short exact form of one cell, or None."""
        key = (name, i, j)
        if key not in self._printed:
            xm = self.exact.get(name)
            self._printed[key] = L.short(xm[i, j]) if isinstance(xm, np.ndarray) else None
        return self._printed[key]

    def term(self, name: str, i: int, j: int) -> tuple[str, bool]:
        """One cell as a term of a derivation: exact when short, else the decimal; and is it rounded?"""
        exact = self.xcell(name, i, j)
        if exact is not None:
            return exact, False
        x = self.val(name)[i, j]
        text = L.decimal(x, self.places.get(name, 2))
        return text, not L.is_exact_decimal(text, x)

    def operand(self, name: str, exact: bool, transpose: bool = False) -> tuple[str, bool]:
        """A whole matrix as an operand: exact when every cell is short (and `exact`), else decimals."""
        M = self.val(name)
        cells = [[self.term(name, i, j) if exact else self._decimal_term(name, i, j) for j in range(M.shape[1])]
                 for i in range(M.shape[0])]
        if exact and any(r for row in cells for _, r in row):
            cells = [[self._decimal_term(name, i, j) for j in range(M.shape[1])] for i in range(M.shape[0])]
        texts = [[t for t, _ in row] for row in cells]
        if transpose:
            texts = [list(col) for col in zip(*texts)]
        rounded = any(r for row in cells for _, r in row)
        return (texts[0][0] if M.shape == (1, 1) else L.bmatrix(texts)), rounded

    def _decimal_term(self, name: str, i: int, j: int) -> tuple[str, bool]:
        x = self.val(name)[i, j]
        exact = self.xcell(name, i, j)
        if exact is not None and L.is_exact_decimal(exact, x):
            return exact, False  # whole numbers stay whole
        text = L.decimal(x, self.places.get(name, 2))
        return text, not L.is_exact_decimal(text, x)

    def exact_cells(self, name: str) -> list[list[str | None]]:
        rows, cols = self.val(name).shape
        return [[self.xcell(name, i, j) for j in range(cols)] for i in range(rows)]

    def places_of(self, name: str) -> int:
        return self.places.get(name, 2)


def _title(name: str) -> Msg:
    return msg(f"solution.step.{name}")


def _note(name: str) -> Msg:
    return msg(f"solution.note.{name}")


# ---------------------------------------------------------------- step builders


def _product_step(ctx: Context, name: str) -> Step:
    p = PRODUCTS[name]
    out, ls, rs = ctx.sym(name), ctx.sym(p.left), ctx.sym(p.right)
    left = L.transposed(ls) if p.left_t else ls
    right = L.transposed(rs) if p.right_t else rs
    work, work_dec = [], []
    for exact, target in ((True, work), (False, work_dec)):
        lm, lr = ctx.operand(p.left, exact, p.left_t)
        rm, rr = ctx.operand(p.right, exact, p.right_t)
        target.append(("", L.APPROX if (lr or rr) else "=", f"{lm} {rm}"))
    Lv, Rv = _oriented(ctx.val(p.left), p.left_t), _oriented(ctx.val(p.right), p.right_t)
    value = ctx.val(name)

    def left_term(i, k):
        return ctx.term(p.left, k, i) if p.left_t else ctx.term(p.left, i, k)

    def right_term(k, j):
        return ctx.term(p.right, j, k) if p.right_t else ctx.term(p.right, k, j)

    def derive(i: int, j: int) -> CellDerivation:
        li = f"k{L.index(i)}" if p.left_t else f"{L.index(i)}k"
        rj = f"{L.index(j)}k" if p.right_t else f"k{L.index(j)}"
        if name == "scores":
            symbolic = rf"{L.row_vector(ls, i)} \cdot {L.row_vector(rs, j)}"
        else:
            symbolic = rf"\sum_{{k}} {L.entry(ls, li)} " \
                       rf"{L.entry(rs, rj)}"
        pairs = [(left_term(i, k), right_term(k, j)) for k in range(Lv.shape[1])]
        rounded = any(a[1] or b[1] for a, b in pairs)
        sum_text = L.total([L.product(a[0], b[0]) for a, b in pairs])
        latex = result_chain(L.cell(out, i, j), ctx.xcell(name, i, j), L.decimal(value[i, j], ctx.places_of(name)),
                             value[i, j], rounded, symbolic, (L.APPROX if rounded else "=", sum_text))
        return CellDerivation(latex)

    assert Lv.shape[1] == Rv.shape[0]
    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out, formula=f"{left} {right}",
                     exact_cells=ctx.exact_cells(name), work=work, work_decimal=work_dec, note=_note(name),
                     derive=derive)


def _scale_step(ctx: Context, name: str) -> Step:
    src = SCALES[name]
    out, ss = ctx.sym(name), ctx.sym(src)
    d_k = int(ctx.values["d_k"])
    whole = math.isqrt(d_k) ** 2 == d_k
    root = str(math.isqrt(d_k)) if whole else rf"\sqrt{{{d_k}}}"
    work, work_dec = [(r"\sqrt{d_k}", "=", L.sqrt_dk(d_k))], [(r"\sqrt{d_k}", "=", L.sqrt_dk(d_k))]
    if not whole:
        work_dec[0] = (r"\sqrt{d_k}", L.APPROX, L.decimal(math.sqrt(d_k), L.EXP_PLACES))
    for exact, target in ((True, work), (False, work_dec)):
        m, rounded = ctx.operand(src, exact)
        target.append((out, L.APPROX if rounded else "=", rf"{L.frac('1', root)} {m}"))
    value = ctx.val(name)

    def derive(i: int, j: int) -> CellDerivation:
        num, rounded = ctx.term(src, i, j)
        latex = result_chain(L.cell(out, i, j), ctx.xcell(name, i, j), L.decimal(value[i, j], ctx.places_of(name)),
                             value[i, j], rounded, L.frac(L.cell(ss, i, j), r"\sqrt{d_k}"),
                             (L.APPROX if rounded else "=", L.frac(num, root)))
        return CellDerivation(latex)

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out,
                     formula=L.frac(ss, r"\sqrt{d_k}"), exact_cells=ctx.exact_cells(name), work=work,
                     work_decimal=work_dec, note=_note(name), derive=derive)


def _mask_step(ctx: Context, name: str) -> Step:
    zs, ms = ctx.sym("scaled"), ctx.sym(name)
    value = ctx.val(name)
    if ctx.causal:
        formula = (rf"\begin{{cases}} {L.entry(zs, 'ij')} & j \le i \\ "
                   r"-\infty & j > i \end{cases}")
        lhs = L.entry(ms, 'ij')
    else:
        formula, lhs = zs, ms

    def derive(i: int, j: int) -> CellDerivation:
        here = L.cell(ms, i, j)
        if ctx.causal and j > i:
            return CellDerivation(rf"{here} = -\infty \quad (j = {j + 1} > i = {i + 1})",
                                  msg("solution.cell.masked", column=j + 1, query=i + 1))
        text, _ = ctx.term("scaled", i, j)
        why = rf" \quad (j = {j + 1} \le i = {i + 1})" if ctx.causal else ""
        return CellDerivation(f"{here} = {L.cell(zs, i, j)} = {text}{why}",
                              msg("solution.cell.visible", column=j + 1, query=i + 1) if ctx.causal else None)

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=ms, lhs=lhs, formula=formula,
                     exact_cells=ctx.exact_cells(name), note=_note(name) if ctx.causal else None, derive=derive)


def _softmax_step(ctx: Context, name: str) -> Step:
    src = pipeline.STEP_BY_NAME["A"].inputs[0]  # "masked" (equal to the scaled scores without a mask)
    zs, out = ctx.sym(src), ctx.sym(name)
    z, value = ctx.val(src), ctx.val(name)
    rows, cols = z.shape
    visible = np.isfinite(z)  # (n, n)
    with np.errstate(over="ignore"):
        e = np.where(visible, np.exp(np.where(visible, z, 0.0)), 0.0)  # (n, n) shown only, e^{-inf} = 0
    sums = e.sum(axis=1)  # (n,)
    exponent = [[ctx.term(src, i, j) for j in range(cols)] for i in range(rows)]
    rounded_exp = any(r for row in exponent for _, r in row)
    e_text = [[L.exp_of(exponent[i][j][0]) if visible[i, j] else "0" for j in range(cols)] for i in range(rows)]
    e_dec = [[L.decimal(e[i, j], L.EXP_PLACES) if visible[i, j] else "0" for j in range(cols)] for i in range(rows)]
    denominators = [L.total([e_text[i][k] for k in range(cols) if visible[i, k]]) for i in range(rows)]
    sums_dec = L.bmatrix([[L.decimal(s, L.EXP_PLACES)] for s in sums])

    exact_cells: list[list[str | None]] = []
    for i in range(rows):
        row: list[str | None] = []
        for j in range(cols):
            rational = ctx.xcell(name, i, j)
            if rational is not None:
                row.append(rational)
            elif visible[i, j] and not any(exponent[i][k][1] for k in range(cols)) and len(denominators[i]) <= 90:
                row.append(L.frac(e_text[i][j], denominators[i]))
            else:
                row.append(None)
        exact_cells.append(row)

    e_sym = L.exp_of(zs)
    sum_sym = rf"\sum_{{k}} {L.exp_of(L.entry(zs, 'ik'))}"
    work = [(e_sym, L.APPROX if rounded_exp else "=", L.bmatrix(e_text)), ("", L.APPROX, L.bmatrix(e_dec)),
            (sum_sym, L.APPROX, sums_dec)]
    work_dec = [(e_sym, L.APPROX, L.bmatrix(e_dec)), (sum_sym, L.APPROX, sums_dec)]

    def derive(i: int, j: int) -> CellDerivation:
        here = L.cell(out, i, j)
        symbolic = L.frac(L.exp_of(L.cell(zs, i, j)), rf"\sum_{{k}} {L.exp_of(L.entry(zs, L.index(i) + 'k'))}")
        places = ctx.places_of(name)
        decimal = L.decimal(value[i, j], places)
        if not visible[i, j]:
            latex = L.chain(here, symbolic, L.frac(L.exp_of(r"-\infty"), denominators[i] or "0"),
                            L.frac("0", L.decimal(sums[i], L.EXP_PLACES)), "0")
            return CellDerivation(latex, msg("solution.cell.masked_weight", column=j + 1, query=i + 1))
        row_rounded = any(exponent[i][k][1] for k in range(cols) if visible[i, k])
        numbers = L.frac(e_dec[i][j], L.total([e_dec[i][k] for k in range(cols) if visible[i, k]]))
        exact_form = L.frac(e_text[i][j], denominators[i])
        middle: list[str | tuple[str, str]] = [symbolic, (L.APPROX if row_rounded else "=", exact_form)]
        rational = ctx.xcell(name, i, j)
        if rational is None:
            middle.append((L.APPROX, numbers))
        latex = result_chain(here, rational, decimal, value[i, j], rational is None, *middle)
        note = "solution.cell.softmax_masked_row" if not visible[i].all() else "solution.cell.softmax_row"
        return CellDerivation(latex, msg(note, row=i + 1))

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out,
                     lhs=L.entry(out, 'ij'),
                     formula=L.frac(L.exp_of(L.entry(zs, 'ij')), sum_sym),
                     exact_cells=exact_cells, work=work, work_decimal=work_dec, note=_note(name), derive=derive)


def _softmax_backward_step(ctx: Context, name: str) -> Step:
    out, As, Gs = ctx.sym(name), ctx.sym("A"), ctx.sym("G_A")
    A, G, value = ctx.val("A"), ctx.val("G_A"), ctx.val(name)
    rows, cols = A.shape
    r = np.sum(A * G, axis=1)  # (n,) rowsum(A ⊙ G_A), shown only
    Ax, Gx = ctx.exact.get("A"), ctx.exact.get("G_A")
    r_exact = [None] * rows
    if isinstance(Ax, np.ndarray) and isinstance(Gx, np.ndarray):
        r_exact = [L.short(_agreeing(np.array([[_x_row_dot(Ax, Gx, i)]], dtype=object), r[i:i + 1, None])[0, 0])
                   for i in range(rows)]
    r_dec = [L.decimal(x, max(ctx.places_of(name), ctx.places_of("A"))) for x in r]
    r_sum = rf"\sum_{{k}} {L.entry(As, 'ik')} {L.entry(Gs, 'ik')}"
    if all(x is not None for x in r_exact):
        r_line = ("r", "=", L.bmatrix([[x] for x in r_exact]))
    else:
        r_line = ("r", L.APPROX, L.bmatrix([[d] for d in r_dec]))
    r_dec_exact = all(L.is_exact_decimal(d, x) for d, x in zip(r_dec, r))
    work = [("r_{i}", "=", r_sum), r_line]
    work_dec = [("r_{i}", "=", r_sum), ("r", "=" if r_dec_exact else L.APPROX, L.bmatrix([[d] for d in r_dec]))]
    masked = np.triu(np.ones((rows, cols), dtype=bool), k=1) if ctx.causal else np.zeros((rows, cols), dtype=bool)

    def derive(i: int, j: int) -> CellDerivation:
        here = L.cell(out, i, j)
        if masked[i, j]:
            return CellDerivation(rf"{here} = 0", msg("solution.cell.masked_gradient", column=j + 1, query=i + 1))
        # line 1: the row's weighted average r_i; line 2: this cell
        terms = [(ctx.term("A", i, k), ctx.term("G_A", i, k)) for k in range(cols)]
        rounded = any(a[1] or g[1] for a, g in terms)
        row = L.index(i)
        r_chain = result_chain(f"r_{{{row}}}", r_exact[i], r_dec[i], r[i], rounded,
                               rf"\sum_{{k}} {L.entry(As, row + 'k')} {L.entry(Gs, row + 'k')}",
                               (L.APPROX if rounded else "=", L.total([L.product(a[0], g[0]) for a, g in terms])))
        r_text = r_exact[i] if r_exact[i] is not None and not rounded else r_dec[i]
        rounded = rounded or (r_text == r_dec[i] and not L.is_exact_decimal(r_dec[i], r[i]))
        a, _ = ctx.term("A", i, j)
        g, _ = ctx.term("G_A", i, j)
        symbolic = rf"{L.cell(As, i, j)} \left({L.cell(Gs, i, j)} - r_{{{row}}}\right)"
        numbers = rf"{L.paren(a)} \cdot \left({g} - {L.paren(r_text)}\right)"
        cell_chain = result_chain(here, ctx.xcell(name, i, j), L.decimal(value[i, j], ctx.places_of(name)),
                                  value[i, j], rounded, symbolic, (L.APPROX if rounded else "=", numbers))
        return CellDerivation(L.aligned([_split(r_chain), _split(cell_chain)]))

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out,
                     formula=rf"{As} \odot \left({Gs} - r \mathbf{{1}}^{{\top}}\right)",
                     exact_cells=ctx.exact_cells(name), work=work, work_decimal=work_dec, note=_note(name),
                     derive=derive)


def _split(chain_text: str) -> Line:
    """'a = b = c' → ('a', '=', 'b = c') for an aligned block."""
    lhs, _, rest = chain_text.partition(" = ")
    return lhs, "=", rest


def _g_x_step(ctx: Context, name: str) -> Step:
    out = ctx.sym(name)
    value = ctx.val(name)
    formula = " + ".join(f"{ctx.sym(g)} {L.transposed(ctx.sym(w))}" for g, w in G_X_PATHS)
    work, work_dec = [], []
    for exact, target in ((True, work), (False, work_dec)):
        pieces, rounded = [], False
        for g, w in G_X_PATHS:
            gm, gr = ctx.operand(g, exact)
            wm, wr = ctx.operand(w, exact, transpose=True)
            pieces.append(f"{gm} {wm}")
            rounded = rounded or gr or wr
        target.append(("", L.APPROX if rounded else "=", " + ".join(pieces)))

    def derive(i: int, j: int) -> CellDerivation:
        groups, rounded = [], False
        for g, w in G_X_PATHS:
            width = ctx.val(g).shape[1]
            pairs = [(ctx.term(g, i, k), ctx.term(w, j, k)) for k in range(width)]
            rounded = rounded or any(a[1] or b[1] for a, b in pairs)
            groups.append(r"\left(" + L.total([L.product(a[0], b[0]) for a, b in pairs]) + r"\right)")
        symbolic = " + ".join(rf"\sum_{{k}} {L.entry(ctx.sym(g), L.index(i) + 'k')} "
                              rf"{L.entry(ctx.sym(w), L.index(j) + 'k')}"
                              for g, w in G_X_PATHS)
        latex = result_chain(L.cell(out, i, j), ctx.xcell(name, i, j), L.decimal(value[i, j], ctx.places_of(name)),
                             value[i, j], rounded, symbolic, (L.APPROX if rounded else "=", " + ".join(groups)))
        return CellDerivation(latex)

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out, formula=formula,
                     exact_cells=ctx.exact_cells(name), work=work, work_decimal=work_dec, note=_note(name),
                     derive=derive)


def _token_list(ids: np.ndarray) -> str:
    return r"\left(" + ", ".join(str(int(t)) for t in ids) + r"\right)"


def _embedding_step(ctx: Context, name: str) -> Step:
    ids = np.asarray(ctx.values["token_ids"], dtype=int)  # (n,)
    out, es = ctx.sym(name), ctx.sym("E")
    value = ctx.val(name)
    work = [("t", "=", _token_list(ids))]

    def derive(i: int, j: int) -> CellDerivation:
        text, _ = ctx.term("E", int(ids[i]), j)
        return CellDerivation(rf"{L.cell(out, i, j)} = {es}[t_{{{L.index(i)}}}]_{{{L.index(j)}}} = "
                              rf"{es}[{int(ids[i])}]_{{{L.index(j)}}} = {text}",
                              msg("solution.cell.embedding_lookup", position=i + 1, token=int(ids[i])))

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out,
                     lhs=rf"{out.lower()}_{{i}}", formula=rf"{es}[t_{{i}}]",
                     exact_cells=ctx.exact_cells(name), work=work, note=_note(name), derive=derive)


def _embedding_grad_step(ctx: Context, name: str) -> Step:
    ids = np.asarray(ctx.values["token_ids"], dtype=int)  # (n,)
    out, gx = ctx.sym(name), ctx.sym("G_X")
    value = ctx.val(name)
    work = [("t", "=", _token_list(ids))]

    def derive(v: int, j: int) -> CellDerivation:
        positions = [p for p, tok in enumerate(ids) if tok == v]
        here = rf"{out}[{v}]_{{{L.index(j)}}}"
        symbolic = rf"\sum_{{p:\, t_p = {v}}} {L.entry(gx, 'p' + L.index(j))}"
        if not positions:
            return CellDerivation(f"{here} = {symbolic} = 0", msg("solution.cell.embedding_unused", token=v))
        named = " + ".join(L.cell(gx, p, j) for p in positions)
        terms = [ctx.term("G_X", p, j) for p in positions]
        rounded = any(r for _, r in terms)
        latex = result_chain(here, ctx.xcell(name, v, j), L.decimal(value[v, j], ctx.places_of(name)), value[v, j],
                             rounded, symbolic, named, (L.APPROX if rounded else "=", L.total([t for t, _ in terms])))
        return CellDerivation(latex, plural("solution.cell.embedding_accumulate", len(positions), token=v))

    return make_step(name, _title(name), value, ctx.places_of(name), symbol=out,
                     lhs=rf"{out}[v]", formula=rf"\sum_{{p:\, t_p = v}} ({gx})_{{p}}",
                     exact_cells=ctx.exact_cells(name), work=work, note=_note(name), derive=derive)


def _value_step(ctx: Context, name: str) -> Step:
    """A step this module has no formula for (added to the pipeline later): its result, exact where short."""
    return make_step(name, msg("solution.step.generic", part=msg(f"part.{name}")), ctx.val(name),
                     ctx.places_of(name), symbol=ctx.sym(name), exact_cells=ctx.exact_cells(name))


BUILDERS: dict[str, Callable[[Context, str], Step]] = {
    **{name: _product_step for name in PRODUCTS},
    **{name: _scale_step for name in SCALES},
    "masked": _mask_step, "A": _softmax_step, "G_scaled": _softmax_backward_step, "G_X": _g_x_step,
    "X": _embedding_step, "G_E": _embedding_grad_step,
}


# ---------------------------------------------------------------- walking the pipeline


def _needed(given: Mapping[str, Any], targets: Iterable[str], env: Mapping[str, Any]) -> set[str]:
    """The computed values on the way from `given` to `targets` (given values are not recomputed)."""
    found: set[str] = set()

    def visit(name: str) -> None:
        if name in given or name in found or name not in pipeline.STEP_BY_NAME or name not in env:
            return
        found.add(name)
        for inp in pipeline.STEP_BY_NAME[name].inputs:
            visit(inp)

    for t in targets:
        visit(t)
    return found


def build_context(given: Mapping[str, Any], targets: Sequence[str], places: Mapping[str, int] | int = 2,
                  values: Mapping[str, np.ndarray] | None = None, tag: str | None = None) -> Context:
    """Everything the steps from `given` to `targets` need: reference values (`values` override the
    pipeline's, e.g. the parts' own references), exact values, decimals per value, symbols."""
    env = pipeline.run(given)
    needed = _needed(given, targets, env)
    overrides = {k: v for k, v in (values or {}).items()
                 if k not in env or np.shape(v) == np.shape(env[k])}  # a same-named answer of another kind stays out
    merged = {**env, **overrides}
    order = [s.output for s in pipeline.STEPS if s.output in needed]
    causal = bool(given.get("causal", False))
    default = places if isinstance(places, int) else max(places.values(), default=2) or 2
    own = {} if isinstance(places, int) else dict(places)
    place_map: dict[str, int] = {}
    for name, value in merged.items():
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            place_map[name] = own.get(name, decimals_for(value, default))
    symbols = {name: L.symbol(name, tag) for name in set(merged) | set(L.SYMBOLS)}
    shown = list(order)
    if "masked" in shown and not causal and "masked" not in targets:
        shown.remove("masked")  # no mask: the softmax reads the scaled scores themselves
        symbols["masked"] = symbols["scaled"]
    exact: dict[str, Any] = {name: _exact_given(v) for name, v in given.items()}
    for name in order:
        try:
            xm = _exact_step(name, exact, merged)
        except (KeyError, IndexError, TypeError, ValueError):
            xm = None
        exact[name] = _agreeing(xm, np.atleast_2d(np.asarray(merged[name], dtype=float)))
    return Context(values=merged, exact=exact, places=place_map, symbols=symbols, shown=shown,
                   needed=set(order), causal=causal, tag=tag)


def pipeline_steps(given: Mapping[str, Any], targets: Sequence[str], places: Mapping[str, int] | int = 2,
                   values: Mapping[str, np.ndarray] | None = None, tag: str | None = None) -> list[Step]:
    """The generic steps from `given` to `targets` through exercises.pipeline (for kinds' own solve).

    places: decimals per value name (the parts'), or one default; values: references that override
    the pipeline's (pass the parts' references); tag: a head's label, shown as a superscript."""
    ctx = build_context(given, targets, places, values, tag)
    return [BUILDERS.get(name, _value_step)(ctx, name) for name in ctx.shown]


def _answer_step(ex: Exercise, part) -> Step:
    """A part outside the pipeline (a kind without its own solve): its reference, exact where short."""
    ref = np.atleast_2d(part.reference)
    if part.is_choice:
        letter = chr(ord("A") + int(ref[0, 0]))
        return make_step(part.name, msg("solution.step.choice"), ref, 0, symbol=rf"\text{{{letter}}}",
                         exact_cells=[[rf"\text{{{letter}}}"]])
    cells = [[L.short(L.to_exact(x)) for x in row] for row in ref]
    return make_step(part.name, msg("solution.step.generic", part=msg(f"part.{part.name}")), ref,
                     part.decimals, exact_cells=cells)


# Caches are bounded LRUs keyed by the exercise itself (equal exercises share an entry): a fully
# rendered solution holds about 140 kB, so nothing is parked on exercises that pages keep for long.
CACHE_SIZE = 256


@functools.lru_cache(maxsize=CACHE_SIZE)
def exercise_context(ex: Exercise) -> Context | None:
    """The context of the pipeline walk from ex.given to its parts (None when no part is on the
    pipeline); solve and aids share it."""
    on_pipeline = [p for p in ex.parts if not p.is_choice and p.name in pipeline.STEP_BY_NAME]
    if not on_pipeline:
        return None
    return build_context(ex.given, [p.name for p in on_pipeline], places={p.name: p.decimals for p in on_pipeline},
                         values={p.name: p.reference for p in on_pipeline})


def generic_solve(ex: Exercise) -> list[Step]:
    """Pipeline steps from ex.given to the parts; parts outside the pipeline as plain answers."""
    ctx = exercise_context(ex)
    steps = [BUILDERS.get(name, _value_step)(ctx, name) for name in ctx.shown] if ctx is not None else []
    steps = [s for s in steps if s.name not in ex.part_names or s.shape == ex.part(s.name).shape]
    shown = {s.name for s in steps}
    return steps + [_answer_step(ex, p) for p in ex.parts if p.name not in shown]


def solve(ex: Exercise) -> list[Step]:
    """The worked solution of `ex`: the kind's own solve(ex) when it has one, else the pipeline walk."""
    return list(_solved(ex))


@functools.lru_cache(maxsize=CACHE_SIZE)
def _solved(ex: Exercise) -> tuple[Step, ...]:
    own = getattr(engine.KINDS.get(ex.kind), "solve", None)
    return tuple(own(ex) if own is not None else generic_solve(ex))


@functools.lru_cache(maxsize=CACHE_SIZE)
def solution(kind: str, seed: int, level: int) -> tuple[Step, ...]:
    """solve(generate(kind, seed, level)), cached per process: a pure function of the triple."""
    return _solved(engine.generate(kind, seed, level))


# ---------------------------------------------------------------- aids shown with the problem


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
    own = getattr(engine.KINDS.get(ex.kind), "aids", None)
    return own(ex) if own is not None else generic_aids(ex)


def given_latex(ex: Exercise) -> list[tuple[str, str]]:
    """[(name, LaTeX)] for the given matrices and numbers, shown exactly (\\frac{1}{3}, -\\infty)."""
    lines = []
    for name, value in ex.given.items():
        if isinstance(value, np.ndarray) and value.ndim == 2:
            lines.append((name, f"{L.symbol(name)} = {L.matrix_exact(value)}"))
        elif isinstance(value, np.ndarray) and value.ndim == 1:
            lines.append((name, f"{L.symbol(name)} = {_token_list(value)}"))
        elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            lines.append((name, f"{L.symbol(name)} = {L.number(float(value))}"))
    return lines
