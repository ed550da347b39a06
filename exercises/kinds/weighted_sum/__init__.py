"""O = A V: each output row mixes the value rows with that query's attention weights."""

from __future__ import annotations

import numpy as np

from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.model import Exercise
from ...core.numbers import choice, nonzero_matrix, simple_weights
from .._shared.weights import scores_behind

ID = "weighted_sum"
ORDER = 60
VERSION = 2
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("weights_transposed",)


def generate(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    n = choice(rng, s.n)
    d_v = 2 if level < 3 else choice(rng, (2, 3))
    causal = bool(rng.integers(2))
    A = simple_weights(rng, n, s.denominators, causal=causal)  # (n, n), rows sum to 1
    given = {"A": A, "V": nonzero_matrix(rng, (n, d_v), s.values), "causal": causal}  # V (n, d_v)
    return Draft(given=given, parts=reference_parts(given, ["O"], s.decimals),
                 params={"n": n, "d_v": d_v, "scores_behind": scores_behind(A)})


def prompt_keys(ex: Exercise) -> tuple[str, ...]:
    """The prompt, and the scores A is the softmax of (variants before version 2 do not state them)."""
    return ("kind.weighted_sum.prompt", *(("kind.weighted_sum.prompt_scores",) if "scores_behind" in ex.params else ()))


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage.of_steps("forward", "O")
SHEET = SheetSection("forward", (
    Formula.step("O"),
    Formula(r"o_i = \sum_{j=1}^{n} A_{ij} v_j", "formulas.weighted_sum.rows"),
    Formula(r"O = \operatorname{softmax}\!\left(\operatorname{mask}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}\right)"
            r"\right) V", "formulas.weighted_sum.whole"),
))
