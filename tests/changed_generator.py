"""A kind's generator changed after an assignment was made: a VERSION bump and other problems."""

from __future__ import annotations

import exercises


def bump(monkeypatch, kind: str) -> None:
    """From now on `kind` gives other exercises for the same (seed, level), under VERSION + 1."""
    module = exercises.KINDS[kind]
    original = module.generate

    def changed(rng, level):
        original(rng, level)  # one draw thrown away: same sizes, other numbers
        return original(rng, level)

    monkeypatch.setattr(module, "generate", changed)
    monkeypatch.setattr(module, "VERSION", module.VERSION + 1)
