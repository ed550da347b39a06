"""Teaching texts that state a fact (issue 14): the fact they state is the right one, in both languages."""

from __future__ import annotations

import numpy as np
import pytest

from attention_core import softmax
from exercises.i18n import t


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_embedding_hint_says_row_i_of_x_is_row_token_ids_i_of_e(lang):
    text = t("hint.grad_embedding.nudge", lang)
    assert "token_ids[i]" in text
    assert "for token i" not in text and "词元 i 在 E" not in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_diagonal_only_explanation_sums_the_missing_term_over_the_other_weights(lang):
    text = t("misconception.softmax_grad_diagonal_only", lang)
    assert "Σ_(k≠j) a_k G_A[k]" in text and "Σ_k a_k" not in text
    assert "a_j (1 − a_j)" in text


def test_the_stated_terms_add_up_to_the_softmax_gradient():
    """a_j(1 − a_j) G_A[j] − a_j Σ_(k≠j) a_k G_A[k] is the gradient A ⊙ (G_A − rowsum(A ⊙ G_A))."""
    rng = np.random.default_rng(0)
    a = softmax(rng.normal(size=(1, 4)))[0]
    g = rng.normal(size=4)
    right = a * (g - np.sum(a * g))
    stated = np.array([a[j] * (1 - a[j]) * g[j] - a[j] * sum(a[k] * g[k] for k in range(4) if k != j)
                       for j in range(4)])
    np.testing.assert_allclose(stated, right)
    with_every_k = np.array([a[j] * (1 - a[j]) * g[j] - a[j] * np.sum(a * g) for j in range(4)])
    assert not np.allclose(with_every_k, right)  # the old wording's sum over every k is not it
