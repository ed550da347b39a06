"""Q = X W_Q (and K = X W_K, V = X W_V at higher levels): each token row times a weight matrix."""

from __future__ import annotations

import numpy as np

from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.numbers import choice, nonzero_matrix

ID = "projection"
ORDER = 10
VERSION = 2
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ()
PARTS_BY_LEVEL = {1: ["Q"], 2: ["Q", "K"], 3: ["Q", "K", "V"]}


def _tokens(rng: np.random.Generator, shape: tuple[int, int], values) -> np.ndarray:
    """Token rows that all differ: two equal rows give two equal rows of Q, one computation twice."""
    while True:
        X = nonzero_matrix(rng, shape, values)
        if len({tuple(row) for row in X}) == shape[0]:
            return X


def one_hot_rows(W: np.ndarray) -> np.ndarray:
    """Which rows hold a single nonzero entry, ±1: such a row only copies one column of X through."""
    return (np.count_nonzero(W, axis=1) == 1) & (np.abs(W).sum(axis=1) == 1)


def _weights(rng: np.random.Generator, shape: tuple[int, int], values) -> np.ndarray:
    """A weight matrix with no one-hot row, so every cell of the product is a real sum."""
    while True:
        W = nonzero_matrix(rng, shape, values)
        if not one_hot_rows(W).any():
            return W


def generate(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    n = choice(rng, s.n)
    d = 2 if level < 3 else 3  # d_model: the width of a token row
    d_k = 2
    given = {"X": _tokens(rng, (n, d), s.values)}  # (n, d)
    names = PARTS_BY_LEVEL[level]
    for name in names:
        given[f"W_{name}"] = _weights(rng, (d, d_k), s.values)  # (d, d_k)
    return Draft(given=given, parts=reference_parts(given, names, s.decimals), params={"n": n, "d": d})


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage.of_steps("forward", "Q", "K", "V")
SHEET = SheetSection("forward", (
    Formula.step("Q"), Formula.step("K"), Formula.step("V"),
    Formula(r"Q_{ij} = \sum_{r=1}^{d} X_{ir} (W_Q)_{rj}", "formulas.projection.cell"),
))
