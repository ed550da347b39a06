"""The causal mask: −∞ where a query would look at a later key; then (level 2+) the softmax."""

from __future__ import annotations

import numpy as np

from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.model import Exercise
from ...core.numbers import choice, matrix
from ...solutions.aids import ExpSeries

ID = "masking"
ORDER = 40
VERSION = 2
LEVELS = (1, 2, 3)
# the eˣ aid: a fixed grid per level covering every exponent the level's problems need (never just those)
EXP_GRID = {2: (ExpSeries(1, 2, -4, 4),), 3: (ExpSeries(1, 2, -4, 6),)}
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("mask_diagonal", "mask_wrong_triangle", "no_mask", "mask_after_softmax", "softmax_columns",
          "no_exp", "mask_zero_instead_of_inf", "softmax_no_normalise")


def generate(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    n = 3 if level == 1 else choice(rng, s.n)  # n = 2 leaves a single masked cell
    given = {"scaled": matrix(rng, (n, n), s.values), "causal": True}  # (n, n)
    names = ["masked"] if level == 1 else ["masked", "A"]
    return Draft(given=given, parts=reference_parts(given, names, s.decimals), params={"n": n})


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """The mask's prompt, and the softmax sentence when the exercise asks for A too (levels 2+)."""
    return ("kind.masking.prompt", *(("kind.masking.prompt_softmax",) if "A" in ex.part_names else ()))


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("forward", r"\tilde{Z}_{ij} = -\infty \ (j > i)")
SHEET = SheetSection("forward", (
    Formula(r"[[\tilde{Z} | n | n]], \qquad \tilde{Z}_{ij} = \begin{cases} Z_{ij} & j \le i \\ -\infty & j > i "
            r"\end{cases}", "formulas.masking.rule"),
    Formula(r"M = \operatorname{triu}(\mathbf{1}_{n \times n},\ k{=}1)", "formulas.masking.triu"),
))
