"""Issue 17 (W17a): cross_attention and padding_mask (backprop_loss: tests/kinds/) test themselves beyond the
registry-wide tests (which iterate exercises.KINDS): references against an independent NumPy
computation (forward) and central finite differences (backward), over 50 seeds per level; every
named mistake diagnosed exactly and rounded; the conventions the prompts state; the golden example."""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from attention_core.ops import padding_mask, softmax_visible
from exercises.core import misconceptions, pipeline

SEEDS = range(50)


def _softmax(Z: np.ndarray) -> np.ndarray:
    """Row-wise softmax written out again (not attention_core's): e^z over the row's sum, 0 for −∞."""
    out = np.zeros(Z.shape)
    for i, row in enumerate(Z):
        seen = np.isfinite(row)
        if seen.any():
            e = np.exp(row[seen] - row[seen].max())
            out[i, seen] = e / e.sum()
    return out


def answers(ex) -> dict[str, np.ndarray]:
    return {p.name: np.array(p.reference) for p in ex.parts}


# ---------------------------------------------------------------- cross_attention


@pytest.mark.parametrize("level", (1, 2, 3))
def test_cross_attention_matches_numpy_over_50_seeds(level):
    for seed in SEEDS:
        ex = exercises.generate("cross_attention", seed, level)
        g, ref = ex.given, answers(ex)
        if "H" in g:
            Q, K, V = g["X"] @ g["W_Q"], g["H"] @ g["W_K"], g["H"] @ g["W_V"]
            for name, M in (("Q", Q), ("K", K), ("V", V)):
                np.testing.assert_allclose(ref[name], M)
        else:
            Q, K, V = g["Q"], g["K"], g["V"]
        assert Q.shape[0] != K.shape[0], "a true rectangle: n_q ≠ n_k"
        S = np.einsum("ik,jk->ij", Q, K)  # (n_q, n_k)
        A = _softmax(S / np.sqrt(g["d_k"]))
        np.testing.assert_allclose(ref["scores"], S)
        np.testing.assert_allclose(ref["A"], A, atol=1e-12)
        np.testing.assert_allclose(ref["O"], A @ V, atol=1e-12)
        assert g["causal"] is False  # no mask belongs in cross-attention


def test_cross_attention_memory_feeds_keys_and_values_not_x():
    ex = exercises.generate("cross_attention", 0, 3)
    env = pipeline.run(ex.given)
    np.testing.assert_allclose(env["K"], ex.given["H"] @ ex.given["W_K"])
    wrong = pipeline.run(ex.given, mistakes={"cross_keys_from_queries"})
    np.testing.assert_allclose(wrong["K"], ex.given["X"] @ ex.given["W_K"])  # self-attention on X
    # its O has the right shape and is named
    fb = exercises.grade(ex, {**answers(ex), "O": np.round(wrong["O"], 2)})
    assert fb.parts["O"].misconception == "cross_keys_from_queries"


@pytest.mark.parametrize("mid", ("cross_causal_mask", "softmax_columns"))
def test_cross_attention_names_its_mistakes_exact_and_rounded(mid):
    named = 0
    for level in (1, 2, 3):
        for seed in range(10):
            ex = exercises.generate("cross_attention", seed, level)
            alt = misconceptions.alternatives(ex).get(mid)
            if alt is None:
                continue
            for shown in (alt["A"], np.round(alt["A"], 2)):
                fb = exercises.grade(ex, {**answers(ex), "A": shown})
                assert fb.parts["A"].misconception == mid, (level, seed)
            named += 1
    assert named >= 20


def test_cross_causal_mask_hides_the_keys_right_of_the_square_diagonal():
    scaled = np.zeros((2, 3))
    hidden = np.isneginf(pipeline.run({"scaled": scaled, "causal": False}, mistakes={"cross_causal_mask"})["masked"])
    assert hidden.tolist() == [[False, True, True], [False, False, True]]
    assert not np.isneginf(pipeline.run({"scaled": scaled, "causal": False})["masked"]).any()
    # a square (self-attention) exercise never makes it
    assert not pipeline.run({"scaled": np.zeros((3, 3)), "causal": False}, mistakes={"cross_causal_mask"}).used


# ---------------------------------------------------------------- padding_mask


