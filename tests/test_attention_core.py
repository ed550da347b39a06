"""attention_core against independent oracles: central finite differences, golden examples, invariants.

Every gradient is checked on the scalar loss L = sum(O ⊙ G_O), so that ∂L/∂O = G_O exactly.
Axis letters: n tokens, d d_model, d_k, d_v, h heads, m vocabulary size.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attention_core import (
    backward,
    causal_mask,
    embed,
    embed_backward,
    multi_head_attention,
    multi_head_backward,
    ops,
    scaled_dot_product,
    self_attention,
    softmax,
)
from attention_core.embedding import embed_backward_loop

EPS = 1e-6  # central difference step
FD_TOL = dict(rtol=1e-5, atol=1e-7)  # |analytic − numeric| ≤ atol + rtol·|numeric|, cell by cell
N_GRADIENT_CASES = 200


# ---------------------------------------------------------------- the oracle


def numeric_grad(loss, x: np.ndarray) -> np.ndarray:
    """∂loss/∂x by central differences, one cell at a time (loss reads x, which is perturbed in place)."""
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        keep = x[idx]
        x[idx] = keep + EPS
        up = loss(x)
        x[idx] = keep - EPS
        down = loss(x)
        x[idx] = keep
        g[idx] = (up - down) / (2 * EPS)
    return g


def reference_softmax_rows(z: np.ndarray) -> np.ndarray:
    """A second, plain softmax for the oracle: exp of the row minus its max, over the row sum."""
    e = np.exp(z - z.max(axis=1, keepdims=True))  # (n, n)
    return e / e.sum(axis=1, keepdims=True)


def masked_copy(z: np.ndarray, causal: bool) -> np.ndarray:
    """−∞ after each query's own position; the n_q queries are the last n_q of the n_k positions."""
    z = np.array(z, dtype=float)  # (n_q, n_k); square: (n, n)
    if causal:
        n_q, n_k = z.shape
        for i in range(n_q):
            z[i, max(0, i + 1 + n_k - n_q):] = -np.inf  # square: z[i, i + 1:]
    return z


def random_problem(seed: int):
    """Shapes and values from the seed: n, d, d_k, d_v each in 1…6; causal on every other seed."""
    rng = np.random.default_rng(seed)
    n, d, d_k, d_v = (int(v) for v in rng.integers(1, 7, size=4))
    if seed == 0:
        n = d = d_k = d_v = 1  # the smallest corner is always in the sample
    if seed == 1:
        n = d = d_k = d_v = 6  # and the largest
    causal = seed % 2 == 1
    X = rng.normal(size=(n, d))  # (n, d)
    W_Q = rng.normal(size=(d, d_k))  # (d, d_k)
    W_K = rng.normal(size=(d, d_k))  # (d, d_k)
    W_V = rng.normal(size=(d, d_v))  # (d, d_v)
    G_O = rng.normal(size=(n, d_v))  # (n, d_v)
    return X, W_Q, W_K, W_V, G_O, causal


def assert_close(analytic, numeric, name: str, seed: int) -> None:
    np.testing.assert_allclose(analytic, numeric, **FD_TOL, err_msg=f"{name}, seed {seed}")


# ---------------------------------------------------------------- finite differences


def test_random_cases_cover_the_required_shapes():
    shapes = {random_problem(s)[1].shape + random_problem(s)[3].shape[1:] for s in range(N_GRADIENT_CASES)}
    causal = {random_problem(s)[5] for s in range(N_GRADIENT_CASES)}
    assert causal == {True, False}
    ns = {random_problem(s)[0].shape[0] for s in range(N_GRADIENT_CASES)}
    assert ns == set(range(1, 7))
    assert len(shapes) > 50


