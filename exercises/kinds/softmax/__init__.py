"""A = softmax over each row: e^{z_ij} / Σ_j e^{z_ij}; a −∞ score gets weight exactly 0."""

from __future__ import annotations

import numpy as np

from attention_core.ops import apply_mask

from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.numbers import choice, matrix
from ...solutions.aids import ExpSeries

ID = "softmax"
ORDER = 50
VERSION = 3
LEVELS = (1, 2, 3)
# the eˣ aid: a fixed grid per level covering every exponent the level's problems need (never just those)
EXP_GRID = {1: (ExpSeries(1, 2, 0, 4),), 2: (ExpSeries(1, 2, -4, 4),), 3: (ExpSeries(1, 2, -4, 6),)}
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("softmax_columns", "no_exp", "mask_zero_instead_of_inf", "softmax_no_normalise")


def generate(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    n = choice(rng, s.n)
    causal = bool(rng.integers(2))
    z = matrix(rng, (n, n), s.values)  # (n, n)
    if causal:  # the learner is given the scores after the mask, −∞ included
        given = {"masked": apply_mask(z, True), "causal": True}
    else:
        given = {"scaled": z, "causal": False}
    return Draft(given=given, parts=reference_parts(given, ["A"], s.decimals), params={"n": n})


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("forward", r"A = \operatorname{softmax}(\tilde{Z})")
SHEET = SheetSection("forward", (
    Formula(r"[[A | n | n]], \qquad A_{ij} = \frac{e^{\tilde{Z}_{ij}}}{\sum_{k} e^{\tilde{Z}_{ik}}}, \qquad "
            r"\sum_{j=1}^{n} A_{ij} = 1", "formulas.softmax.rows"),
    Formula(r"e^{-\infty} = 0 \ \Rightarrow\ A_{ij} = 0 \ \ (j > i)", "formulas.softmax.masked"),
    Formula(r"\frac{e^{z_j - c}}{\sum_k e^{z_k - c}} = \frac{e^{-c} e^{z_j}}{e^{-c} \sum_k e^{z_k}} = "
            r"\frac{e^{z_j}}{\sum_k e^{z_k}}, \qquad c = \max_k z_k", "formulas.softmax.max"),
))
