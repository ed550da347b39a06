"""Checks every small kind's test file makes: its references against an independent NumPy computation, its
guarded mistakes named (exact and rounded to 2 places), the sizes and values of each level, its minutes."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

import exercises
from exercises.core import budget, engine, misconceptions

SEEDS = range(30)


def references_agree(kind: str, oracle: Callable[[Mapping], Mapping[str, np.ndarray]]) -> None:
    """oracle(ex.given) -> {name: value}, computed independently of the step records; every part the
    exercise asks for among them is compared."""
    for level in exercises.KINDS[kind].LEVELS:
        for seed in SEEDS:
            ex = exercises.generate(kind, seed, level)
            expected = oracle(ex.given)
            assert set(ex.part_names) & set(expected), (kind, level, seed, ex.part_names)
            for name, value in expected.items():
                if name not in ex.part_names:
                    continue
                np.testing.assert_allclose(ex.part(name).reference, value, atol=1e-12,
                                           err_msg=f"{kind} level {level} seed {seed} part {name}")


def guarded_mistakes_named(kind: str) -> set[str]:
    """Every guarded mistake that applies is named as itself, exact and rounded to 2 places; the ids seen."""
    seen = set()
    guards = exercises.KINDS[kind].GUARDS
    for level in exercises.KINDS[kind].LEVELS:
        for seed in SEEDS:
            ex = exercises.generate(kind, seed, level)
            right = {p.name: p.reference for p in ex.parts}
            for mid, values in misconceptions.alternatives(ex, guards).items():
                for name, alt in values.items():
                    for shown in (alt, np.round(alt, 2)):
                        part = exercises.grade(ex, {**right, name: shown}).parts[name]
                        assert part.misconception == mid, (kind, level, seed, mid, name, part.misconception)
                seen.add(mid)
    return seen


def levels_hold(kind: str, check: Callable[[exercises.Exercise], None]) -> None:
    """check(ex) for every level and seed, and every exercise within its level's minutes."""
    for level in exercises.KINDS[kind].LEVELS:
        for seed in SEEDS:
            ex = exercises.generate(kind, seed, level)
            check(ex)
            assert engine.minutes(ex) <= budget.BUDGET_MINUTES[level], (kind, level, seed, engine.minutes(ex))
