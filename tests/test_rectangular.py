"""Rectangular attention: n_q queries and n_k keys, against the oracles of test_attention_core.

Every gradient is checked on the scalar loss L = sum(O ⊙ G_O) by central finite differences. The
causal convention is the decoding one: the n_q queries are the last n_q of the n_k positions, so key j
is hidden from query i when j > i + (n_k − n_q). Square attention is the case n_q = n_k.
Axis letters: n_q queries, n_k keys, d width of X, d_m width of the memory H, d_k, d_v.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attention_core import backward, causal_mask, cross_attention, ops, scaled_dot_product, self_attention, softmax
from exercises.core.levels import LEVELS, LevelSpec
from tests.test_attention_core import (
    assert_close,
    attention_step_checks,
    masked_copy,
    numeric_grad,
)

SIZES = range(1, 7)
# every (n_q, n_k) in 1…6 without a mask, and every one with n_q ≤ n_k with the causal mask
SHAPES = [(n_q, n_k, False) for n_q, n_k in itertools.product(SIZES, SIZES)] + \
         [(n_q, n_k, True) for n_q, n_k in itertools.product(SIZES, SIZES) if n_q <= n_k]
SEEDS_PER_SHAPE = 3


def random_cross_problem(n_q: int, n_k: int, seed: int):
    """Widths d, d_m, d_k, d_v each in 1…5 from the seed; X (n_q, d) and a memory H (n_k, d_m)."""
    rng = np.random.default_rng(30_000 + 1000 * n_q + 100 * n_k + seed)
    d, d_m, d_k, d_v = (int(v) for v in rng.integers(1, 6, size=4))
    X = rng.normal(size=(n_q, d))  # (n_q, d)
    H = rng.normal(size=(n_k, d_m))  # (n_k, d_m)
    W_Q = rng.normal(size=(d, d_k))  # (d, d_k)
    W_K = rng.normal(size=(d_m, d_k))  # (d_m, d_k)
    W_V = rng.normal(size=(d_m, d_v))  # (d_m, d_v)
    G_O = rng.normal(size=(n_q, d_v))  # (n_q, d_v)
    return X, H, W_Q, W_K, W_V, G_O


# ---------------------------------------------------------------- the causal mask of a rectangle


def test_square_causal_mask_is_unchanged():
    for n in range(0, 8):
        old = np.triu(np.ones((n, n), dtype=bool), k=1)  # (n, n): the definition before rectangles
        np.testing.assert_array_equal(causal_mask(n), old)
        np.testing.assert_array_equal(causal_mask(n, n), old)


def test_rectangular_causal_mask_cell_by_cell():
    for n_q, n_k in itertools.product(range(0, 7), range(0, 7)):
        mask = causal_mask(n_q, n_k)  # (n_q, n_k)
        assert mask.shape == (n_q, n_k) and mask.dtype == bool
        for i, j in itertools.product(range(n_q), range(n_k)):
            assert mask[i, j] == (j > i + (n_k - n_q)), (n_q, n_k, i, j)


def test_rectangular_causal_mask_examples():
    F, T = False, True
    np.testing.assert_array_equal(causal_mask(2, 4), [[F, F, F, T], [F, F, F, F]])
    assert not causal_mask(1, 3).any(), "one decoding step sees every cached key and its own"
    np.testing.assert_array_equal(causal_mask(4, 2), [[T, T], [T, T], [F, T], [F, F]])
    assert not causal_mask(3, 5)[-1].any(), "the last query sees every key"


@pytest.mark.parametrize("n_q,n_k", [(n_q, n_k) for n_q, n_k in itertools.product(SIZES, SIZES) if n_q <= n_k])
def test_rectangular_causal_attention_is_the_last_rows_of_full_causal_attention(n_q, n_k):
    """The decoding convention: the last n_q queries against all n_k keys give the last n_q rows."""
    rng = np.random.default_rng(40_000 + 10 * n_q + n_k)
    Q = rng.normal(size=(n_k, 3))  # (n_k, d_k): one query per position
    K = rng.normal(size=(n_k, 3))  # (n_k, d_k)
    V = rng.normal(size=(n_k, 2))  # (n_k, d_v)
    full = scaled_dot_product(Q, K, V, causal=True)  # square, n_k × n_k
    last = scaled_dot_product(Q[-n_q:], K, V, causal=True)  # (n_q, n_k)
    np.testing.assert_array_equal(np.isneginf(last.masked), np.isneginf(full.masked[-n_q:]))
    np.testing.assert_allclose(last.A, full.A[-n_q:], rtol=0, atol=1e-12)
    np.testing.assert_allclose(last.O, full.O[-n_q:], rtol=0, atol=1e-12)


def test_apply_mask_and_its_backward_accept_rectangles():
    z = np.arange(8, dtype=float).reshape(2, 4)  # (n_q, n_k) = (2, 4)
    masked = ops.apply_mask(z, True)  # (2, 4)
    np.testing.assert_array_equal(masked, masked_copy(z, True))
    assert np.isneginf(masked[0, 3]) and np.isfinite(masked[1]).all()
    np.testing.assert_array_equal(ops.apply_mask(z, False), z)
    G = ops.apply_mask_backward(np.ones((2, 4)), True)  # (2, 4)
    np.testing.assert_array_equal(G, [[1, 1, 1, 0], [1, 1, 1, 1]])
    np.testing.assert_array_equal(ops.apply_mask_backward(np.ones((4, 2)), True), ~causal_mask(4, 2))


# ---------------------------------------------------------------- finite differences


def test_shapes_cover_every_rectangle_with_and_without_the_mask():
    assert {(n_q, n_k) for n_q, n_k, causal in SHAPES if not causal} == set(itertools.product(SIZES, SIZES))
    assert sum(causal for *_, causal in SHAPES) == 21  # n_q ≤ n_k for n_q, n_k in 1…6
    assert any(n_q < n_k for n_q, n_k, _ in SHAPES) and any(n_q > n_k for n_q, n_k, _ in SHAPES)


@pytest.mark.parametrize("seed", range(SEEDS_PER_SHAPE))
@pytest.mark.parametrize("n_q,n_k,causal", SHAPES)
def test_every_cross_attention_gradient_matches_finite_differences(n_q, n_k, causal, seed):
    X, H, W_Q, W_K, W_V, G_O = random_cross_problem(n_q, n_k, seed)
    tr = cross_attention(X, H, W_Q, W_K, W_V, causal=causal)
    g = backward(tr, G_O)
    d_k, d_v = W_Q.shape[1], W_V.shape[1]
    assert tr.scores.shape == tr.scaled.shape == tr.masked.shape == tr.A.shape == (n_q, n_k)
    assert tr.Q.shape == (n_q, d_k) and tr.K.shape == (n_k, d_k) and tr.V.shape == (n_k, d_v)
    assert tr.O.shape == (n_q, d_v)

    def loss_after_inputs(X_, H_, W_Q_, W_K_, W_V_):
        return float(np.sum(cross_attention(X_, H_, W_Q_, W_K_, W_V_, causal=causal).O * G_O))

    checks = {
        **attention_step_checks(tr, g, G_O, causal),
        "G_X": (g.G_X, numeric_grad(lambda x: loss_after_inputs(x, H, W_Q, W_K, W_V), X.copy())),
        "G_H": (g.G_H, numeric_grad(lambda h: loss_after_inputs(X, h, W_Q, W_K, W_V), H.copy())),
        "G_W_Q": (g.G_W_Q, numeric_grad(lambda w: loss_after_inputs(X, H, w, W_K, W_V), W_Q.copy())),
        "G_W_K": (g.G_W_K, numeric_grad(lambda w: loss_after_inputs(X, H, W_Q, w, W_V), W_K.copy())),
        "G_W_V": (g.G_W_V, numeric_grad(lambda w: loss_after_inputs(X, H, W_Q, W_K, w), W_V.copy())),
    }
    label = f"(n_q, n_k, causal) = {(n_q, n_k, causal)}, seed"
    for name, (analytic, numeric) in checks.items():
        assert analytic.shape == numeric.shape, name
        assert_close(analytic, numeric, f"{name} {label}", seed)
    # the contract's formulas, exactly
    np.testing.assert_array_equal(g.G_W_Q, X.T @ g.G_Q)
    np.testing.assert_array_equal(g.G_W_K, H.T @ g.G_K)
    np.testing.assert_array_equal(g.G_W_V, H.T @ g.G_V)
    np.testing.assert_array_equal(g.G_X, g.G_Q @ W_Q.T)
    np.testing.assert_allclose(g.G_H, g.G_K @ W_K.T + g.G_V @ W_V.T, rtol=0, atol=1e-12)
    if causal:
        hidden = causal_mask(n_q, n_k)  # (n_q, n_k)
        assert np.all(tr.A[hidden] == 0.0) and np.all(np.isneginf(tr.masked[hidden]))
        assert np.all(g.G_scaled[hidden] == 0.0)
        assert np.all(g.G_scores[hidden] == 0.0)


@pytest.mark.parametrize("seed", range(20))
def test_cross_attention_of_a_sequence_with_itself_is_self_attention(seed):
    rng = np.random.default_rng(50_000 + seed)
    n, d, d_k, d_v = (int(v) for v in rng.integers(1, 6, size=4))
    causal = bool(seed % 2)
    X = rng.normal(size=(n, d))  # (n, d)
    W_Q, W_K, W_V = rng.normal(size=(d, d_k)), rng.normal(size=(d, d_k)), rng.normal(size=(d, d_v))
    G_O = rng.normal(size=(n, d_v))  # (n, d_v)
    own, cross = self_attention(X, W_Q, W_K, W_V, causal), cross_attention(X, X, W_Q, W_K, W_V, causal)
    for name in ("Q", "K", "V", "scores", "scaled", "masked", "A", "O"):
        np.testing.assert_array_equal(getattr(own, name), getattr(cross, name), err_msg=name)
    assert own.H is None and cross.H is not None
    g_own, g_cross = backward(own, G_O), backward(cross, G_O)
    assert g_own.G_H is None
    for name in ("G_A", "G_V", "G_scaled", "G_scores", "G_Q", "G_K", "G_W_Q", "G_W_K", "G_W_V"):
        np.testing.assert_array_equal(getattr(g_own, name), getattr(g_cross, name), err_msg=name)
    # self-attention's X is both the queries' input and the memory: its gradient is the sum of both
    np.testing.assert_allclose(g_own.G_X, g_cross.G_X + g_cross.G_H, rtol=0, atol=1e-12)


# ---------------------------------------------------------------- invariants

small = st.floats(-8, 8, allow_nan=False)


@st.composite
def rectangular_qkv(draw):
    n_q, n_k, d_k, d_v = (draw(st.integers(1, 6)) for _ in range(4))
    causal = draw(st.booleans()) and n_q <= n_k
    Q = draw(arrays(float, (n_q, d_k), elements=small))  # (n_q, d_k)
    K = draw(arrays(float, (n_k, d_k), elements=small))  # (n_k, d_k)
    V = draw(arrays(float, (n_k, d_v), elements=small))  # (n_k, d_v)
    return Q, K, V, causal


@settings(max_examples=200, deadline=None)
@given(rectangular_qkv())
def test_rectangular_rows_of_A_sum_to_one_and_masked_weights_are_exactly_zero(problem):
    Q, K, V, causal = problem
    tr = scaled_dot_product(Q, K, V, causal=causal)
    np.testing.assert_allclose(tr.A.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(tr.A >= 0)
    hidden = causal_mask(Q.shape[0], K.shape[0]) if causal else np.zeros(tr.A.shape, dtype=bool)  # (n_q, n_k)
    assert np.all(tr.A[hidden] == 0.0) and np.all(np.isneginf(tr.masked[hidden]))
    np.testing.assert_array_equal(tr.masked[~hidden], tr.scaled[~hidden])
    np.testing.assert_allclose(tr.O, tr.A @ V, atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(z=st.tuples(st.integers(1, 6), st.integers(1, 6)).flatmap(
           lambda shape: arrays(float, (min(shape), max(shape)), elements=st.floats(-20, 20))),
       seed=st.integers(0, 2**32 - 1), causal=st.booleans())
def test_rectangular_softmax_backward_loop_agrees_with_vectorised(z, seed, causal):
    A = softmax(masked_copy(z, causal))  # (n_q, n_k), n_q ≤ n_k
    G_A = np.random.default_rng(seed).normal(size=A.shape)  # (n_q, n_k)
    np.testing.assert_allclose(ops.softmax_backward(A, G_A), ops.softmax_backward_loop(A, G_A), atol=1e-12)


# ---------------------------------------------------------------- shape errors name both shapes


def names(message: str, shape: tuple[int, int]) -> bool:
    return f"{shape[0]}×{shape[1]}" in message


def test_cross_attention_projection_mismatch_names_both_shapes():
    X, H = np.ones((2, 3)), np.ones((4, 5))
    with pytest.raises(ValueError) as err:
        cross_attention(X, H, np.ones((3, 2)), np.ones((3, 2)), np.ones((5, 2)))  # W_K fits X, not H
    assert names(str(err.value), (4, 5)) and names(str(err.value), (3, 2)) and "W_K" in str(err.value)
    with pytest.raises(ValueError) as err:
        cross_attention(X, H, np.ones((5, 2)), np.ones((5, 2)), np.ones((5, 2)))  # W_Q fits H, not X
    assert names(str(err.value), (2, 3)) and names(str(err.value), (5, 2)) and "W_Q" in str(err.value)


def test_causal_cross_attention_needs_at_least_as_many_keys_as_queries():
    W = np.eye(2)
    assert cross_attention(np.ones((2, 2)), np.ones((5, 2)), W, W, W, causal=True).A.shape == (2, 5)
    with pytest.raises(ValueError) as err:
        cross_attention(np.ones((4, 2)), np.ones((3, 2)), W, W, W, causal=True)
    assert names(str(err.value), (4, 2)) and names(str(err.value), (3, 2))


# ---------------------------------------------------------------- level specs name both token axes


def test_level_specs_keep_todays_fields_and_values():
    assert [LEVELS[k].n for k in (1, 2, 3)] == [(2, 3), (3,), (4,)]
    assert [LEVELS[k].d_k for k in (1, 2, 3)] == [(1, 4), (2, 4), (4, 8)]
    assert [LEVELS[k].denominators for k in (1, 2, 3)] == [(1, 2), (2, 4), (2, 3, 4)]
    assert [LEVELS[k].decimals for k in (1, 2, 3)] == [2, 2, 2]
    assert LEVELS[1].values == (0, 1, 2) and LEVELS[2].values == (-2, -1, 0, 1, 2)
    assert LEVELS[3].values == tuple(np.arange(-2, 3.01, 0.5))


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_level_specs_draw_true_rectangles_no_larger_than_the_square(level):
    s = LEVELS[level]
    assert s.n_q and s.n_k
    assert max(s.n_q) < min(s.n_k), "every draw is a rectangle and a causal row always sees a key"
    assert max(s.n_q) * max(s.n_k) <= max(s.n) ** 2, "no more cells than the level's square"
    rng = np.random.default_rng(level)
    n_q, n_k = int(rng.choice(s.n_q)), int(rng.choice(s.n_k))
    Q, K, V = rng.normal(size=(n_q, 2)), rng.normal(size=(n_k, 2)), rng.normal(size=(n_k, 2))
    assert scaled_dot_product(Q, K, V, causal=True).A.shape == (n_q, n_k)


def test_a_level_spec_without_token_axes_is_square():
    s = LevelSpec(n=(3, 4), d_k=(2,), values=(0, 1), denominators=(2,))
    assert s.n_q == s.n_k == s.n == (3, 4)
