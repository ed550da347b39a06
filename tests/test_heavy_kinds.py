"""Issue 14: the heavy kinds (attention, backprop) teach what they claim and are hand work.

Each test here failed on the generators before the issue: attention's level 1 had d_k = 1 in 39% of
variants and levels 2-3 projected d_model = 2 up to d_k = 4; backprop's A was the uniform causal
matrix at every seed. (multi_head's heads scale by √2: tests/kinds/test_multi_head.py.)
"""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from exercises.core import pipeline

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


@pytest.mark.parametrize("level", [1, 2, 3])
def test_backprop_weights_are_a_real_non_uniform_softmax_so_the_plain_mean_is_wrong(level):
    for seed in SEEDS:
        ex = exercises.generate("backprop", seed, level)
        A, n = np.asarray(ex.given["A"]), ex.given["A"].shape[0]
        uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
        assert not np.allclose(A, uniform), f"seed {seed}: A is the uniform causal matrix"
        # A is the softmax of the stated, masked scores, positive wherever the mask allows
        recomputed = pipeline.run({k: ex.given[k] for k in ("Q", "K", "V", "d_k", "causal")})["A"]
        np.testing.assert_allclose(A, recomputed, atol=1e-12)
        assert (A[np.tril(np.ones((n, n), dtype=bool))] > 0).all()
        plain_mean = uniform.T @ np.asarray(ex.given["G_O"])  # G_V with the gradients averaged
        assert not np.allclose(plain_mean, ex.part("G_V").reference), f"seed {seed}: the plain mean passes"
        if "X" in ex.given:
            assert int(ex.given["d_k"]) <= ex.given["X"].shape[1], f"seed {seed}: projected up"
