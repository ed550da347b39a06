"""grad_embedding: a repeated token's gradient rows add up in G_E."""

from __future__ import annotations

import numpy as np
import pytest

import exercises
from attention_core import embed_backward
from exercises.cli import selftest
from exercises.core import misconceptions
from exercises.i18n import catalog, t


def test_embedding_exercises_repeat_a_token_and_leave_one_out():
    for level in (1, 2, 3):
        for seed in range(20):
            ex = exercises.generate("grad_embedding", seed, level)
            ids = ex.given["token_ids"].tolist()
            m = ex.given["E"].shape[0]
            assert len(set(ids)) < len(ids) and len(set(ids)) < m
            G_E = ex.part("G_E").reference
            unused = [t for t in range(m) if t not in ids]
            assert (G_E[unused] == 0).all()


SEEDS = range(60)


def _by_position(ex) -> np.ndarray:
    G_X = ex.given["G_X"]  # (n, d)
    G_E = np.zeros(np.shape(ex.given["E"]))  # (m, d)
    G_E[:len(G_X)] = G_X
    return G_E


def _one_based(ex) -> np.ndarray:
    return embed_backward(np.asarray(ex.given["token_ids"]) - 1, ex.given["G_X"], np.shape(ex.given["E"])[0])


def _named(ex, value) -> str | None:
    fb = exercises.grade(ex, {"G_E": selftest.as_text(value)})
    assert not fb.correct
    return fb.parts["G_E"].misconception


@pytest.mark.parametrize("level", [1, 2, 3])
def test_copied_by_position_is_named(level):
    for seed in SEEDS:
        ex = exercises.generate("grad_embedding", seed, level)
        assert _named(ex, _by_position(ex)) == "embedding_grad_by_position", (level, seed)


@pytest.mark.parametrize("level", [1, 2, 3])
def test_ids_read_as_one_based_are_named(level):
    made = 0
    for seed in SEEDS:
        ex = exercises.generate("grad_embedding", seed, level)
        if min(ex.given["token_ids"]) >= 1:  # with an id 0 the mistake cannot be made
            made += 1
            assert _named(ex, _one_based(ex)) == "embedding_ids_one_based", (level, seed)
    assert made >= 10


@pytest.mark.parametrize("level", [1, 2, 3])
def test_every_variant_tells_the_mistakes_apart(level):
    for seed in SEEDS:
        ex = exercises.generate("grad_embedding", seed, level)
        part = ex.part("G_E")
        alts = {"embedding_grad_by_position": _by_position(ex),
                "embedding_grad_no_accumulate": misconceptions.alternatives(ex)["embedding_grad_no_accumulate"]["G_E"]}
        if min(ex.given["token_ids"]) >= 1:
            alts["embedding_ids_one_based"] = _one_based(ex)
        assert misconceptions.clashes(part.reference, alts, misconceptions.separation(part)) == [], (level, seed)
        assert _named(ex, alts["embedding_grad_no_accumulate"]) == "embedding_grad_no_accumulate"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_new_mistakes_are_explained_and_named_in_both_languages(lang):
    texts = catalog(lang)
    for mid in ("embedding_grad_by_position", "embedding_ids_one_based"):
        assert "token_ids[i]" in texts[f"misconception.{mid}"]
        assert texts[f"progress.mistake.{mid}"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_embedding_hint_says_row_i_of_x_is_row_token_ids_i_of_e(lang):
    text = t("hint.grad_embedding.nudge", lang)
    assert "token_ids[i]" in text
    assert "for token i" not in text and "词元 i 在 E" not in text
