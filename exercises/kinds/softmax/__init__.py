"""A = softmax over each row: e^{z_ij} / Σ_j e^{z_ij}; a −∞ score gets weight exactly 0."""

from __future__ import annotations

import numpy as np

from attention_core.ops import apply_mask

from ...draft import Draft, reference_parts
from ...levels import spec
from ...numbers import choice, matrix

ID = "softmax"
ORDER = 50
VERSION = 1
LEVELS = (1, 2, 3)
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
