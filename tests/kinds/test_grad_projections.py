"""grad_projections: G_W_Q = Xᵀ G_Q (and K, V), and G_X adding the three paths X feeds."""

from __future__ import annotations

import numpy as np

from tests.kinds.common import guarded_mistakes_named, levels_hold, references_agree


def test_the_weight_gradients_and_the_three_paths_into_x():
    def oracle(g):
        out = {f"G_W_{m}": g["X"].T @ g[f"G_{m}"] for m in "QKV"}
        out["G_X"] = sum(g[f"G_{m}"] @ g[f"W_{m}"].T for m in "QKV")
        return out
    references_agree("grad_projections", oracle)


def test_every_forgotten_path_is_named():
    seen = guarded_mistakes_named("grad_projections")
    assert {"grad_x_no_value_path", "grad_x_query_path_only"} <= seen, sorted(seen)


def test_query_and_key_weights_differ():
    def check(ex):
        assert not np.array_equal(ex.given["W_Q"], ex.given["W_K"]), ex.id
    levels_hold("grad_projections", check)
