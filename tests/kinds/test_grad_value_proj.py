"""grad_value_proj: G_W_V = Xᵀ G_V and the value path's share of G_X, G_V W_Vᵀ."""

from __future__ import annotations

import numpy as np

from tests.kinds.common import guarded_mistakes_named, levels_hold, references_agree


def test_the_weight_and_input_gradients_are_the_transposed_products():
    def oracle(g):
        return {"G_W_V": np.einsum("nd,nk->dk", g["X"], g["G_V"]), "G_X_V": np.einsum("nk,dk->nd", g["G_V"], g["W_V"])}
    references_agree("grad_value_proj", oracle)


def test_the_forgotten_transpose_is_named_where_w_v_is_square():
    assert guarded_mistakes_named("grad_value_proj") == {"grad_x_v_no_transpose"}


def test_levels_keep_their_widths():
    def check(ex):
        assert ex.given["W_V"].shape == {1: (2, 2), 2: (3, 2), 3: (3, 2)}[ex.level], ex.id
    levels_hold("grad_value_proj", check)
