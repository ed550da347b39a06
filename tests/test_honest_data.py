"""Every variant teaches what it claims. Given attention weights are a real softmax of the
scores the page states; the data of the projection kinds is never degenerate, and a symmetric W_V never
lets a forgotten transpose pass. Each test fails on the older generators (the versions below)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import exercises
from attention_core import causal_mask
from attention_core.ops import softmax
from tests import generated

SEEDS = range(60)
WEIGHT_KINDS = ("weighted_sum", "grad_weighted_sum", "grad_softmax")


def stated_scores(text: str) -> np.ndarray:
    """The scores a prompt states, "[0, ln 2; −∞, 0]", as numbers (ln c = log c, −∞ = −inf)."""
    def cell(entry: str) -> float:
        entry = entry.strip()
        if entry == "−∞":
            return -np.inf
        found = re.fullmatch(r"ln (\d+)", entry)
        assert entry == "0" or found, entry
        return 0.0 if entry == "0" else float(np.log(int(found.group(1))))
    assert text.startswith("[") and text.endswith("]"), text
    return np.array([[cell(e) for e in row.split(",")] for row in text[1:-1].split(";")])


def test_stated_scores_read_back():
    np.testing.assert_array_equal(stated_scores("[0, ln 2; −∞, 0]"), [[0, np.log(2)], [-np.inf, 0]])


@pytest.mark.parametrize("kind", WEIGHT_KINDS)
@pytest.mark.parametrize("level", (1, 2, 3))
def test_given_weights_are_the_softmax_of_the_stated_masked_scores(kind, level):
    for seed in SEEDS:
        ex = generated.exercise(kind, seed, level)
        A = np.asarray(ex.given["A"], dtype=float)  # (n, n)
        hidden = causal_mask(A.shape[0]) if ex.given["causal"] else np.zeros(A.shape, dtype=bool)
        where = (kind, level, seed)
        assert np.all(A[~hidden] > 0), where  # a softmax never gives 0 to a key the mask lets a query see
        assert np.all(A[hidden] == 0), where  # and exactly 0 where the mask hides it
        np.testing.assert_allclose(A.sum(axis=1), 1.0, atol=1e-12, err_msg=str(where))
        assert "scores_behind" in ex.params, where
        Z = stated_scores(ex.params["scores_behind"])  # (n, n), −∞ where masked
        assert np.array_equal(np.isneginf(Z), hidden), where  # the stated scores are masked where A is
        np.testing.assert_allclose(softmax(Z, axis=-1), A, atol=1e-12, err_msg=str(where))
        assert ex.params["scores_behind"] in exercises.core.engine.prompt(ex), where  # and the page states them


def test_a_causal_row_never_gives_a_query_zero_weight_on_itself():
    """grad_softmax level 3 seed 1 said "causal" with row 4 of A = [½, ½, 0, 0]."""
    for level in (1, 2, 3):
        for seed in SEEDS:
            ex = exercises.generate("grad_softmax", seed, level)
            if ex.given["causal"]:
                assert np.all(np.diag(ex.given["A"]) > 0), (level, seed)


def test_a_square_w_v_is_never_symmetric():
    """grad_value_proj level 1: a symmetric W_V (29% of variants) let G_V W_V pass for G_V W_Vᵀ."""
    for level in exercises.KINDS["grad_value_proj"].LEVELS:
        for seed in range(100):
            ex = exercises.generate("grad_value_proj", seed, level)
            W_V, G_V = ex.given["W_V"], ex.given["G_V"]
            if W_V.shape[0] == W_V.shape[1]:
                assert not np.array_equal(W_V, W_V.T), (level, seed)
                assert np.abs(G_V @ W_V - ex.part("G_X_V").reference).max() > 0.5, (level, seed)


def one_hot_rows(W: np.ndarray) -> np.ndarray:
    """Which rows hold a single nonzero entry, ±1 (the row copies one column of X through)."""
    return (np.count_nonzero(W, axis=1) == 1) & (np.abs(W).sum(axis=1) == 1)


def test_projection_tokens_differ_and_no_weight_row_is_one_hot():
    """projection level 1 had two equal token rows in 24% of variants and a one-hot weight row in 45%."""
    for level in exercises.KINDS["projection"].LEVELS:
        for seed in range(100):
            ex = exercises.generate("projection", seed, level)
            X = ex.given["X"]
            assert len({tuple(row) for row in X}) == len(X), (level, seed)
            for name in ("W_Q", "W_K", "W_V"):
                if name in ex.given:
                    assert not one_hot_rows(ex.given[name]).any(), (level, seed, name)


def test_the_generators_one_hot_rule_is_the_same():
    from exercises.kinds.projection import one_hot_rows as generators
    W = np.array([[0.0, 1.0], [-1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    assert generators(W).tolist() == one_hot_rows(W).tolist() == [True, True, False, False]


def test_grad_projections_never_has_equal_query_and_key_weights():
    """grad_projections level 1 had W_Q = W_K in 27% of variants."""
    for level in exercises.KINDS["grad_projections"].LEVELS:
        for seed in range(100):
            ex = exercises.generate("grad_projections", seed, level)
            assert not np.array_equal(ex.given["W_Q"], ex.given["W_K"]), (level, seed)
