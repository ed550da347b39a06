"""linear_attention: φ(Q)(φ(K)ᵀV) / φ(Q)(φ(K)ᵀ1), and the causal running state.

attention_core.linear against the quadratic order written out here (loops over i, j) over many random
shapes and seeds, causal too; the exercises' references against the same; the kind's mistakes named,
exact and rounded; sizes and minutes per level; a wrong state carried into O."""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from attention_core import linear
from exercises.kinds import linear_attention as K
from tests.kinds.common import (
    assert_within_minutes_and_no_runaway,
    named_mistakes,
)

SEEDS = range(15)


def _phi(x: float) -> float:
    return x + 1.0 if x > 0 else float(np.exp(x))


def quadratic(Q: np.ndarray, K_: np.ndarray, V: np.ndarray, causal: bool) -> np.ndarray:
    """O_i = Σ_j w_ij v_j / Σ_j w_ij with w_ij = φ(q_i)·φ(k_j), written with loops (j ≤ i when causal)."""
    n = len(Q)
    O = np.zeros((n, V.shape[1]))
    for i in range(n):
        seen = range(i + 1) if causal else range(n)
        w = [sum(_phi(a) * _phi(b) for a, b in zip(Q[i], K_[j])) for j in seen]
        O[i] = sum(wj * V[j] for wj, j in zip(w, seen)) / sum(w)
    return O


@pytest.mark.parametrize("seed", range(40))
def test_the_linear_order_is_the_quadratic_order(seed):
    rng = np.random.default_rng(seed)
    n, d_k, d_v = (int(x) for x in rng.integers(1, 6, size=3))
    Q, K_, V = rng.normal(size=(n, d_k)) * 2, rng.normal(size=(n, d_k)) * 2, rng.normal(size=(n, d_v))
    phi_Q, phi_K = linear.feature_map(Q), linear.feature_map(K_)
    O = linear.linear_order(phi_Q, linear.key_value(phi_K, V), linear.normaliser(phi_K))
    np.testing.assert_allclose(O, quadratic(Q, K_, V, False), rtol=1e-10, err_msg=f"seed {seed}")
    np.testing.assert_allclose(linear.quadratic_order(phi_Q, phi_K, V), O, rtol=1e-10, err_msg=f"seed {seed}")
    S, z = linear.causal_states(phi_K, V)
    np.testing.assert_allclose(linear.causal_linear_order(phi_Q, S, z), quadratic(Q, K_, V, True), rtol=1e-10,
                               err_msg=f"seed {seed} causal")
    np.testing.assert_allclose(S[-1], phi_K.T @ V, rtol=1e-12, err_msg=f"seed {seed}: the last state is KV")
    quad, lin = linear.multiplications(n, d_k, d_v)
    assert (quad, lin) == (n * n * d_k + n * n * d_v, n * d_k * d_v * 2 + n * d_k), f"seed {seed}"


@pytest.mark.parametrize("level", K.LEVELS)
def test_references_sizes_and_minutes(level):
    size = K.SIZES[level]
    for seed in SEEDS:
        ex = exercises.generate(K.ID, seed, level)
        g, case = ex.given, f"linear_attention level {level} seed {seed}"
        assert ex.part_names == list(size.parts), case
        assert g["Q"].shape == (size.n, size.d_k) and g["V"].shape == (size.n, size.d_v), case
        assert set(np.unique(np.concatenate([g["Q"], g["K"]]))) <= {0, 1, 2}, f"{case}: φ(x) = x + 1 by hand"
        np.testing.assert_allclose(ex.part("O").reference, quadratic(g["Q"], g["K"], g["V"], g["causal"]),
                                   atol=1e-12, err_msg=case)
        phi_K = np.vectorize(_phi)(g["K"])
        np.testing.assert_allclose(ex.part("phi_K").reference, phi_K, err_msg=case)
        if size.causal:
            np.testing.assert_allclose(ex.part("z_t").reference, np.cumsum(phi_K, axis=0), err_msg=case)
            np.testing.assert_allclose(ex.part("S_t").reference, np.cumsum(phi_K * g["V"], axis=0), err_msg=case)
        else:
            np.testing.assert_allclose(ex.part("KV").reference, phi_K.T @ g["V"], err_msg=case)
            np.testing.assert_allclose(ex.part("z").reference, phi_K.sum(axis=0)[:, None], err_msg=case)
    assert_within_minutes_and_no_runaway(K.ID, level)


@pytest.mark.parametrize("level", K.LEVELS)
def test_mistakes_are_named(level):
    """(Careful students right: tests/test_fair_grading.py works this kind with attention_core.linear.)"""
    named = named_mistakes(K.ID, level, lambda ex, part: K.mistakes_of(ex).get(part, {}), range(10))
    expected = {"linear_no_normaliser", "linear_softmax_kept"}
    expected |= {"linear_state_sees_future"} if K.SIZES[level].causal else set()
    expected |= {"linear_counts_swapped"} if "mults" in K.SIZES[level].parts else set()
    assert expected <= named, (level, sorted(named))


def test_a_wrong_state_carries_into_the_output():
    ex = exercises.generate(K.ID, 2, 3)
    right = {p.name: p.reference for p in ex.parts}
    S = right["S_t"].copy()
    S[1, 0] += 1  # a slip in the second state: O_2 from it is consistent, not right
    own = K.chain(ex, {**{k: v for k, v in right.items() if k != "O"}, "S_t": S}, None)["O"]
    fb = exercises.grade(ex, {**right, "S_t": S, "O": own})
    assert not fb.correct and fb.parts["O"].status[1, 0] == "consistent", fb.parts["O"].status