def attention_step_checks(tr, g, G_O, causal: bool) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{name: (analytic, numeric)} for the gradients of the attention steps from A back to Q, K, V,
    each against central finite differences of the loss Σ O ⊙ G_O."""
    d_k = tr.Q.shape[1]

    def loss_after_A(A):
        return float(np.sum((A @ tr.V) * G_O))

    def loss_after_scaled(z):
        return loss_after_A(reference_softmax_rows(masked_copy(z, causal)))

    def loss_after_scores(S):
        return loss_after_scaled(S / math.sqrt(d_k))

    def loss_after_qkv(Q, K, V):
        return float(np.sum(scaled_dot_product(Q, K, V, causal=causal).O * G_O))

    Q, K, V = tr.Q.copy(), tr.K.copy(), tr.V.copy()
    return {
        "G_A": (g.G_A, numeric_grad(loss_after_A, tr.A.copy())),
        "G_scaled": (g.G_scaled, numeric_grad(loss_after_scaled, tr.scaled.copy())),
        "G_scores": (g.G_scores, numeric_grad(loss_after_scores, tr.scores.copy())),
        "G_Q": (g.G_Q, numeric_grad(lambda q: loss_after_qkv(q, K, V), Q.copy())),
        "G_K": (g.G_K, numeric_grad(lambda k: loss_after_qkv(Q, k, V), K.copy())),
        "G_V": (g.G_V, numeric_grad(lambda v: loss_after_qkv(Q, K, v), V.copy())),
    }


@pytest.mark.parametrize("seed", range(N_GRADIENT_CASES))
def test_every_single_head_gradient_matches_finite_differences(seed):
    X, W_Q, W_K, W_V, G_O, causal = random_problem(seed)
    tr = self_attention(X, W_Q, W_K, W_V, causal=causal)
    g = backward(tr, G_O)

    def loss_after_weights(X_, W_Q_, W_K_, W_V_):
        return float(np.sum(self_attention(X_, W_Q_, W_K_, W_V_, causal=causal).O * G_O))

    checks = {
        **attention_step_checks(tr, g, G_O, causal),
        "G_X": (g.G_X, numeric_grad(lambda x: loss_after_weights(x, W_Q, W_K, W_V), X.copy())),
        "G_W_Q": (g.G_W_Q, numeric_grad(lambda w: loss_after_weights(X, w, W_K, W_V), W_Q.copy())),
        "G_W_K": (g.G_W_K, numeric_grad(lambda w: loss_after_weights(X, W_Q, w, W_V), W_K.copy())),
        "G_W_V": (g.G_W_V, numeric_grad(lambda w: loss_after_weights(X, W_Q, W_K, w), W_V.copy())),
    }
    for name, (analytic, numeric) in checks.items():
        assert analytic.shape == numeric.shape, name
        assert_close(analytic, numeric, name, seed)
    if causal:
        hidden = causal_mask(X.shape[0])  # (n, n)
        assert np.all(g.G_scaled[hidden] == 0.0)
        assert np.all(g.G_scores[hidden] == 0.0)


@pytest.mark.parametrize("seed", range(60))
def test_multi_head_gradients_match_finite_differences(seed):
    rng = np.random.default_rng(10_000 + seed)
    n, d, h = int(rng.integers(1, 6)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
    causal = bool(seed % 2)
    d_ks = [int(v) for v in rng.integers(1, 4, size=h)]
    d_vs = [int(v) for v in rng.integers(1, 4, size=h)]  # heads may differ in width
    X = rng.normal(size=(n, d))  # (n, d)
    W_Q = [rng.normal(size=(d, dk)) for dk in d_ks]  # h × (d, d_k)
    W_K = [rng.normal(size=(d, dk)) for dk in d_ks]  # h × (d, d_k)
    W_V = [rng.normal(size=(d, dv)) for dv in d_vs]  # h × (d, d_v)
    with_projection = seed % 3 != 0
    W_O = rng.normal(size=(sum(d_vs), int(rng.integers(1, 4)))) if with_projection else None  # (h·d_v, d_out)
    tr = multi_head_attention(X, W_Q, W_K, W_V, W_O=W_O, causal=causal)
    G_out = rng.normal(size=tr.out.shape)  # (n, d_out)
    g = multi_head_backward(tr, G_out)

    def loss(X_=X, W_Q_=W_Q, W_K_=W_K, W_V_=W_V, W_O_=W_O):
        return float(np.sum(multi_head_attention(X_, W_Q_, W_K_, W_V_, W_O=W_O_, causal=causal).out * G_out))

    assert_close(g.G_X, numeric_grad(lambda x: loss(X_=x), X.copy()), "G_X", seed)
    if with_projection:
        assert_close(g.G_W_O, numeric_grad(lambda w: loss(W_O_=w), W_O.copy()), "G_W_O", seed)
    else:
        assert g.G_W_O is None
    def swap(ws, i, w):
        """The per-head list with head i's matrix replaced by w."""
        return [w if j == i else ws[j] for j in range(h)]

    for i in range(h):
        for name, ws, key, analytic in (("G_W_Q", W_Q, "W_Q_", g.G_W_Q), ("G_W_K", W_K, "W_K_", g.G_W_K),
                                        ("G_W_V", W_V, "W_V_", g.G_W_V)):
            numeric = numeric_grad(lambda w, ws=ws, key=key, i=i: loss(**{key: swap(ws, i, w)}), ws[i].copy())
            assert_close(analytic[i], numeric, f"{name}[{i}]", seed)


