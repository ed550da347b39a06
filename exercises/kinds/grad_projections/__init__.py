"""Backward through Q = X W_Q, K = X W_K, V = X W_V: G_W = Xᵀ G for each, and G_X adds three paths.

W_Q[a,c] meets X[i,a] in cell Q[i,c] of every token row i, so its gradient sums over tokens:
Σ_i X[i,a] G_Q[i,c], which is Xᵀ G_Q (the transpose turns "sum over tokens" into a matrix product).
X[i,a] feeds Q, K and V, so G_X = G_Q W_Qᵀ + G_K W_Kᵀ + G_V W_Vᵀ.
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

ID = "grad_projections"
ORDER = 240
VERSION = 3
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("grad_x_no_value_path", "grad_x_no_key_path", "grad_x_no_query_path", "grad_x_query_path_only",
          "grad_x_key_path_only", "grad_x_value_path_only")
SIZES = {1: (2, 1, 1), 2: (2, 2, 1), 3: (3, 2, 2)}  # (d, d_k, d_v): each path of G_X stays short
PARTS_BY_LEVEL = {1: ["G_W_Q", "G_W_K", "G_X"], 2: ["G_W_Q", "G_W_K", "G_X"],
                  3: ["G_W_Q", "G_W_K", "G_W_V", "G_X"]}


def generate(rng: np.random.Generator, level: int) -> Draft:
    s = spec(level)
    n = choice(rng, s.n)
    d, d_k, d_v = SIZES[level]
    whole = whole_values(level)
    W_Q = nonzero_matrix(rng, (d, d_k), whole)  # (d, d_k)
    W_K = nonzero_matrix(rng, (d, d_k), whole)  # (d, d_k)
    while np.array_equal(W_Q, W_K):  # equal weights make Q and K one and the same projection
        W_K = nonzero_matrix(rng, (d, d_k), whole)
    given = {"X": nonzero_matrix(rng, (n, d), s.values),  # (n, d)
             "W_Q": W_Q, "W_K": W_K,
             "W_V": nonzero_matrix(rng, (d, d_v), whole),  # (d, d_v)
             "G_Q": nonzero_matrix(rng, (n, d_k), whole),  # (n, d_k)
             "G_K": nonzero_matrix(rng, (n, d_k), whole),  # (n, d_k)
             "G_V": nonzero_matrix(rng, (n, d_v), whole)}  # (n, d_v)
    return Draft(given=given, parts=reference_parts(given, PARTS_BY_LEVEL[level], s.decimals),
                 params={"n": n, "d": d, "d_k": d_k, "d_v": d_v})


def loss(p: dict[str, np.ndarray]) -> float:
    """L = Σ Q ⊙ G_Q + Σ K ⊙ G_K + Σ V ⊙ G_V with Q = X W_Q, K = X W_K, V = X W_V."""
    return float(sum(np.sum(project(p["X"], p[f"W_{m}"]) * p[f"G_{m}"]) for m in "QKV"))


LOSS_LATEX = r"\sum_{i,c} \left( Q_{ic} (G_Q)_{ic} + K_{ic} (G_K)_{ic} + V_{ic} (G_V)_{ic} \right)"


def solve(ex) -> list:
    """Why Xᵀ (one weight's chain rule), the three paths into one cell of X, the matrix forms, a check."""
    v = B.values_of(ex)
    a, c = B.largest(v["G_W_Q"])
    i, b = B.largest(v["G_X"])
    point = {name: v[name] for name in ("X", "W_Q", "W_K", "W_V", "G_Q", "G_K", "G_V")}
    return B.assemble(ex, {"G_W_Q": [B.chain_weight_matrix(v, "Q", a, c, B.places_of(ex, "G_W_Q"))],
                           "G_X": [B.chain_inputs(v, i, b, B.places_of(ex, "G_X"))]},
                      [B.check(ex, loss, LOSS_LATEX, point, "X", (i, b), "G_X")])


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage("backward", r"G_{W_Q} = X^{\top} G_Q,\ G_X")
SHEET = SheetSection("backward", (
    Formula.step("G_W_Q"), Formula.step("G_W_K"), Formula.step("G_W_V"),
    Formula.step("G_X", "formulas.grad_projections.x"),
))
