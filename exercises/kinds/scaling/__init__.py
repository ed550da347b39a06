"""scaled = S / √d_k: the scores divided by the square root of the key width."""

from __future__ import annotations

import numpy as np

from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.numbers import choice, matrix

ID = "scaling"
ORDER = 30
VERSION = 1
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("no_scaling", "scaled_by_dk", "scaled_times_sqrt_dk")
SCORE_VALUES = {1: range(0, 7), 2: range(-4, 5), 3: np.arange(-6, 6.01, 0.5)}


def generate(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    n = choice(rng, s.n)
    d_k = choice(rng, [d for d in s.d_k if d > 1])  # d_k = 1 would make the step invisible
    given = {"scores": matrix(rng, (n, n), SCORE_VALUES[level]), "d_k": int(d_k)}  # (n, n)
    return Draft(given=given, parts=reference_parts(given, ["scaled"], s.decimals), params={"n": n, "d_k": d_k})


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage.of_steps("forward", "scaled")
SHEET = SheetSection("forward", (
    Formula.step("scaled"),
))
