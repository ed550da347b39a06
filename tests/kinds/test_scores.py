"""scores: S = Q Kᵀ, row i the query asking, column j the key asked."""

from __future__ import annotations

import numpy as np

from tests.kinds.common import guarded_mistakes_named, levels_hold, references_agree


def test_each_score_is_a_query_dot_a_key():
    references_agree("scores", lambda g: {"scores": np.array([[q @ k for k in g["K"]] for q in g["Q"]])})


def test_k_q_transposed_is_named():
    assert "transposed_scores" in guarded_mistakes_named("scores")


def test_levels_keep_short_dot_products():
    def check(ex):
        assert ex.given["Q"].shape[1] in ((2, 3) if ex.level < 3 else (2, 4)), ex.id
        assert (ex.given["Q"] != 0).any(axis=1).all() and (ex.given["K"] != 0).any(axis=1).all(), ex.id
    levels_hold("scores", check)
