"""The causal mask: −∞ where a query would look at a later key; then (level 2+) the softmax."""

from __future__ import annotations

import numpy as np

from ...draft import Draft, reference_parts
from ...levels import spec
from ...numbers import choice, matrix

ID = "masking"
ORDER = 40
VERSION = 2  # 2: the larger misconception catalog redraws variants where two mistakes look alike
LEVELS = (1, 2, 3)


def generate(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    n = 3 if level == 1 else choice(rng, s.n)  # n = 2 leaves a single masked cell
    given = {"scaled": matrix(rng, (n, n), s.values), "causal": True}  # (n, n)
    names = ["masked"] if level == 1 else ["masked", "A"]
    return Draft(given=given, parts=reference_parts(given, names, s.decimals), params={"n": n})
