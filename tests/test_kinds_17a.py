"""Issue 17 (W17a): backprop_loss tests itself beyond the registry-wide tests (which iterate
exercises.KINDS): references against an independent NumPy computation and central finite differences,
over 50 seeds per level; every named mistake diagnosed exactly and rounded; the golden example.
(cross_attention and padding_mask: tests/kinds/.)"""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from exercises.core import pipeline

SEEDS = range(50)


def answers(ex) -> dict[str, np.ndarray]:
    return {p.name: np.array(p.reference) for p in ex.parts}


# ---------------------------------------------------------------- backprop_loss


def _loss(X, W_Q, W_K, W_V, T):
    from attention_core import self_attention

    return 0.5 * float(np.sum((self_attention(X, W_Q, W_K, W_V, causal=True).O - T) ** 2))


def test_backprop_loss_level_1_is_the_notes_example():
    ex = exercises.generate("backprop_loss", 0, 1)
    g = ex.given
    np.testing.assert_array_equal(g["X"], [[1, 0], [0, 1], [1, 1]])
    for w in ("W_Q", "W_K", "W_V"):
        np.testing.assert_array_equal(g[w], np.eye(2))
    assert g["causal"] is True and g["d_k"] == 2
    # DESIGN §10: A ≈ [[1,0,0],[0.330,0.670,0],[0.248,0.248,0.503]], O ≈ [[1,0],[0.330,0.670],[0.752,0.752]]
    np.testing.assert_allclose(g["A"], [[1, 0, 0], [0.33, 0.67, 0], [0.25, 0.25, 0.50]])
    np.testing.assert_allclose(g["O"], [[1, 0], [0.33, 0.67], [0.75, 0.75]])
    np.testing.assert_allclose(ex.part("G_O").reference, g["O"] - g["T"])
    assert [p.name for p in ex.parts] == ["G_O", "G_A", "G_V"]


@pytest.mark.parametrize("level", (1, 2, 3))
def test_backprop_loss_references_over_50_seeds(level):
    """The references are the backward pass of the numbers shown (numpy, written out); computed from
    the unrounded forward pass they agree with central finite differences of L = ½‖O − T‖²."""
    for seed in SEEDS:
        ex = exercises.generate("backprop_loss", seed, level)
        g, ref = ex.given, answers(ex)
        A, O, T, X = g["A"], g["O"], g["T"], g["X"]
        assert np.all(np.abs(ref["G_O"]) > 0)  # T − O and 2(O − T) differ from O − T in every cell
        G_O = O - T
        V = X @ g["W_V"]
        np.testing.assert_allclose(ref["G_O"], G_O)
        np.testing.assert_allclose(ref["G_A"], G_O @ V.T)
        np.testing.assert_allclose(ref["G_V"], A.T @ G_O)
        if "G_scaled" in ref:
            G_A = G_O @ V.T
            G_Z = A * (G_A - np.sum(A * G_A, axis=1, keepdims=True))
            np.testing.assert_allclose(ref["G_scaled"], G_Z, atol=1e-12)
            np.testing.assert_allclose(ref["G_scores"], G_Z / np.sqrt(g["d_k"]), atol=1e-12)
    # finite differences through the whole (unrounded) forward pass, for the last seed's weights
    from attention_core import backward, self_attention

    tr = self_attention(X, g["W_Q"], g["W_K"], g["W_V"], causal=True)
    grads = backward(tr, tr.O - T)
    h = 1e-6
    for name in ("X", "W_Q", "W_K", "W_V"):
        point = {"X": X, "W_Q": g["W_Q"], "W_K": g["W_K"], "W_V": g["W_V"]}
        analytic = getattr(grads, "G_" + name)
        for idx in np.ndindex(point[name].shape):
            up = {k: np.array(v, dtype=float) for k, v in point.items()}
            down = {k: np.array(v, dtype=float) for k, v in point.items()}
            up[name][idx] += h
            down[name][idx] -= h
            fd = (_loss(**up, T=T) - _loss(**down, T=T)) / (2 * h)
            assert fd == pytest.approx(analytic[idx], abs=1e-6), (level, name, idx)


@pytest.mark.parametrize("mid, factor", [("loss_grad_sign", -1.0), ("loss_grad_doubled", 2.0)])
def test_the_loss_mistakes_are_named_on_g_o(mid, factor):
    for level in (1, 2, 3):
        for seed in range(10):
            ex = exercises.generate("backprop_loss", seed, level)
            wrong = factor * ex.part("G_O").reference
            for shown in (wrong, np.round(wrong, 2)):
                fb = exercises.grade(ex, {**answers(ex), "G_O": shown})
                assert fb.parts["G_O"].misconception == mid, (level, seed)
                assert fb.parts["G_A"].correct  # the later parts are right from the given numbers


def test_the_new_records_change_nothing_without_their_given_values():
    """H, pad and T are read only when given: self-attention runs as before (the pins hold too)."""
    rng = np.random.default_rng(3)
    given = {"X": rng.integers(-2, 3, (3, 2)).astype(float), "W_Q": np.eye(2), "W_K": np.eye(2),
             "W_V": np.eye(2), "d_k": 2, "causal": True, "G_O": np.ones((3, 2))}
    env = pipeline.run(given)
    assert "M" not in env and np.array_equal(env["G_O"], given["G_O"])
    np.testing.assert_allclose(env["K"], given["X"])
