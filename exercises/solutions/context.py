"""The context of one solution: reference values, exact values, places and symbols by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.steps import STEP_BY_NAME
from ..i18n import Msg, msg
from ..rendering import latex as L
from .records import Number, number


@dataclass
class Context:
    """What the step builders read: reference values, exact values, places and symbols by name."""

    values: dict[str, Any]
    exact_source: dict[str, Any] | Callable[[], dict[str, Any]]  # the exact values, or how to make them
    places_source: dict[str, int] | Callable[[], dict[str, int]]  # decimals by name, or how to make them
    symbols_source: dict[str, str] | Callable[[], dict[str, str]]  # symbols by name, or how to make them
    shown: list[str]  # the steps shown, in pipeline order
    needed: set[str]  # every computed value on the way to the targets
    causal: bool
    tag: str | None = None
    _printed: dict = field(default_factory=dict, repr=False)  # (name, i, j) → short exact form, printed once

    @property
    def exact(self) -> dict[str, Any]:
        """Exact values by name (sympy), made on first use: a solution never shown needs none."""
        if callable(self.exact_source):
            self.exact_source = self.exact_source()
        return self.exact_source

    @property
    def places(self) -> dict[str, int]:
        """Decimals by value name, worked out on first use (as the exact values: a solution never
        shown needs none)."""
        if callable(self.places_source):
            self.places_source = self.places_source()
        return self.places_source

    @property
    def symbols(self) -> dict[str, str]:
        """LaTeX symbols by value name, made on first use; a kind may change them (ctx.symbols[…] = …)."""
        if callable(self.symbols_source):
            self.symbols_source = self.symbols_source()
        return self.symbols_source

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

    def number(self, name: str, i: int, j: int) -> Number:
        """One cell as a term of a derivation (as term()), with the value its text stands for."""
        text, rounded = self.term(name, i, j)
        xm = self.exact.get(name)
        exact = xm[i, j] if isinstance(xm, np.ndarray) and not rounded else None
        return number(text, exact if exact is not None else self.val(name)[i, j], rounded)

    def operand_numbers(self, name: str, exact: bool) -> list[list[Number]]:
        """The cells of a whole operand as operand() shows them, as Numbers (not transposed)."""
        M = self.val(name)
        cells = [[self.term(name, i, j) if exact else self._decimal_term(name, i, j) for j in range(M.shape[1])]
                 for i in range(M.shape[0])]
        if exact and any(r for row in cells for _, r in row):
            cells = [[self._decimal_term(name, i, j) for j in range(M.shape[1])] for i in range(M.shape[0])]
        xm = self.exact.get(name)
        return [[number(t, xm[i, j] if isinstance(xm, np.ndarray) and xm[i, j] is not None and not r
                        else M[i, j], r) for j, (t, r) in enumerate(row)] for i, row in enumerate(cells)]

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
    step = STEP_BY_NAME.get(name)
    return msg(step.title_key if step is not None else f"solution.step.{name}")


def _note(name: str) -> Msg:
    step = STEP_BY_NAME.get(name)
    return msg(step.note_key if step is not None else f"solution.note.{name}")
