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


@dataclass(frozen=True)
class Formula:
    source: str
    note: str | None = None  # catalog key of a one-line explanation

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
