"""Issue 14: the heavy kinds (attention, multi_head; backprop: tests/kinds/) teach what they claim and are hand work.

Each test here failed on the generators before the issue: attention's level 1 had d_k = 1 in 39% of
variants and levels 2-3 projected d_model = 2 up to d_k = 4; multi_head always used d_k = 1.
"""

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


@pytest.mark.parametrize("level", [2, 3])
def test_multi_head_heads_scale_by_a_root_that_changes_their_output(level):
    from exercises.kinds import multi_head

    for seed in SEEDS:
        ex = exercises.generate("multi_head", seed, level)
        assert int(ex.given["d_k"]) == 2 <= ex.given["X"].shape[1], f"seed {seed}"
        for i in range(1, multi_head.head_count(ex) + 1):
            alternatives = multi_head._head_mistakes(multi_head.head_given(ex.given, i), ("no_scaling",))
            assert "no_scaling" in alternatives, f"seed {seed} head {i}: forgetting √d_k changes nothing"
            assert not np.allclose(alternatives["no_scaling"], ex.part(f"O{i}").reference)
