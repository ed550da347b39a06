"""A kind's generator changed after an assignment was made: a VERSION bump and other problems."""

from __future__ import annotations

import numpy as np

import exercises


def bump(monkeypatch, kind: str) -> None:
    """From now on `kind` gives other exercises for the same (seed, level), under VERSION + 1."""
    module = exercises.KINDS[kind]
    original = module.generate

    def changed(rng, level):
        # the same generator on a stream of its own: same sizes, other numbers. (Throwing one draw away was
        # not enough: where the engine refuses the first draw and keeps the second, the kept one is the same,
        # 63 of 400 scores seeds at level 1, and an assignment's seeds come from a random server secret.)
        return original(np.random.default_rng(rng.integers(2**63)), level)

    monkeypatch.setattr(module, "generate", changed)
    monkeypatch.setattr(module, "VERSION", module.VERSION + 1)
