"""masking: the causal mask sets the future keys to −∞, so their weight is exactly 0."""

from __future__ import annotations

import numpy as np

from attention_core import softmax
from tests.kinds.common import guarded_mistakes_named, levels_hold, references_agree


def _masked(g):
    z = np.array(g["scaled"], dtype=float)
    z[np.triu_indices_from(z, k=1)] = -np.inf
    return z


def test_the_future_is_minus_infinity_and_its_weight_exactly_zero():
    def oracle(g):
        z = _masked(g)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return {"masked": z, "A": e / e.sum(axis=1, keepdims=True)}
    references_agree("masking", oracle)


def test_the_mask_mistakes_are_named():
    seen = guarded_mistakes_named("masking")
    assert {"mask_diagonal", "mask_wrong_triangle", "no_mask"} <= seen, sorted(seen)


def test_level_1_asks_the_mask_and_later_levels_the_weights_too():
    def check(ex):
        assert ex.part_names == (["masked"] if ex.level == 1 else ["masked", "A"]), ex.id
        if "A" in ex.part_names:
            A = ex.part("A").reference
            assert (A[np.triu_indices_from(A, k=1)] == 0).all(), ex.id
            np.testing.assert_allclose(A, softmax(_masked(ex.given)), err_msg=ex.id)
    levels_hold("masking", check)
