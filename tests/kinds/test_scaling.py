"""scaling: Z = S / √d_k, the step that keeps a score's variance near 1."""

from __future__ import annotations

import math

from tests.kinds.common import guarded_mistakes_named, levels_hold, references_agree


def test_each_score_is_divided_by_the_root_of_d_k():
    references_agree("scaling", lambda g: {"scaled": g["scores"] / math.sqrt(g["d_k"])})


def test_no_scaling_dividing_by_d_k_and_multiplying_are_named():
    assert guarded_mistakes_named("scaling") == {"no_scaling", "scaled_by_dk", "scaled_times_sqrt_dk"}


def test_d_k_is_never_1_so_the_step_shows():
    def check(ex):
        assert ex.given["d_k"] > 1, ex.id
    levels_hold("scaling", check)
