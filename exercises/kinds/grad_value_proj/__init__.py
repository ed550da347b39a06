"""Backward through V = X W_V: G_W_V = Xᵀ G_V, and the value path's share of G_X, G_V W_Vᵀ.

W_V[a,c] multiplies X[i,a] in cell V[i,c] of every row i, so its gradient sums over the tokens:
∂L/∂W_V[a,c] = Σ_i X[i,a] G_V[i,c], which is Xᵀ G_V. X[i,a] feeds every column c of V's row i:
∂L/∂X[i,a] = Σ_c G_V[i,c] W_V[a,c], which is G_V W_Vᵀ (X also feeds Q and K: G_X adds those paths).
"""

from __future__ import annotations

import numpy as np

from attention_core.ops import project

from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.numbers import choice, nonzero_matrix
from .._shared import backward as B
from .._shared.values import whole_values

ID = "grad_value_proj"
ORDER = 210
VERSION = 2
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("grad_x_v_no_transpose",)  # G_V W_V where W_V is square (level 1)
PARTS = ["G_W_V", "G_X_V"]
SIZES = {1: (2, 2), 2: (3, 2), 3: (3, 2)}  # (d, d_v): the width of X and of V


def _value_weights(rng: np.random.Generator, shape: tuple[int, int], values) -> np.ndarray:
    """W_V, not symmetric when square: with W_V = W_Vᵀ, forgetting the transpose in G_V W_Vᵀ gives the
    right answer and the step teaches nothing."""
    while True:
        W = nonzero_matrix(rng, shape, values)
        if shape[0] != shape[1] or not np.array_equal(W, W.T):
            return W


def generate(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    n = choice(rng, s.n)
    d, d_v = SIZES[level]
    given = {"X": nonzero_matrix(rng, (n, d), s.values),  # (n, d)
             "W_V": _value_weights(rng, (d, d_v), whole_values(level)),  # (d, d_v)
             "G_V": nonzero_matrix(rng, (n, d_v), whole_values(level))}  # (n, d_v)
    return Draft(given=given, parts=reference_parts(given, PARTS, s.decimals), params={"n": n, "d": d, "d_v": d_v})


def loss(p: dict[str, np.ndarray]) -> float:
    """L = Σ V ⊙ G_V with V = X W_V."""
    return float(np.sum(project(p["X"], p["W_V"]) * p["G_V"]))


def solve(ex) -> list:
    """Why Xᵀ (one weight's chain rule), the value path into X, the matrix forms, a finite-difference check."""
    v = B.values_of(ex)
    a, c = B.largest(v["G_W_V"])
    i, b = B.largest(v["G_X_V"])
    point = {name: v[name] for name in ("X", "W_V", "G_V")}
    return B.assemble(ex, {"G_W_V": [B.chain_weight_matrix(v, "V", a, c, B.places_of(ex, "G_W_V"))],
                           "G_X_V": [B.chain_inputs(v, i, b, B.places_of(ex, "G_X_V"), via=("V",), name="G_X_V")]},
                      [B.check(ex, loss, r"\sum_{i,c} V_{ic} (G_V)_{ic}, \quad V = X W_V", point, "W_V", (a, c),
                               "G_W_V")])


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage.of_steps("backward", "G_W_V")
SHEET = SheetSection("backward", (
    Formula.step("G_W_V"), Formula.step("G_X_V", "formulas.grad_value_proj.share"),
))
