"""projection: Q = X W_Q (and K, V), one token row times the weights per row."""

from __future__ import annotations

import numpy as np

from tests.kinds.common import levels_hold, references_agree


def test_each_projection_is_x_times_its_weights():
    def oracle(g):
        return {name: np.einsum("nd,dk->nk", g["X"], g[f"W_{name}"]) for name in ("Q", "K", "V") if f"W_{name}" in g}
    references_agree("projection", oracle)


def test_levels_keep_their_sizes_and_two_wide_keys():
    def check(ex):
        assert ex.given["X"].shape[1] == (2 if ex.level < 3 else 3), ex.id
        assert all(ex.given[f"W_{p.name}"].shape == (ex.given["X"].shape[1], 2) for p in ex.parts), ex.id
    levels_hold("projection", check)
