"""softmax: A = softmax over each row; a −∞ score gets weight exactly 0."""

from __future__ import annotations

import numpy as np

from tests.kinds.common import guarded_mistakes_named, levels_hold, references_agree


def _softmax_rows(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))  # e^{-∞} = 0
    return e / e.sum(axis=1, keepdims=True)


def test_each_row_is_a_softmax():
    references_agree("softmax", lambda g: {"A": _softmax_rows(np.asarray(g.get("masked", g.get("scaled")), float))})


def test_columns_no_exp_and_unnormalised_rows_are_named():
    seen = guarded_mistakes_named("softmax")
    assert {"softmax_columns", "no_exp", "softmax_no_normalise"} <= seen, sorted(seen)


def test_rows_sum_to_one_and_masked_weights_are_zero():
    def check(ex):
        A = ex.part("A").reference
        np.testing.assert_allclose(A.sum(axis=1), 1.0, err_msg=ex.id)
        if ex.given["causal"]:
            assert (A[np.isneginf(ex.given["masked"])] == 0).all(), ex.id
    levels_hold("softmax", check)
