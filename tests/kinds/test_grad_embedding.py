"""grad_embedding: a repeated token's gradient rows add up in G_E."""

from __future__ import annotations

import exercises


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
