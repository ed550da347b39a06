"""S = Q Kᵀ: cell (i, j) is the dot product of query i with key j."""

from __future__ import annotations

import numpy as np

from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.numbers import choice, nonzero_matrix

ID = "scores"
ORDER = 20
VERSION = 2
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("transposed_scores", "scores_not_transposed")


def generate(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    n = choice(rng, s.n)
    d_k = choice(rng, (2, 3) if level < 3 else (2, 4))  # a dot product short enough to do by hand
    given = {"Q": nonzero_matrix(rng, (n, d_k), s.values),  # (n, d_k)
             "K": nonzero_matrix(rng, (n, d_k), s.values)}  # (n, d_k)
    return Draft(given=given, parts=reference_parts(given, ["scores"], s.decimals), params={"n": n, "d_k": d_k})


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage.of_steps("forward", "scores")
SHEET = SheetSection("forward", (
    Formula.step("scores"),
    Formula(r"S_{ij} = q_i \cdot k_j = \sum_{r=1}^{d_k} Q_{ir} K_{jr}", "formulas.scores.cell"),
))
