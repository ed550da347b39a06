"""grad_scores: G_S = G_Z / √d_k, then G_Q = G_S K and G_K = G_Sᵀ Q."""

from __future__ import annotations

import math

import numpy as np

from tests.kinds.common import guarded_mistakes_named, levels_hold, references_agree


def test_the_query_and_key_gradients_come_through_the_scaling():
    def oracle(g):
        G_S = np.asarray(g["G_scaled"]) / math.sqrt(g["d_k"])
        return {"G_scores": G_S, "G_Q": G_S @ g["K"], "G_K": G_S.T @ g["Q"]}
    references_agree("grad_scores", oracle)


def test_the_scale_and_transpose_mistakes_are_named():
    seen = guarded_mistakes_named("grad_scores")
    assert {"grad_scores_no_scale", "grad_k_no_transpose"} <= seen, sorted(seen)


def test_the_masked_cells_carry_no_gradient():
    def check(ex):
        if ex.given["causal"]:
            G = np.asarray(ex.given["G_scaled"])
            assert (G[np.triu_indices_from(G, k=1)] == 0).all(), ex.id
    levels_hold("grad_scores", check)