def test_padding_mask_golden():
    M = padding_mask([0, 0, 1], causal=True)
    inf = -np.inf
    assert M.tolist() == [[0, inf, inf], [0, 0, inf], [0, 0, inf]]
    assert padding_mask([1, 0, 0], causal=False).tolist() == [[inf, 0, 0]] * 3
    # left padding under the causal mask: the first query sees no key, and attends to nothing
    A = softmax_visible(np.zeros((3, 3)) + padding_mask([1, 0, 0], causal=True))
    assert A.tolist() == [[0, 0, 0], [0, 1, 0], [0, 0.5, 0.5]]


@pytest.mark.parametrize("level", (1, 2, 3))
def test_padding_mask_matches_numpy_over_50_seeds(level):
    empty_rows = 0
    for seed in SEEDS:
        ex = exercises.generate("padding_mask", seed, level)
        g, ref = ex.given, answers(ex)
        pad = np.asarray(g["pad"], dtype=bool).ravel()
        n = pad.size
        hidden = np.zeros((n, n), dtype=bool)
        hidden[:, pad] = True  # a padded key, for every query
        if g["causal"]:
            hidden |= np.arange(n)[None, :] > np.arange(n)[:, None]
        assert np.array_equal(np.isneginf(ref["M"]), hidden) and np.all(ref["M"][~hidden] == 0)
        masked = np.where(hidden, -np.inf, g["scaled"])
        np.testing.assert_array_equal(ref["masked"], masked)
        if "A" in ref:
            np.testing.assert_allclose(ref["A"], _softmax(masked), atol=1e-12)
            empty_rows += int(np.all(hidden, axis=1).any())
    if level == 3:
        assert empty_rows > 0, "the convention for a query that sees no key is exercised"


def test_the_empty_row_convention_is_stated_and_graded():
    ex = next(e for e in (exercises.generate("padding_mask", s, 3) for s in SEEDS)
              if np.all(np.isneginf(e.part("M").reference), axis=1).any())
    assert "all 0" in exercises.core.engine.prompt(ex) and "全部写 0" in exercises.core.engine.prompt(ex, "zh")
    rows = np.all(np.isneginf(ex.part("M").reference), axis=1)  # the queries that see no key
    assert np.all(ex.part("A").reference[rows] == 0)
    uniform = np.array(ex.part("A").reference)
    uniform[rows] = 1 / uniform.shape[1]  # the −1e9 reading
    fb = exercises.grade(ex, {**answers(ex), "A": np.round(uniform, 2)})
    assert not fb.correct and fb.parts["A"].misconception == "padding_empty_row_uniform"
    nan_free = exercises.grade(ex, answers(ex))
    assert nan_free.correct and not nan_free.warnings


@pytest.mark.parametrize("mid, part", [("padding_on_queries", "M"), ("padding_ignored", "M"),
                                       ("padding_after_softmax", "A"), ("no_mask", "M")])
def test_padding_mistakes_are_named(mid, part):
    named = 0
    for level in (1, 2, 3):
        for seed in range(10):
            ex = exercises.generate("padding_mask", seed, level)
            alt = misconceptions.alternatives(ex).get(mid, {})
            if part not in alt:
                continue
            fb = exercises.grade(ex, {**answers(ex), **{k: np.round(v, 2) for k, v in alt.items()}})
            assert fb.parts[part].misconception == mid, (level, seed)
            named += 1
    assert named >= 5


def test_padding_on_queries_masks_rows_not_columns():
    given = {"scaled": np.zeros((3, 3)), "pad": np.array([[0, 0, 1]]), "causal": False}
    right = pipeline.run(given)["M"]
    wrong = pipeline.run(given, mistakes={"padding_on_queries"})["M"]
    assert np.isneginf(right[:, 2]).all() and not np.isneginf(right[:, :2]).any()
    assert np.isneginf(wrong[2]).all() and not np.isneginf(wrong[:2]).any()


def test_the_new_records_change_nothing_without_their_given_values():
    """H, pad and T are read only when given: self-attention runs as before (the pins hold too)."""
    rng = np.random.default_rng(3)
    given = {"X": rng.integers(-2, 3, (3, 2)).astype(float), "W_Q": np.eye(2), "W_K": np.eye(2),
             "W_V": np.eye(2), "d_k": 2, "causal": True, "G_O": np.ones((3, 2))}
    env = pipeline.run(given)
    assert "M" not in env and np.array_equal(env["G_O"], given["G_O"])
    np.testing.assert_allclose(env["K"], given["X"])
