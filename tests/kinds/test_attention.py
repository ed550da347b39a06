"""attention: the whole forward pass, one part per step, errors carried forward, hand-friendly scores."""

from __future__ import annotations

import numpy as np
import pytest

import exercises

SEEDS = range(30)


@pytest.mark.parametrize("level", [1, 2, 3])
def test_attention_scales_by_a_root_that_changes_something_and_never_projects_up(level):
    for seed in SEEDS:
        ex = exercises.generate("attention", seed, level)
        d_k = int(ex.given["d_k"])
        assert d_k >= 2, f"seed {seed}: d_k = 1 makes the asked scaling step a copy"
        assert d_k in (2, 4), f"seed {seed}: √d_k is whole (4) or the one clean root √2"
        if "X" in ex.given:
            assert d_k <= ex.given["X"].shape[1], f"seed {seed}: d_model {ex.given['X'].shape[1]} → d_k {d_k}"
        S, Z = ex.part("scores").reference, ex.part("scaled").reference
        assert not np.allclose(S, Z), f"seed {seed}: the scaled scores equal the scores"
