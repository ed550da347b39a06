"""weighted_sum: O = A V, output row i the mix of the value rows weighted by query i's attention."""

from __future__ import annotations

import numpy as np

from tests.kinds.common import guarded_mistakes_named, levels_hold, references_agree


def test_each_output_row_mixes_the_values_by_its_weights():
    references_agree("weighted_sum", lambda g: {"O": np.array([sum(a * v for a, v in zip(row, g["V"]))
                                                               for row in g["A"]])})


def test_a_transposed_weights_mistake_is_named():
    assert guarded_mistakes_named("weighted_sum") == {"weights_transposed"}


def test_weights_are_a_real_softmax_of_simple_fractions():
    def check(ex):
        A = ex.given["A"]
        np.testing.assert_allclose(A.sum(axis=1), 1.0, err_msg=ex.id)
        np.testing.assert_allclose(A * 12, np.round(A * 12), atol=1e-9, err_msg=ex.id)
        assert "scores_behind" in ex.params, ex.id
    levels_hold("weighted_sum", check)
