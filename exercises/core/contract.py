"""What a kind folder declares for the pages besides its functions: its stage on the Home map and
its section of the formula sheet. Plain data (no Streamlit): Home and the formula sheet draw them.

    HOME = HomeStage("forward", r"A = \\operatorname{softmax}(\\tilde{Z})")
    SHEET = SheetSection("forward", (Formula(r"[[A | n | n]] = …", "formulas.softmax.rows"), …))

Texts are catalog keys in the kind's own locales: ``formulas.<key>.title`` and ``.caption`` for the
section, each formula's optional note. In a formula source ``[[Q | n | d_k]]`` writes Q with its
shape (rows × columns) underneath.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .steps import INPUT_SHAPES, INPUT_SYMBOLS, STEP_BY_NAME

HomeRow = Literal["forward", "backward", "whole", "around"]
SheetTab = Literal["forward", "backward"]
HOME_ROWS: tuple[str, ...] = HomeRow.__args__  # in the order Home shows them
SHEET_TABS: tuple[str, ...] = SheetTab.__args__

_SHAPED = re.compile(r"\[\[(.+?)\|(.+?)\|(.+?)\]\]")


def shaped(source: str) -> str:
    r"""[[Q | n | d_k]] → \underbrace{Q}_{n \times d_k}."""
    return _SHAPED.sub(lambda m: rf"\underbrace{{{m[1].strip()}}}_{{{m[2].strip()} \times {m[3].strip()}}}",
                       source)


@dataclass(frozen=True)
class HomeStage:
    """Where a kind sits on the Home map: its row, and the formula on its card (inline LaTeX)."""

    row: HomeRow
    formula: str

    def __post_init__(self) -> None:
        if self.row not in HOME_ROWS:
            raise ValueError(f"Home row {self.row!r} is not one of {', '.join(HOME_ROWS)}")

    @classmethod
    def of_steps(cls, row: HomeRow, *names: str) -> HomeStage:
        """The card of a kind that asks for these steps: their records' formulas."""
        return cls(row, r",\ ".join(STEP_BY_NAME[name].formula_latex for name in names))


TRANSPOSE, THIN_SPACE = r"^{\top}", r"\,"
# the sheet writes self-attention's axes: n tokens (queries and keys alike), d the model width, m the vocabulary
_SHEET_AXES = {"n_q": "n", "n_k": "n", "d_model": "d", "vocab": "m"}


def _axes(name: str, transposed: bool = False) -> tuple[str, str]:
    shape = STEP_BY_NAME[name].shape if name in STEP_BY_NAME else INPUT_SHAPES[name]
    rows, cols = (_SHEET_AXES.get(a, a) for a in shape)
    return (cols, rows) if transposed else (rows, cols)


def _symbol(name: str) -> str:
    return STEP_BY_NAME[name].symbol if name in STEP_BY_NAME else INPUT_SYMBOLS.get(name, name)


def step_source(name: str) -> str:
    """A step's formula as its record states it, with every matrix's shape underneath ([[Q | n | d_k]]):
    a product shows both factors' shapes, any other step its own."""
    step = STEP_BY_NAME[name]
    rows, cols = _axes(name)
    lhs, rhs = step.formula_latex.split(" = ", 1)
    if step.product is not None:
        p = step.product
        parts = []
        for factor, t in ((p.left, p.left_t), (p.right, p.right_t)):
            a, b = _axes(factor, t)
            symbol = _symbol(factor) + (TRANSPOSE if t else "")
            parts.append(f"[[{symbol} | {a} | {b}]]")
        rhs = THIN_SPACE.join(parts)
    return f"[[{lhs} | {rows} | {cols}]] = {rhs}"


@dataclass(frozen=True)
class Formula:
    source: str
    note: str | None = None  # catalog key of a one-line explanation

    @classmethod
    def step(cls, name: str, note: str | None = None) -> Formula:
        """The formula of step `name` as its record states it (step_source)."""
        return cls(step_source(name), note)

    @property
    def latex(self) -> str:
        return shaped(self.source)


@dataclass(frozen=True)
class SheetSection:
    """One section of the formula sheet: its tab, its formulas, and where it sits in the tab.
    A kind leaves `key` and `position` empty: they become its id and its ORDER."""

    tab: SheetTab
    formulas: tuple[Formula, ...]
    key: str = ""  # formulas.<key>.title and formulas.<key>.caption in the catalog
    position: float | None = None  # sections are sorted by it within their tab

    def __post_init__(self) -> None:
        if self.tab not in SHEET_TABS:
            raise ValueError(f"formula-sheet tab {self.tab!r} is not one of {', '.join(SHEET_TABS)}")

    def keys(self) -> list[str]:
        """Every catalog key the section uses."""
        return [f"formulas.{self.key}.title", f"formulas.{self.key}.caption",
                *(f.note for f in self.formulas if f.note)]
