"""attention_block: X̂ = Norm(X) row by row, attention on X̂, Y = X + O.

The references against a direct formula written out here (the norm and attention with loops and einsum,
not attention_core's); the post-norm block against its own formula; every guarded mistake apart from what a
careful student writes; sizes, exact normalised rows and minutes per level; a wrong X̂ carried forward."""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from attention_core.block import post_norm_block, pre_norm_block
from exercises.core import engine, grading, pipeline
from exercises.kinds import attention_block as K
from tests.kinds.common import (
    assert_guarded_mistakes_apart,
    assert_within_minutes_and_no_runaway,
    careful_by_pipeline,
)

SEEDS = range(15)


def _norm_rows(X: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None) -> np.ndarray:
    """The norm row by row with plain loops (population variance; RMSNorm without β)."""
    out = np.zeros_like(X)
    for i, row in enumerate(X):
        mu = sum(row) / len(row) if beta is not None else 0.0
        sigma = (sum((x - mu) ** 2 for x in row) / len(row)) ** 0.5
        for j, x in enumerate(row):
            out[i, j] = gamma[0, j] * (x - mu) / sigma + (beta[0, j] if beta is not None else 0.0)
    return out


def _attention(Xn, W_Q, W_K, W_V, d_k, causal) -> tuple[np.ndarray, np.ndarray]:
    Q, K_, V = Xn @ W_Q, Xn @ W_K, Xn @ W_V
    Z = np.einsum("ik,jk->ij", Q, K_) / np.sqrt(d_k)
    if causal:
        Z = np.where(np.arange(len(Z))[None, :] > np.arange(len(Z))[:, None], -np.inf, Z)
    e = np.exp(Z - Z.max(axis=1, keepdims=True))
    A = e / e.sum(axis=1, keepdims=True)
    return A, A @ V


@pytest.mark.parametrize("level", K.LEVELS)
def test_references_are_the_direct_formula(level):
    for seed in SEEDS:
        ex = exercises.generate(K.ID, seed, level)
        g, case = ex.given, f"attention_block level {level} seed {seed}"
        Xn = _norm_rows(g["X"], g["gamma"], g.get("beta"))
        A, O = _attention(Xn, g["W_Q"], g["W_K"], g["W_V"], g["d_k"], g["causal"])
        expected = {"X_norm": Xn, "Q": Xn @ g["W_Q"], "K": Xn @ g["W_K"], "V": Xn @ g["W_V"], "A": A, "O": O,
                    "Y": g["X"] + O}
        for part in ex.parts:
            np.testing.assert_allclose(part.reference, expected[part.name], atol=1e-12, err_msg=f"{case} {part.name}")
        weights = [g[w] for w in ("W_Q", "W_K", "W_V")]
        np.testing.assert_allclose(pre_norm_block(g["X"], g["gamma"], g.get("beta"), *weights, g["d_k"], g["causal"]),
                                   g["X"] + O, atol=1e-12, err_msg=case)
        # the post-norm block: the norm of the residual sum of attention on the raw rows (a row of equal
        # entries has σ = 0: NaN on both sides)
        _, raw = _attention(g["X"], *weights, g["d_k"], g["causal"])
        with np.errstate(invalid="ignore", divide="ignore"):
            post = post_norm_block(g["X"], g["gamma"], g.get("beta"), *weights, g["d_k"], g["causal"])
            np.testing.assert_allclose(post, _norm_rows(g["X"] + raw, g["gamma"], g.get("beta")), atol=1e-12,
                                       err_msg=case)


@pytest.mark.parametrize("level", K.LEVELS)
def test_each_level_has_its_sizes_exact_rows_and_minutes(level):
    size = K.SIZES[level]
    norms = set()
    for seed in SEEDS:
        ex = exercises.generate(K.ID, seed, level)
        case = f"attention_block level {level} seed {seed}"
        assert ex.part_names == list(size.parts), case
        assert ex.given["X"].shape == (size.n, size.d) and ex.given["W_V"].shape == (size.d, size.d), case
        identity = np.array_equal(ex.given["W_V"], np.eye(size.d))
        assert identity == size.value_identity, f"{case}: W_V = I exactly where the level reads V off"
        said = "kind.attention_block.value_identity" in engine.prompt_keys(ex)
        assert said == identity, f"{case}: the statement says W_V = I exactly when it is"
        Xn = ex.part("X_norm").reference
        assert np.allclose(Xn * 2, np.round(Xn * 2)), f"{case}: X̂ is whole or halves"
        assert len({tuple(row) for row in Xn}) == size.n, f"{case}: two tokens normalise alike"
        norms.add("beta" in ex.given)
    assert norms == {not rms for rms in size.rms}, f"level {level}: LayerNorm / RMSNorm as the level draws them"
    assert_within_minutes_and_no_runaway(K.ID, level)


@pytest.mark.parametrize("level", K.LEVELS)
def test_guarded_mistakes_stay_apart_from_a_careful_student(level):
    """(Each guarded mistake named, exact and rounded: tests/test_misconceptions.py; careful students right:
    tests/test_fair_grading.py, both over every kind.)"""
    assert_guarded_mistakes_apart(K.ID, level, careful_by_pipeline, range(10))


def test_a_wrong_norm_carries_forward_and_the_solution_shows_every_cell():
    ex = exercises.generate(K.ID, 3, 2)
    wrong = pipeline.run(ex.given, ("norm_variance_unbiased",))  # every later step computed from the wrong X̂
    fb = exercises.grade(ex, {name: wrong[name] for name in ex.part_names})
    assert fb.parts["X_norm"].misconception == "norm_variance_unbiased", fb.parts["X_norm"]
    assert (fb.parts["Q"].status == grading.CONSISTENT).all(), "Q from the learner's own X̂"
    steps = exercises.solve(ex)
    assert [s.name for s in steps][0] == "X_norm" and steps[-1].name == "Y"
    for step in (steps[0], steps[-1]):
        for i, j in np.ndindex(step.value.shape):
            assert step.derive(i, j).latex, f"attention_block {step.name} cell {i},{j}"


def test_level_1_reads_v_off_with_no_product_by_the_identity():
    """W_V = I at level 1: the solution says V = X̂ W_V = X̂ I = X̂ and writes no product, as the count reads it off."""
    for seed in range(3):
        ex = exercises.generate(K.ID, seed, 1)
        case = f"attention_block level 1 seed {seed}"
        V = {s.name: s for s in exercises.solve(ex)}["V"]
        assert V.latex == r"V = \hat{X} W_V = \hat{X} I = \hat{X}" and "identity" in str(V.note), (case, V.latex)
        assert not V.work and not V.work_substitutions, f"{case}: a product by I written out"
        np.testing.assert_array_equal(V.value, ex.part("X_norm").reference, err_msg=case)
        for i, j in np.ndindex(V.shape):
            cell = V.derive(i, j)
            assert cell.latex.startswith(rf"V_{{{i + 1}{j + 1}}} = \hat{{X}}_{{{i + 1}{j + 1}}} = ") and not \
                cell.substitutions, (case, cell.latex)