@pytest.mark.parametrize("seed", range(60))
def test_embedding_gradient_matches_finite_differences(seed):
    rng = np.random.default_rng(20_000 + seed)
    m, n, d, d_k = int(rng.integers(1, 5)), int(rng.integers(1, 7)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
    ids = rng.integers(m, size=n)  # (n,), repeats are likely
    E = rng.normal(size=(m, d))  # (m, d)
    W_Q, W_K, W_V = (rng.normal(size=(d, d_k)) for _ in range(3))  # (d, d_k) each
    causal = bool(seed % 2)
    G_O = rng.normal(size=(n, d_k))  # (n, d_v)

    def loss(E_):
        return float(np.sum(self_attention(embed(ids, E_), W_Q, W_K, W_V, causal=causal).O * G_O))

    g = backward(self_attention(embed(ids, E), W_Q, W_K, W_V, causal=causal), G_O)
    G_E = embed_backward(ids, g.G_X, m)  # (m, d)
    assert_close(G_E, numeric_grad(loss, E.copy()), "G_E", seed)
    np.testing.assert_array_equal(G_E, embed_backward_loop(ids, g.G_X, m))


def test_embedding_gradient_accumulates_repeated_tokens():
    G_X = np.array([[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]])  # (3, 2)
    G_E = embed_backward([1, 0, 1], G_X, 3)
    np.testing.assert_array_equal(G_E, [[10, 20], [101, 202], [0, 0]])
    np.testing.assert_array_equal(embed([2, 0], [[1, 1], [2, 2], [3, 3]]), [[3, 3], [1, 1]])


# ---------------------------------------------------------------- golden examples (DESIGN §10)


def test_golden_causal_self_attention():
    X = np.array([[1, 0], [0, 1], [1, 1]])  # (3, 2)
    I = np.eye(2)
    tr = self_attention(X, I, I, I, causal=True)
    np.testing.assert_allclose(tr.A, [[1, 0, 0], [0.330, 0.670, 0], [0.248, 0.248, 0.503]], atol=5e-4)
    np.testing.assert_allclose(tr.O, [[1, 0], [0.330, 0.670], [0.752, 0.752]], atol=5e-4)
    assert tr.A[0, 1] == 0.0 and tr.A[0, 2] == 0.0 and tr.A[1, 2] == 0.0
    assert np.all(np.isneginf(tr.masked[causal_mask(3)]))
    np.testing.assert_array_equal(tr.scores, X @ X.T)
    np.testing.assert_allclose(tr.scaled, X @ X.T / math.sqrt(2))


def test_golden_grad_of_weighted_sum_one_query():
    V = np.array([[2, 4], [6, 8]])  # (2, d_v)
    tr = scaled_dot_product(np.array([[0.5, -1.0]]), np.array([[1.0, 0.0], [0.0, 1.0]]), V)
    g = backward(tr, [[1, 2]])
    np.testing.assert_array_equal(g.G_A, [[10, 22]])
    assert g.G_W_Q is None and g.G_X is None  # a Q, K, V trace has no projections


def test_softmax_of_large_scores_is_finite_and_exact():
    a = softmax(np.array([1000.0, 1001.0]))
    assert np.all(np.isfinite(a))
    np.testing.assert_allclose(a, [1 / (1 + math.e), math.e / (1 + math.e)], rtol=0, atol=1e-12)
    assert abs(a[0] - 0.2689414213699951) < 1e-12 and abs(a[1] - 0.7310585786300049) < 1e-12


@settings(max_examples=150, deadline=None)
@given(z=arrays(float, st.tuples(st.integers(1, 5), st.integers(1, 6)), elements=st.floats(-50, 50)),
       c=st.floats(-1000, 1000))
def test_softmax_unchanged_by_subtracting_a_constant_from_a_row(z, c):
    shifted = z.copy()
    shifted[0] -= c
    np.testing.assert_allclose(softmax(shifted), softmax(z), rtol=1e-9, atol=1e-12)


def test_variance_of_dot_product_with_dk_64_by_monte_carlo():
    """Var(q·k) = d_k for unit-variance entries: standard deviation 8 for d_k = 64, and 1 after scaling."""
    rng = np.random.default_rng(64)
    Q = rng.standard_normal((1500, 64))  # (n, d_k)
    K = rng.standard_normal((1500, 64))  # (n, d_k)
    S = ops.scores(Q, K)  # (n, n): 2.25 million dot products
    assert abs(S.std() - 8.0) < 0.2
    assert abs(ops.scale(S, 64).std() - 1.0) < 0.025
    assert abs(ops.scale(S, 64).mean()) < 0.02


# ---------------------------------------------------------------- invariants

small = st.floats(-8, 8, allow_nan=False)


@st.composite
def qkv(draw):
    n, d_k, d_v = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    Q = draw(arrays(float, (n, d_k), elements=small))
    K = draw(arrays(float, (n, d_k), elements=small))
    V = draw(arrays(float, (n, d_v), elements=small))
    return Q, K, V, draw(st.booleans())


@settings(max_examples=200, deadline=None)
@given(qkv())
def test_rows_of_A_sum_to_one_and_masked_weights_are_exactly_zero(problem):
    Q, K, V, causal = problem
    tr = scaled_dot_product(Q, K, V, causal=causal)
    np.testing.assert_allclose(tr.A.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(tr.A >= 0)
    n = Q.shape[0]
    if causal:
        assert np.all(tr.A[causal_mask(n)] == 0.0)
        assert np.all(np.isneginf(tr.masked[causal_mask(n)]))
        assert np.array_equal(tr.masked[~causal_mask(n)], tr.scaled[~causal_mask(n)])
    else:
        np.testing.assert_array_equal(tr.masked, tr.scaled)
    np.testing.assert_allclose(tr.O, tr.A @ V, atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(z=st.integers(1, 6).flatmap(lambda n: arrays(float, (n, n), elements=st.floats(-20, 20))),
       seed=st.integers(0, 2**32 - 1), causal=st.booleans())
def test_softmax_backward_loop_agrees_with_vectorised(z, seed, causal):
    A = softmax(masked_copy(z, causal))  # (n, n), zeros above the diagonal when causal
    G_A = np.random.default_rng(seed).normal(size=A.shape)  # (n, n)
    np.testing.assert_allclose(ops.softmax_backward(A, G_A), ops.softmax_backward_loop(A, G_A), atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(m=st.integers(1, 6), ids=st.lists(st.integers(0, 5), min_size=1, max_size=8), d=st.integers(1, 4),
       seed=st.integers(0, 2**32 - 1))
def test_embed_backward_loop_agrees_with_vectorised(m, ids, d, seed):
    ids = [i % m for i in ids]
    G_X = np.random.default_rng(seed).normal(size=(len(ids), d))  # (n, d)
    np.testing.assert_allclose(embed_backward(ids, G_X, m), embed_backward_loop(ids, G_X, m), atol=1e-12)


def test_causal_mask_is_strict_upper_triangle():
    np.testing.assert_array_equal(causal_mask(3), [[False, True, True], [False, False, True], [False, False, False]])
    assert not causal_mask(1).any()


# ---------------------------------------------------------------- shape errors name both shapes


def names(message: str, shape: tuple[int, int]) -> bool:
    return f"{shape[0]}×{shape[1]}" in message


def test_mismatched_d_k_names_both_shapes():
    with pytest.raises(ValueError) as err:
        scaled_dot_product(np.ones((3, 2)), np.ones((3, 4)), np.ones((3, 2)))
    assert names(str(err.value), (3, 2)) and names(str(err.value), (3, 4))


def test_keys_and_values_of_different_length_name_both_shapes():
    with pytest.raises(ValueError) as err:
        scaled_dot_product(np.ones((3, 2)), np.ones((3, 2)), np.ones((2, 5)))
    assert names(str(err.value), (3, 2)) and names(str(err.value), (2, 5))


def test_causal_with_more_queries_than_keys_names_both_shapes():
    # fewer queries than keys is the decoding case (tests/test_rectangular.py); more would leave the
    # first query rows with no visible key
    with pytest.raises(ValueError) as err:
        scaled_dot_product(np.ones((3, 2)), np.ones((1, 2)), np.ones((1, 2)), causal=True)
    assert names(str(err.value), (3, 2)) and names(str(err.value), (1, 2))


def test_projection_mismatch_names_both_shapes():
    with pytest.raises(ValueError) as err:
        self_attention(np.ones((3, 2)), np.ones((2, 2)), np.ones((4, 2)), np.ones((2, 2)))
    assert names(str(err.value), (3, 2)) and names(str(err.value), (4, 2))


def test_wrong_G_O_names_both_shapes():
    tr = scaled_dot_product(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 4)))
    with pytest.raises(ValueError) as err:
        backward(tr, np.ones((2, 4)))
    assert names(str(err.value), (3, 4)) and names(str(err.value), (2, 4))


def test_output_projection_mismatch_names_both_shapes():
    X, W = np.ones((3, 2)), [np.ones((2, 2))]
    with pytest.raises(ValueError) as err:
        multi_head_attention(X, W, W, W, W_O=np.ones((5, 2)))
    assert names(str(err.value), (3, 2)) and names(str(err.value), (5, 2))


def test_embedding_gradient_with_wrong_row_count_names_the_shape():
    with pytest.raises(ValueError) as err:
        embed_backward([0, 1, 1], np.ones((2, 4)), 3)
    assert names(str(err.value), (2, 4)) and "3 token ids" in str(err.value)


def test_non_matrix_and_out_of_range_inputs_are_value_errors():
    with pytest.raises(ValueError, match="2-D"):
        scaled_dot_product(np.ones(3), np.ones((3, 1)), np.ones((3, 1)))
    with pytest.raises(ValueError, match="0…2"):
        embed([0, 3], np.ones((3, 2)))
    with pytest.raises(ValueError):
        multi_head_attention(np.ones((2, 2)), [np.eye(2)], [np.eye(2), np.eye(2)], [np.eye(2)])
