"""Backward through scaled = Q Kᵀ / √d_k: G_scores = G_scaled / √d_k, G_Q = G_scores K, G_K = G_scoresᵀ Q.

Score S[i,j] = Σ_c Q[i,c] K[j,c], so ∂S[i,j]/∂Q[i,c] = K[j,c]: query row i collects its row of
G_scores against the keys. Key row j is met by every query in column j: G_K = G_scoresᵀ Q.
"""

from __future__ import annotations

import numpy as np

from attention_core import causal_mask
from attention_core.ops import scale, scores

from ...core.contract import Formula, HomeStage, SheetSection
from ...core.draft import Draft, reference_parts
from ...core.levels import spec
from ...core.numbers import choice, matrix, nonzero_matrix
from .._shared import backward as B
from .._shared.values import whole_values

ID = "grad_scores"
ORDER = 230
VERSION = 2
LEVELS = (1, 2, 3)
# every catalogued mistake that can apply to this kind's parts: the redraw keeps them apart
GUARDS = ("grad_scores_no_scale", "grad_k_no_transpose", "grad_q_transposed", "grad_scores_times_sqrt_dk")
D_K = {1: (4,), 2: (2, 4), 3: (4,)}  # √d_k whole where the chain is long; √2 at level 2 for practice
PARTS_BY_LEVEL = {1: ["G_scores", "G_Q", "G_K"], 2: ["G_Q", "G_K"], 3: ["G_Q", "G_K"]}


def softmax_like_gradient(rng: np.random.Generator, n: int, values, causal: bool) -> np.ndarray:
    """An integer G_scaled as a softmax backward makes it: each row sums to 0, masked cells are 0."""
    hidden = causal_mask(n) if causal else np.zeros((n, n), dtype=bool)
    limit = max(abs(v) for v in values)
    G = np.zeros((n, n))  # (n, n)
    for i in range(n):
        visible = np.flatnonzero(~hidden[i])
        if len(visible) < 2:
            continue  # one visible key: its weight is always 1, so no gradient reaches its score
        while True:
            row = matrix(rng, (1, len(visible)), values)[0]  # (len(visible),)
            row[-1] = -row[:-1].sum()
            if abs(row[-1]) <= limit + 1 and np.any(row != 0):
                break
        G[i, visible] = row
    return G


def generate(rng: np.random.Generator, level: int) -> Draft:
    """A variant (the sampler draws again when the numbers make it too long for the level's minutes)."""
    s = spec(level)
    n = 2 if level == 1 else choice(rng, s.n)  # three tokens of d_k = 4 take over level 1's 5 minutes
    d_k = int(choice(rng, D_K[level]))
    causal = bool(rng.integers(2))
    given = {"G_scaled": softmax_like_gradient(rng, n, whole_values(level), causal),  # (n, n)
             "Q": nonzero_matrix(rng, (n, d_k), s.values),  # (n, d_k)
             "K": nonzero_matrix(rng, (n, d_k), s.values),  # (n, d_k)
             "d_k": d_k, "causal": causal}
    return Draft(given=given, parts=reference_parts(given, PARTS_BY_LEVEL[level], s.decimals),
                 params={"n": n, "d_k": d_k})


def loss_for(d_k: int):
    def loss(p: dict[str, np.ndarray]) -> float:
        """L = Σ Z ⊙ G_Z with Z = Q Kᵀ / √d_k."""
        return float(np.sum(scale(scores(p["Q"], p["K"]), d_k) * p["G_scaled"]))
    return loss


def solve(ex) -> list:
    """Where 1/√d_k comes from, one query's and one key's chain rule, the matrix forms, a check."""
    v = B.values_of(ex)
    i, j = B.largest(v["G_scaled"])
    q = B.largest(v["G_Q"])
    k = B.largest(v["G_K"])
    point = {name: v[name] for name in ("Q", "K", "G_scaled")}
    return B.assemble(ex, {"G_scores": [B.scale(v, i, j, B.places_of(ex, "G_scores"))],
                           "G_Q": [B.chain_queries(v, *q, B.places_of(ex, "G_Q"))],
                           "G_K": [B.chain_keys(v, *k, B.places_of(ex, "G_K"))]},
                      [B.check(ex, loss_for(int(ex.given["d_k"])),
                               r"\sum_{i,j} Z_{ij} (G_Z)_{ij}, \quad Z = \frac{Q K^{\top}}{\sqrt{d_k}}", point, "Q", q,
                               "G_Q")])


# ---------------------------------------------------------------- Home and the formula sheet

HOME = HomeStage.of_steps("backward", "G_Q", "G_K")
SHEET = SheetSection("backward", (
    Formula.step("G_scores", "formulas.grad_scores.scale"),
    Formula.step("G_Q"), Formula.step("G_K", "formulas.grad_scores.qk"),
))
